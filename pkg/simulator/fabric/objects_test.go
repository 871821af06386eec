package fabric

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// A pod takes its GPUs as the scheduler counts them: containers added up,
// or the largest init container if that is more.
func TestGPUsOf(t *testing.T) {
	gpus := func(n string) v1.ResourceRequirements {
		return v1.ResourceRequirements{Requests: v1.ResourceList{GPU: resource.MustParse(n), v1.ResourceCPU: resource.MustParse("1")}}
	}
	for _, tc := range []struct {
		name string
		spec v1.PodSpec
		want int
	}{
		{name: "no GPUs", spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}},
		{name: "containers add up", spec: v1.PodSpec{Containers: []v1.Container{{Name: "a", Resources: gpus("2")}, {Name: "b", Resources: gpus("4")}}}, want: 6},
		{name: "a larger init container wins", spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "warm", Resources: gpus("8")}},
			Containers:     []v1.Container{{Name: "a", Resources: gpus("2")}, {Name: "b", Resources: gpus("4")}}}, want: 8},
		{name: "a smaller init container does not", spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "warm", Resources: gpus("1")}},
			Containers:     []v1.Container{{Name: "a", Resources: gpus("2")}}}, want: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := GPUsOf(&v1.Pod{Spec: tc.spec}); got != tc.want {
				t.Errorf("GPUsOf = %d, want %d", got, tc.want)
			}
		})
	}
}
