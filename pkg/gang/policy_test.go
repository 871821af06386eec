package gang

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

func TestPolicyOf(t *testing.T) {
	leaf, spine := scheduling.LabelLeaf, scheduling.LabelSpine
	kueue := func(key, value string) *v1.Pod { return pod("m").Annotation(key, value).Obj() }
	launcher := func() *st.PodWrapper { return pod("launcher").Label(scheduling.KubeflowReplicaTypeLabel, "launcher") }
	worker := func(name string) *st.PodWrapper {
		return pod(name).Label(scheduling.KubeflowReplicaTypeLabel, "worker")
	}
	tests := []struct {
		name    string
		gang    map[string]string
		members []*v1.Pod
		want    placement.Policy
	}{
		{name: "none", want: placement.Policy{}},
		{name: "required", gang: map[string]string{scheduling.AnnotationTopologyRequired: leaf}, want: placement.Policy{Level: leaf, Required: true}},
		{name: "preferred", gang: map[string]string{scheduling.AnnotationTopologyPreferred: spine}, want: placement.Policy{Level: spine}},
		{name: "required wins", gang: map[string]string{scheduling.AnnotationTopologyRequired: leaf, scheduling.AnnotationTopologyPreferred: spine},
			want: placement.Policy{Level: leaf, Required: true}},
		{name: "kueue required on the first member", members: []*v1.Pod{kueue(scheduling.KueueRequiredTopologyAnnotation, leaf)},
			want: placement.Policy{Level: leaf, Required: true}},
		{name: "the gang's own annotation wins over kueue's", gang: map[string]string{scheduling.AnnotationTopologyPreferred: spine},
			members: []*v1.Pod{kueue(scheduling.KueueRequiredTopologyAnnotation, leaf)}, want: placement.Policy{Level: spine}},
		// Kueue annotates each PodSet's template: a launcher's PodSet may
		// carry none, or its own level, while the workers' states theirs.
		{name: "kueue's on the workers, none on the launcher ranked first",
			members: []*v1.Pod{launcher().Obj(), worker("w0").Annotation(scheduling.KueueRequiredTopologyAnnotation, leaf).Obj()},
			want:    placement.Policy{Level: leaf, Required: true}},
		{name: "the workers' level over the launcher's",
			members: []*v1.Pod{launcher().Annotation(scheduling.KueuePreferredTopologyAnnotation, spine).Obj(),
				worker("w0").Annotation(scheduling.KueueRequiredTopologyAnnotation, leaf).Obj()},
			want: placement.Policy{Level: leaf, Required: true}},
		{name: "a launcher's alone still counts",
			members: []*v1.Pod{launcher().Annotation(scheduling.KueuePreferredTopologyAnnotation, spine).Obj(), worker("w0").Obj()},
			want:    placement.Policy{Level: spine}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PolicyOf(&Spec{Annotations: tt.gang}, tt.members)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PolicyOf (-want,+got):\n%s", diff)
			}
		})
	}
}
