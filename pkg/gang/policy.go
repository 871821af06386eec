package gang

import (
	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// PolicyOf reads a gang's topology policy: the policy its API states in a
// field of its own (a native PodGroup's topology constraint), then the
// gang's own annotations, then Kueue's pod-template annotations (kueueSource
// says whose). Required wins over preferred when both are set. No
// policy anywhere means preferred from the tightest level, the planner's
// default. Whatever the source, the level is a label key the planner checks
// against its configured levels.
func PolicyOf(s *Spec, members []*v1.Pod) placement.Policy {
	if s.Topology != nil {
		return *s.Topology
	}
	sources := []struct{ required, preferred string }{
		{s.Annotations[scheduling.AnnotationTopologyRequired], s.Annotations[scheduling.AnnotationTopologyPreferred]},
	}
	if first := kueueSource(members); first != nil {
		a := first.Annotations
		sources = append(sources, struct{ required, preferred string }{a[scheduling.KueueRequiredTopologyAnnotation], a[scheduling.KueuePreferredTopologyAnnotation]})
	}
	for _, src := range sources {
		if src.required != "" {
			return placement.Policy{Level: src.required, Required: true}
		}
		if src.preferred != "" {
			return placement.Policy{Level: src.preferred}
		}
	}
	return placement.Policy{}
}

// kueueSource is the member whose Kueue topology annotations state the
// gang's policy: the first in the given (rank) order that carries one,
// workers before leaders. Kueue writes the annotations per PodSet, and a
// launcher, master or chief ranks first but is its own one-pod PodSet,
// whose template may carry none, or another level than the workers', whose
// placement is what the policy is for. Nil when no member carries one.
func kueueSource(members []*v1.Pod) *v1.Pod {
	var leader *v1.Pod
	for _, p := range members {
		a := p.Annotations
		if a[scheduling.KueueRequiredTopologyAnnotation] == "" && a[scheduling.KueuePreferredTopologyAnnotation] == "" {
			continue
		}
		if !IsLeader(p) {
			return p
		}
		if leader == nil {
			leader = p
		}
	}
	return leader
}
