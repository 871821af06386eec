package coscheduling

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Builders of the DRA objects the tests publish: what NVIDIA's GPU DRA
// driver and its chart create, and the claims of pods.

// withObjects adds API objects (DRA objects, say) to the cluster the env
// starts with.
func withObjects(objs ...runtime.Object) envOption {
	return func(c *envConfig) { c.objects = append(c.objects, objs...) }
}

// schedulerFeatures are the scheduler plugins' features as the process's
// feature gates set them, as kube-scheduler computes them.
func schedulerFeatures() feature.Features {
	return feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
}

// dynamicResources registers kube-scheduler's DynamicResources plugin, with
// default arguments and the process's features, at the extension points
// where it decides whether and where a pod's devices fit: PreFilter, Filter
// and Reserve (Unreserve comes with it). PostFilter and PreBind, which
// write claims, are left out: tests drive binding themselves. m, when not
// nil, meters its PreFilter.
func dynamicResources(m *threadMeter) tf.RegisterPluginFunc {
	factory := func(ctx context.Context, _ runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
		pl, err := dynamicresources.New(ctx, &schedconfig.DynamicResourcesArgs{}, fh, schedulerFeatures())
		if err != nil || m == nil {
			return pl, err
		}
		return &meteredDRA{DynamicResources: pl.(*dynamicresources.DynamicResources), m: m}, nil
	}
	return tf.RegisterPluginAsExtensions(names.DynamicResources, factory, "PreFilter", "Filter", "Reserve")
}

// withRailFence registers RailFence at PreFilter; named before withDRA,
// it runs before DynamicResources, as the shipped profile orders them.
func withRailFence() envOption {
	return func(c *envConfig) {
		c.filters = append(c.filters, func(*gang.Sources) tf.RegisterPluginFunc {
			return tf.RegisterPluginAsExtensions(RailFenceName, NewRailFence, "PreFilter")
		})
	}
}

// withPlanner plans with p.
func withPlanner(p placement.Planner) envOption {
	return func(c *envConfig) { c.planner = p }
}

// nvidiaClass is the DeviceClass NVIDIA's chart installs for whole GPUs,
// which serves the nvidia.com/gpu extended resource on nodes that do not
// advertise it.
func nvidiaClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: scheduling.DeviceClassGPU},
		Spec: resourceapi.DeviceClassSpec{
			Selectors:            []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: scheduling.DeviceClassGPUSelector}}},
			ExtendedResourceName: ptr.To(string(gpu)),
		},
	}
}

// draNode is a node with 64 CPUs, 512Gi and room for 110 pods that
// advertises no GPU: its GPUs are published as a ResourceSlice.
func draNode(name string) *v1.Node {
	return st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{
		v1.ResourceCPU: "64", v1.ResourceMemory: "512Gi", v1.ResourcePods: "110",
	}).Obj()
}

// gpuSlice is the slice NVIDIA's driver publishes for node: one pool named
// after the node, a device gpu-<minor> per product given, in that order.
func gpuSlice(node string, products ...string) *resourceapi.ResourceSlice {
	devices := make([]resourceapi.Device, len(products))
	for minor, product := range products {
		devices[minor] = resourceapi.Device{
			Name: fmt.Sprint(scheduling.DeviceNameGPUPrefix, minor),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				scheduling.DeviceAttributeType:        {StringValue: ptr.To(scheduling.DeviceTypeGPU)},
				scheduling.DeviceAttributeProductName: {StringValue: ptr.To(product)},
				scheduling.DeviceAttributeUUID:        {StringValue: ptr.To(fmt.Sprintf("GPU-%s-%d", node, minor))},
			},
		}
	}
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + scheduling.DRADriverGPU},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   scheduling.DRADriverGPU,
			Pool:     resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(node),
			Devices:  devices,
		},
	}
}

// gpuClaimSpec asks for count whole GPUs of class, of product when it is
// not "".
func gpuClaimSpec(class string, count int64, product string) resourceapi.ResourceClaimSpec {
	req := &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}
	if product != "" {
		req.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf(`device.attributes[%q].%s == %q`, scheduling.DRADriverGPU, scheduling.DeviceAttributeProductName, product)}}}
	}
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpus", Exactly: req}}}}
}

// claimTemplate is a ResourceClaimTemplate of spec.
func claimTemplate(ns, name string, spec resourceapi.ResourceClaimSpec) *resourceapi.ResourceClaimTemplate {
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: spec},
	}
}

// claimFromTemplate gives pod a claim entry named entry that uses tmpl, and
// returns the claim the resource claim controller makes for it, which the
// pod's status names, as the controller records it.
func claimFromTemplate(pod *v1.Pod, entry string, tmpl *resourceapi.ResourceClaimTemplate) *resourceapi.ResourceClaim {
	name := pod.Name + "-" + entry
	pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, v1.PodResourceClaim{Name: entry, ResourceClaimTemplateName: ptr.To(tmpl.Name)})
	pod.Status.ResourceClaimStatuses = append(pod.Status.ResourceClaimStatuses, v1.PodResourceClaimStatus{Name: entry, ResourceClaimName: ptr.To(name)})
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pod.Namespace, Name: name, UID: types.UID(pod.Namespace + "/" + name),
			Annotations: map[string]string{"resource.kubernetes.io/pod-claim-name": entry},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: *tmpl.Spec.Spec.DeepCopy(),
	}
}

// allocatedClaim is a claim of another workload, allocated the named GPUs
// of node and reserved for a pod of it.
func allocatedClaim(ns, name, node string, devices ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name), Finalizers: []string{resourceapi.Finalizer}},
		Spec:       gpuClaimSpec(scheduling.DeviceClassGPU, int64(len(devices)), ""),
	}
	results := make([]resourceapi.DeviceRequestAllocationResult, len(devices))
	for i, d := range devices {
		results[i] = resourceapi.DeviceRequestAllocationResult{Request: "gpus", Driver: scheduling.DRADriverGPU, Pool: node, Device: d}
	}
	c.Status.Allocation = &resourceapi.AllocationResult{
		Devices: resourceapi.DeviceAllocationResult{Results: results},
		NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{
			Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{node},
		}}}}},
	}
	c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: name, UID: types.UID(ns + "/" + name + "-pod")}}
	return c
}
