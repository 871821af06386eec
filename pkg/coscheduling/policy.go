package coscheduling

import (
	v1 "k8s.io/api/core/v1"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// topologyPolicy reads a gang's policy: the PodGroup's annotations first,
// then Kueue's on its first member in rank order. Required wins over
// preferred when both are set. No annotation means preferred from the
// tightest level, which the planner does by default.
func topologyPolicy(pg *v1alpha1.PodGroup, members []*v1.Pod) placement.Policy {
	sources := []struct{ required, preferred string }{
		{pg.Annotations[scheduling.AnnotationTopologyRequired], pg.Annotations[scheduling.AnnotationTopologyPreferred]},
	}
	if len(members) > 0 {
		a := members[0].Annotations
		sources = append(sources, struct{ required, preferred string }{a[scheduling.KueueRequiredTopologyAnnotation], a[scheduling.KueuePreferredTopologyAnnotation]})
	}
	for _, s := range sources {
		if s.required != "" {
			return placement.Policy{Level: s.required, Required: true}
		}
		if s.preferred != "" {
			return placement.Policy{Level: s.preferred}
		}
	}
	return placement.Policy{}
}
