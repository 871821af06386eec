package fleet

import (
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// GPUKind is what an extended resource says about the GPU it hands out.
type GPUKind int

// GPU kinds.
const (
	// NotGPU is any other resource, including other vendors'
	// accelerators: CUDA and driver rules do not apply to them.
	NotGPU GPUKind = iota
	// WholeGPU is nvidia.com/gpu: a whole GPU, unless the node shares its
	// GPUs or runs MIG's single strategy.
	WholeGPU
	// SharedGPU is a renamed share of a GPU under time-slicing or MPS:
	// nvidia.com/gpu.shared, or a MIG profile with the .shared suffix.
	SharedGPU
	// MIGSlice is a MIG profile under the mixed strategy, such as
	// nvidia.com/mig-1g.10gb.
	MIGSlice
)

// ResourceKind classifies a resource name. NVIDIA's device plugin names
// every GPU resource under nvidia.com/: nvidia.com/gpu, nvidia.com/mig-*
// profiles, and either of those with ".shared" appended when sharing
// renames them.
func ResourceKind(name v1.ResourceName) GPUKind {
	s := string(name)
	switch {
	case s == scheduling.ResourceGPU:
		return WholeGPU
	case strings.HasPrefix(s, "nvidia.com/") && strings.HasSuffix(s, scheduling.ResourceSharedSuffix) &&
		(s == scheduling.ResourceGPUShared || strings.HasPrefix(s, scheduling.ResourceMIGPrefix)):
		return SharedGPU
	case strings.HasPrefix(s, scheduling.ResourceMIGPrefix):
		return MIGSlice
	}
	return NotGPU
}

// Demand is which kinds of NVIDIA GPU a member requests. Only members that
// request some GPU are bound by Requirements: a launcher or parameter
// server that asks for CPUs goes anywhere. Demand is comparable.
type Demand struct {
	// Whole, Shared and MIG are the GPU resources the member requests
	// (ResourceKind).
	Whole  bool
	Shared bool
	MIG    bool
	// DRA is set when the member takes the devices of NVIDIA's GPU DRA
	// driver through Dynamic Resource Allocation (see PodDemand). Which
	// devices, and whether it shares them, its claims decide.
	DRA bool
}

// Any reports whether the member requests any NVIDIA GPU.
func (d Demand) Any() bool { return d.Whole || d.Shared || d.MIG || d.DRA }

// DemandOf reads a demand from a member's requests, such as
// resourcehelper.PodRequests: every resource with a positive quantity
// counts.
func DemandOf(requests v1.ResourceList) Demand {
	var d Demand
	for name, q := range requests {
		// Only sets booleans, so map order does not matter.
		if q.Sign() <= 0 {
			continue
		}
		switch ResourceKind(name) {
		case WholeGPU:
			d.Whole = true
		case SharedGPU:
			d.Shared = true
		case MIGSlice:
			d.MIG = true
		}
	}
	return d
}
