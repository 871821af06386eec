package metrics

import (
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
)

// claimSpecs holds what the run's ResourceClaimTemplates and named
// ResourceClaims ask for, by name (the run uses one namespace), so that a
// pod's GPUs can be counted from the pod alone, the same way in every
// profile. It is filled before the first pod is seen and only read after.
type claimSpecs struct {
	templates map[string]*resourceapi.ResourceClaimSpec
	claims    map[string]*resourceapi.ResourceClaimSpec
}

// podGPUs counts the GPUs pod holds once bound to a node of nodeGPUs GPUs:
//   - its nvidia.com/gpu request as the scheduler counts it
//     (fabric.GPUsOf), whether the device plugin serves it or DRA does
//     through the DeviceClass's extendedResourceName (the claim the
//     scheduler then makes for the pod is not counted again: it holds those
//     very GPUs);
//   - the gpu.nvidia.com devices its claims request, whether it names a
//     claim or a template: an exact count, or every such device of the node
//     for allocation mode All. For a prioritized list, the first
//     subrequest counts; the simulator makes none.
//
// For the whole-device claims the simulator makes, what a bound pod's
// claims request is exactly what the scheduler allocated to them. A claim
// shared by several pods would count for each; the simulator shares none.
func (c *claimSpecs) podGPUs(pod *v1.Pod, nodeGPUs int) int {
	n := int64(fabric.GPUsOf(pod))
	for _, pc := range pod.Spec.ResourceClaims {
		var spec *resourceapi.ResourceClaimSpec
		switch {
		case pc.ResourceClaimName != nil:
			spec = c.claims[*pc.ResourceClaimName]
		case pc.ResourceClaimTemplateName != nil:
			spec = c.templates[*pc.ResourceClaimTemplateName]
		}
		if spec != nil {
			n += requestedGPUs(spec, nodeGPUs)
		}
	}
	return int(n)
}

// requestedGPUs counts the gpu.nvidia.com devices a claim asks for on a node
// of nodeGPUs GPUs.
func requestedGPUs(spec *resourceapi.ResourceClaimSpec, nodeGPUs int) int64 {
	count := func(class string, mode resourceapi.DeviceAllocationMode, n int64) int64 {
		switch {
		case class != scheduling.DeviceClassGPU:
			return 0
		case mode == resourceapi.DeviceAllocationModeAll:
			return int64(nodeGPUs)
		case n == 0: // ExactCount's default
			return 1
		}
		return n
	}
	var n int64
	for _, r := range spec.Devices.Requests {
		switch {
		case r.Exactly != nil:
			n += count(r.Exactly.DeviceClassName, r.Exactly.AllocationMode, r.Exactly.Count)
		case len(r.FirstAvailable) > 0:
			s := r.FirstAvailable[0]
			n += count(s.DeviceClassName, s.AllocationMode, s.Count)
		}
	}
	return n
}

// KnowClaims tells the tracker what the run's ResourceClaimTemplates and
// named ResourceClaims ask for; nil entries are skipped. Call it before
// any pod that uses them binds.
func (t *Tracker) KnowClaims(templates []*resourceapi.ResourceClaimTemplate, claims []*resourceapi.ResourceClaim) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tp := range templates {
		if tp != nil {
			t.claimSpecs.templates[tp.Name] = &tp.Spec.Spec
		}
	}
	for _, c := range claims {
		if c != nil {
			t.claimSpecs.claims[c.Name] = &c.Spec
		}
	}
}

// PodGPUs counts the GPUs pod holds once bound to a node of nodeGPUs GPUs,
// as the tracker counts them (see claimSpecs.podGPUs), for other trackers
// of the run.
func (t *Tracker) PodGPUs(pod *v1.Pod, nodeGPUs int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.claimSpecs.podGPUs(pod, nodeGPUs)
}
