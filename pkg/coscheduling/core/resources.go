package core

import (
	"sort"

	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Dimensions are the vector dimensions for a gang: the resources any member
// requests, in name order so that vectors are deterministic.
func Dimensions(members []capacity.Amounts) []v1.ResourceName {
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
