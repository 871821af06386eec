package gang

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

func TestPolicyOf(t *testing.T) {
	leaf, spine := scheduling.LabelLeaf, scheduling.LabelSpine
	kueue := func(key, value string) *v1.Pod { return pod("m").Annotation(key, value).Obj() }
	tests := []struct {
		name  string
		gang  map[string]string
		first *v1.Pod
		want  placement.Policy
	}{
		{name: "none", want: placement.Policy{}},
		{name: "required", gang: map[string]string{scheduling.AnnotationTopologyRequired: leaf}, want: placement.Policy{Level: leaf, Required: true}},
		{name: "preferred", gang: map[string]string{scheduling.AnnotationTopologyPreferred: spine}, want: placement.Policy{Level: spine}},
		{name: "required wins", gang: map[string]string{scheduling.AnnotationTopologyRequired: leaf, scheduling.AnnotationTopologyPreferred: spine},
			want: placement.Policy{Level: leaf, Required: true}},
		{name: "kueue required on the first member", first: kueue(scheduling.KueueRequiredTopologyAnnotation, leaf),
			want: placement.Policy{Level: leaf, Required: true}},
		{name: "the gang's own annotation wins over kueue's", gang: map[string]string{scheduling.AnnotationTopologyPreferred: spine},
			first: kueue(scheduling.KueueRequiredTopologyAnnotation, leaf), want: placement.Policy{Level: spine}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PolicyOf(&Spec{Annotations: tt.gang}, tt.first)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PolicyOf (-want,+got):\n%s", diff)
			}
		})
	}
}
