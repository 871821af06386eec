package workload

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

// GPUClaim names a pod's claim of its GPUs, the one request in that claim,
// and the container's reference to the claim.
const GPUClaim = "gpus"

// ClaimTemplate is the ResourceClaimTemplate of a job whose pods claim
// their GPUs (scenario.GPURequestClaim): each pod gets a claim of its own
// for exactly the job's GPUs per pod of DeviceClass gpu.nvidia.com, which
// the resourceclaim controller creates; for a job that claims NICs too
// (scenario.GPURequestClaimWithNICs), one GPU and one RDMA NIC per pair of
// requests under one PCIe root (see gpuNICClaimSpec). It is named after
// the job, as a training operator would name it, and is nil for other
// jobs. Its claims carry the job's labels, so that they can be told apart
// from pre-fill's.
func (b *Builder) ClaimTemplate(job *scenario.Job) *resourceapi.ResourceClaimTemplate {
	if !job.ClaimsGPUs() {
		return nil
	}
	labels := map[string]string{JobLabel: job.Name, RoleLabel: RoleWorkload}
	spec := gpuClaimSpec(job.GPUsPerPod)
	if job.ClaimsNICs() {
		spec = gpuNICClaimSpec(job.GPUsPerPod)
	}
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: job.Name, Namespace: b.Namespace, Labels: labels},
		Spec: resourceapi.ResourceClaimTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       spec,
		},
	}
}

// useClaimTemplate makes pod take its GPUs through a claim from the job's
// template instead of an nvidia.com/gpu request.
func useClaimTemplate(pod *v1.Pod, template string) {
	pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: GPUClaim, ResourceClaimTemplateName: ptr.To(template)}}
	claimInContainer(pod)
}

// claimInContainer moves the pod's GPUs from its container's requests and
// limits to its claim GPUClaim.
func claimInContainer(pod *v1.Pod) {
	c := &pod.Spec.Containers[0]
	delete(c.Resources.Requests, gpuResource)
	delete(c.Resources.Limits, gpuResource)
	c.Resources.Claims = []v1.ResourceClaim{{Name: GPUClaim}}
}

func gpuClaimSpec(gpus int) resourceapi.ResourceClaimSpec {
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
		Name: GPUClaim,
		Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: scheduling.DeviceClassGPU,
			AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
			Count:           int64(gpus),
		},
	}}}}
}

// GPURequestName and NICRequestName name the requests of pair k in a claim
// of GPUs and NICs: gpu-k and nic-k.
func GPURequestName(k int) string { return "gpu-" + strconv.Itoa(k) }

// NICRequestName is the NIC request of pair k (see GPURequestName).
func NICRequestName(k int) string { return "nic-" + strconv.Itoa(k) }

// gpuNICClaimSpec asks for gpus GPUs and as many RDMA NICs, as users write
// it for a rail-optimized node: pair k is request gpu-k (one device of
// DeviceClass gpu.nvidia.com) and request nic-k (one of DeviceClass dra.net
// with rdma true), and a constraint that the pair's devices match
// resource.kubernetes.io/pcieRoot. One matchAttribute over the whole claim
// would put every device under one root, which no node offers for more
// than one GPU.
func gpuNICClaimSpec(gpus int) resourceapi.ResourceClaimSpec {
	var spec resourceapi.ResourceClaimSpec
	for k := range gpus {
		gpu, nic := GPURequestName(k), NICRequestName(k)
		spec.Devices.Requests = append(spec.Devices.Requests,
			resourceapi.DeviceRequest{Name: gpu, Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: scheduling.DeviceClassGPU,
				AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
				Count:           1,
			}},
			resourceapi.DeviceRequest{Name: nic, Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: fabric.DeviceClassNIC,
				Selectors:       []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: fabric.RDMASelector}}},
				AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
				Count:           1,
			}})
		spec.Devices.Constraints = append(spec.Devices.Constraints, resourceapi.DeviceConstraint{
			Requests:       []string{gpu, nic},
			MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(fabric.AttributePCIeRoot)),
		})
	}
	return spec
}

// PrefillClaim builds the claim through which pre-fill pod index holds gpus
// GPUs of a DRA node, already allocated on that node (the first gpus
// devices of its pool) as the scheduler would have: create it, then write
// its status. Once the pod exists, bound to the node, the resourceclaim
// controller reserves the claim for it.
func PrefillClaim(namespace string, index int, node string, gpus int) *resourceapi.ResourceClaim {
	minors := make([]int, gpus)
	for i := range minors {
		minors[i] = i
	}
	return PrefillClaimOf(namespace, index, node, minors)
}

// PrefillClaimOf is PrefillClaim for the GPUs of the given minors.
func PrefillClaimOf(namespace string, index int, node string, minors []int) *resourceapi.ResourceClaim {
	gpus := len(minors)
	results := make([]resourceapi.DeviceRequestAllocationResult, gpus)
	for i, minor := range minors {
		results[i] = resourceapi.DeviceRequestAllocationResult{
			Request: GPUClaim, Driver: scheduling.DRADriverGPU, Pool: node,
			Device: scheduling.DeviceNameGPUPrefix + strconv.Itoa(minor),
		}
	}
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:       prefillName(index),
			Namespace:  namespace,
			Labels:     map[string]string{RoleLabel: RolePrefill},
			Finalizers: []string{resourceapi.Finalizer},
		},
		Spec: gpuClaimSpec(gpus),
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: results},
			NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{node}}},
			}}},
		}},
	}
}

func prefillName(index int) string { return fmt.Sprintf("prefill-%d", index) }
