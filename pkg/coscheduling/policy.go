package coscheduling

import (
	v1 "k8s.io/api/core/v1"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Annotations on a PodGroup that set its topology policy. The value is the
// node label key of one of the configured topology levels (for example
// network.topology.nvidia.com/leaf), or kubernetes.io/hostname for one node.
const (
	// AnnotationTopologyRequired makes the level a hard constraint: the gang
	// starts inside one domain of that level, or waits.
	AnnotationTopologyRequired = "gpu-gang.x-k8s.io/topology-required"
	// AnnotationTopologyPreferred starts the search at that level and falls
	// back up the hierarchy when no domain there has room.
	AnnotationTopologyPreferred = "gpu-gang.x-k8s.io/topology-preferred"
)

// Kueue's pod-template annotations for the same two policies, read from the
// members when the PodGroup sets neither, so manifests written for Kueue
// topology-aware scheduling keep working.
const (
	kueueRequiredTopology  = "kueue.x-k8s.io/podset-required-topology"
	kueuePreferredTopology = "kueue.x-k8s.io/podset-preferred-topology"
)

// topologyPolicy reads a gang's policy: the PodGroup's annotations first,
// then Kueue's on its first member in rank order. Required wins over
// preferred when both are set. No annotation means preferred from the
// tightest level, which the planner does by default.
func topologyPolicy(pg *v1alpha1.PodGroup, members []*v1.Pod) placement.Policy {
	sources := []struct{ required, preferred string }{
		{pg.Annotations[AnnotationTopologyRequired], pg.Annotations[AnnotationTopologyPreferred]},
	}
	if len(members) > 0 {
		a := members[0].Annotations
		sources = append(sources, struct{ required, preferred string }{a[kueueRequiredTopology], a[kueuePreferredTopology]})
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
