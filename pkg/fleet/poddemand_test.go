package fleet

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
)

const testNS = "team-a"

// draObjects is an in-memory store that reads like the DRA manager's
// listers.
type draObjects struct {
	claims  map[string]*resourceapi.ResourceClaim
	classes map[string]*resourceapi.DeviceClass
}

type claimGetter struct{ *draObjects }

func (o claimGetter) Get(ns, name string) (*resourceapi.ResourceClaim, error) {
	if c, ok := o.claims[ns+"/"+name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, name)
}

type classGetter struct{ *draObjects }

func (o classGetter) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := o.classes[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "deviceclasses"}, name)
}

// GetDeviceClass resolves extended resources by the explicit mapping and
// the implicit deviceclass.resource.kubernetes.io/<class> name.
func (o *draObjects) GetDeviceClass(name v1.ResourceName) *resourceapi.DeviceClass {
	for _, c := range o.classes {
		if ptr.Deref(c.Spec.ExtendedResourceName, "") == string(name) || "deviceclass.resource.kubernetes.io/"+c.Name == string(name) {
			return c
		}
	}
	return nil
}

func selectorClass(name, expr string) *resourceapi.DeviceClass {
	c := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if expr != "" {
		c.Spec.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}
	}
	return c
}

func exactly(class string, selectors ...string) resourceapi.DeviceRequest {
	r := resourceapi.DeviceRequest{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}
	for _, s := range selectors {
		r.Exactly.Selectors = append(r.Exactly.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: s}})
	}
	return r
}

func testClaim(name string, requests ...resourceapi.DeviceRequest) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: requests}},
	}
}

func allocatedTo(c *resourceapi.ResourceClaim, driver string) *resourceapi.ResourceClaim {
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
		Results: []resourceapi.DeviceRequestAllocationResult{{Request: "r", Driver: driver, Pool: "dra", Device: "dev-0"}}}}
	return c
}

func claimPod(name string, res v1.ResourceList, claims ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name}}
	p.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: res, Limits: res}}}
	for _, c := range claims {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: c, ResourceClaimName: ptr.To(c)})
	}
	return p
}

// Which pods are GPU pods: by their requests, and by the devices their
// claims and mapped extended resources select.
func TestPodDemand(t *testing.T) {
	const gpuSel = `device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"`
	classes := []*resourceapi.DeviceClass{
		selectorClass("gpu.nvidia.com", gpuSel),
		selectorClass("mig.nvidia.com", `device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "mig"`),
		selectorClass("any", ""),
		selectorClass("nic", `device.driver == "rdma.example.com"`),
	}
	classes[0].Spec.ExtendedResourceName = ptr.To(scheduling.ResourceGPU)
	objs := &draObjects{claims: map[string]*resourceapi.ResourceClaim{}, classes: map[string]*resourceapi.DeviceClass{}}
	for _, c := range classes {
		objs.classes[c.Name] = c
	}
	for _, c := range []*resourceapi.ResourceClaim{
		testClaim("gpus", exactly("gpu.nvidia.com")),
		testClaim("mig", exactly("mig.nvidia.com")),
		testClaim("any-gpu", exactly("any", `device.driver == "gpu.nvidia.com"`)),
		testClaim("any-nic", exactly("any", `device.driver == "rdma.example.com"`)),
		testClaim("nic", exactly("nic")),
		testClaim("h200", exactly("gpu.nvidia.com", `device.attributes["gpu.nvidia.com"].productName == "NVIDIA H200"`)),
		testClaim("nic-or-gpu", resourceapi.DeviceRequest{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
			{Name: "nic", DeviceClassName: "nic", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
			{Name: "gpu", DeviceClassName: "gpu.nvidia.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
		}}),
		allocatedTo(testClaim("allocated-gpus", exactly("gpu.nvidia.com")), scheduling.DRADriverGPU),
		allocatedTo(testClaim("allocated-nic", exactly("nic")), "rdma.example.com"),
		testClaim("unknown-class", exactly("no-such-class")),
	} {
		objs.claims[c.Namespace+"/"+c.Name] = c
	}
	reader := &capacity.Reader{Claims: claimGetter{objs}, Classes: classGetter{objs}, Resolver: objs}

	nic := makeDevice("nic-0", "nic").driver("rdma.example.com").obj()
	nic.Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}
	slice := func(driver string, devs ...capacity.Device) *resourceapi.ResourceSlice {
		s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "dra-" + driver}, Spec: resourceapi.ResourceSliceSpec{
			Driver: driver, Pool: resourceapi.ResourcePool{Name: "dra", Generation: 1, ResourceSliceCount: 1}, NodeName: ptr.To("dra")}}
		for _, d := range devs {
			s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: d.Name, Attributes: d.Attributes})
		}
		return s
	}
	inv := capacity.BuildInventory([]*resourceapi.ResourceSlice{
		slice(scheduling.DRADriverGPU, h100s(1)[0].obj(), gpuDevice("gpu-1-mig-0", h100Name, "550.54.15", "12.4.0", "9.0.0").str("type", "mig").obj()),
		slice("rdma.example.com", nic),
	})
	m := capacity.NewMatcher(inv, cel.NewCache(10, cel.Features{}))
	evaluated := 0
	selects := func(k *capacity.Kind) bool {
		evaluated++
		return SelectsGPUs(context.Background(), m, k)
	}

	gpu8 := v1.ResourceList{scheduling.ResourceGPU: resource.MustParse("8")}
	tests := []struct {
		name    string
		pod     *v1.Pod
		reader  *capacity.Reader
		want    Demand
		wantErr any
	}{
		{name: "nvidia.com/gpu, read without DRA", pod: claimPod("p", gpu8), want: Demand{Whole: true}},
		{name: "a CPU pod", pod: claimPod("p", v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}), reader: reader},
		{name: "nvidia.com/gpu, which the chart's class maps", pod: claimPod("p", gpu8), reader: reader, want: Demand{Whole: true, DRA: true}},
		{name: "the implicit name of a GPU class", pod: claimPod("p", v1.ResourceList{"deviceclass.resource.kubernetes.io/mig.nvidia.com": resource.MustParse("1")}),
			reader: reader, want: Demand{DRA: true}},
		{name: "the implicit name of the NIC class", pod: claimPod("p", v1.ResourceList{"deviceclass.resource.kubernetes.io/nic": resource.MustParse("1")}), reader: reader},
		{name: "a claim of the chart's GPU class", pod: claimPod("p", nil, "gpus"), reader: reader, want: Demand{DRA: true}},
		{name: "a claim of MIG slices", pod: claimPod("p", nil, "mig"), reader: reader, want: Demand{DRA: true}},
		{name: "a generic class narrowed to the driver by the request", pod: claimPod("p", nil, "any-gpu"), reader: reader, want: Demand{DRA: true}},
		{name: "a generic class narrowed to NICs", pod: claimPod("p", nil, "any-nic"), reader: reader},
		{name: "a NIC claim", pod: claimPod("p", nil, "nic"), reader: reader},
		{name: "a GPU nobody publishes selects nothing", pod: claimPod("p", nil, "h200"), reader: reader},
		{name: "firstAvailable: any subrequest that may get GPUs", pod: claimPod("p", nil, "nic", "nic-or-gpu"), reader: reader, want: Demand{DRA: true}},
		{name: "an allocated claim, by the driver of its devices", pod: claimPod("p", nil, "allocated-gpus"), reader: reader, want: Demand{DRA: true}},
		{name: "an allocated NIC claim", pod: claimPod("p", nil, "allocated-nic"), reader: reader},
		{name: "a claim that does not exist yet", pod: claimPod("p", nil, "later"), reader: reader, wantErr: new(*capacity.ClaimNotFoundError)},
		{name: "a class that does not exist", pod: claimPod("p", nil, "unknown-class"), reader: reader, wantErr: new(*capacity.ClassNotFoundError)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PodDemand(tt.pod, tt.reader, selects)
			if tt.wantErr != nil {
				require.Error(t, err)
				require.True(t, errors.As(err, tt.wantErr), "error %v", err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
	require.Positive(t, evaluated)
}
