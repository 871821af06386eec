package workload

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

// A movable gang's PodGroup, of either API, carries the movable annotation
// beside its other annotations; a big gang's objects are those of any gang,
// and the stock profile's pods carry neither.
func TestMovableAnnotation(t *testing.T) {
	job := scenario.Job{Name: "j", Gang: true, Pods: 2, GPUsPerPod: 8, Movable: true, Big: true,
		Topology: &scenario.Topology{Level: scenario.TierClique, Required: true}}
	o, err := (&Builder{Namespace: "sim", Flavor: GangPlugin, TierKeys: tierKeys}).Build(&job)
	require.NoError(t, err)
	require.Equal(t, map[string]string{
		MovableAnnotation:                     "true",
		scheduling.AnnotationTopologyRequired: tierKeys[scenario.TierClique],
	}, o.GangGroup.Annotations)
	o, err = (&Builder{Namespace: "sim", Flavor: Native, TierKeys: tierKeys}).Build(&job)
	require.NoError(t, err)
	require.Equal(t, map[string]string{MovableAnnotation: "true"}, o.NativeGroup.Annotations)
	o, err = (&Builder{Namespace: "sim", Flavor: Plain, TierKeys: tierKeys}).Build(&job)
	require.NoError(t, err)
	for _, p := range o.Pods {
		require.NotContains(t, p.Annotations, MovableAnnotation)
	}

	job.Movable = false
	o, err = (&Builder{Namespace: "sim", Flavor: GangPlugin, TierKeys: tierKeys}).Build(&job)
	require.NoError(t, err)
	require.NotContains(t, o.GangGroup.Annotations, MovableAnnotation)
}
