package coscheduling

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/fleet"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// usesAccelerators reports whether a requests any accelerator
// (fleet.IsAccelerator), such as nvidia.com/gpu. Only such members are
// bound by topology.
func usesAccelerators(a capacity.Amounts) bool {
	for name, q := range a {
		if q > 0 && fleet.IsAccelerator(name) {
			return true
		}
	}
	return false
}

// resourceQuantity reads one resource from a framework Resource in the same
// units as capacity.Amounts.
func resourceQuantity(r fwk.Resource, name v1.ResourceName) int64 {
	switch name {
	case v1.ResourceCPU:
		return r.GetMilliCPU()
	case v1.ResourceMemory:
		return r.GetMemory()
	case v1.ResourceEphemeralStorage:
		return r.GetEphemeralStorage()
	case v1.ResourcePods:
		return int64(r.GetAllowedPodNumber())
	}
	return r.GetScalarResources()[name]
}

// nodeFree is what is left on a node for one resource: allocatable minus what
// its pods (assumed ones included) request. The pod count comes from the pod
// list, since Resource does not track it.
func nodeFree(ni fwk.NodeInfo, name v1.ResourceName) int64 {
	if name == v1.ResourcePods {
		return int64(ni.GetAllocatable().GetAllowedPodNumber() - len(ni.GetPods()))
	}
	return resourceQuantity(ni.GetAllocatable(), name) - resourceQuantity(ni.GetRequested(), name)
}

// fitsWithHeld reports whether pod fits on the node once held is set aside,
// and if not, the first resource (in name order) that is short.
func fitsWithHeld(ni fwk.NodeInfo, pod, held capacity.Amounts) (bool, v1.ResourceName) {
	for _, name := range pod.Names() {
		if pod[name] == 0 || held[name] == 0 {
			continue
		}
		if pod[name]+held[name] > nodeFree(ni, name) {
			return false, name
		}
	}
	return true, ""
}

// dimensions are the vector dimensions for a gang: the resources any member
// requests, in name order so that vectors are deterministic.
func dimensions(members []capacity.Amounts) []v1.ResourceName {
	seen := map[v1.ResourceName]bool{}
	for _, m := range members {
		for name, q := range m {
			if q > 0 {
				seen[name] = true
			}
		}
	}
	names := make([]v1.ResourceName, 0, len(seen))
	for name := range seen {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

func toVector(dims []v1.ResourceName, a capacity.Amounts) placement.Vector {
	v := make(placement.Vector, len(dims))
	for i, name := range dims {
		v[i] = a[name]
	}
	return v
}

func dimNames(dims []v1.ResourceName) []string {
	out := make([]string, len(dims))
	for i, d := range dims {
		out[i] = string(d)
	}
	return out
}
