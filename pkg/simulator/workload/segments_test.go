package workload

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

// TestBuildSegments: each flavor states the same hierarchy, six members
// in segments of two that each need one clique, two of three segments
// needed, the whole inside one leaf, in its own form.
func TestBuildSegments(t *testing.T) {
	job := scenario.Job{Name: "j", Gang: true, Pods: 6, GPUsPerPod: 8, Priority: 5,
		Topology: &scenario.Topology{Level: scenario.TierLeaf, Required: true},
		Segments: &scenario.Segments{Size: 2, Level: scenario.TierClique, MinCount: 2}}
	const clique, leaf = "nvidia.com/gpu.clique", "network.topology.nvidia.com/leaf"
	segmentsOf := func(o *Objects) []string {
		var out []string
		for _, p := range o.Pods {
			out = append(out, p.Labels[SegmentLabel])
		}
		return out
	}
	wantSegments := []string{"0", "0", "1", "1", "2", "2"}

	t.Run("gpu-gang", func(t *testing.T) {
		o, err := (&Builder{Namespace: "sim", Flavor: GangPlugin, TierKeys: tierKeys}).Build(&job)
		require.NoError(t, err)
		require.Equal(t, int32(4), o.GangGroup.Spec.MinMember, "two whole segments")
		require.Equal(t, map[string]string{
			scheduling.AnnotationTopologyRequired:        leaf,
			scheduling.AnnotationSegmentSize:             "2",
			scheduling.AnnotationSegmentTopologyRequired: clique,
		}, o.GangGroup.Annotations)
		require.Equal(t, wantSegments, segmentsOf(o))
		for _, p := range o.Pods {
			require.NotContains(t, p.Annotations, scheduling.KueueSliceSizeAnnotation)
		}
	})
	t.Run("gpu-gang with Kueue's annotations", func(t *testing.T) {
		kueue := job
		kueue.Segments = &scenario.Segments{Size: 2, Level: scenario.TierClique, MinCount: 2, Kueue: true}
		o, err := (&Builder{Namespace: "sim", Flavor: GangPlugin, TierKeys: tierKeys}).Build(&kueue)
		require.NoError(t, err)
		require.Empty(t, o.GangGroup.Annotations, "the gang's level goes to the pods with the slices")
		require.Equal(t, int32(4), o.GangGroup.Spec.MinMember)
		for _, p := range o.Pods {
			require.Equal(t, map[string]string{
				scheduling.KueueRequiredTopologyAnnotation:      leaf,
				scheduling.KueueSliceSizeAnnotation:             "2",
				scheduling.KueueSliceRequiredTopologyAnnotation: clique,
			}, p.Annotations)
		}
	})
	t.Run("native: a composite of one PodGroup per segment", func(t *testing.T) {
		o, err := (&Builder{Namespace: "sim", Flavor: Native, TierKeys: tierKeys}).Build(&job)
		require.NoError(t, err)
		require.Nil(t, o.NativeGroup)
		c := o.Composite
		require.Equal(t, "j", c.Name)
		require.Equal(t, int32(2), c.Spec.SchedulingPolicy.Gang.MinGroupCount)
		require.Equal(t, leaf, c.Spec.SchedulingConstraints.Topology[0].Key)
		require.NotNil(t, c.Spec.WorkloadRef)
		require.NotNil(t, c.Spec.DisruptionMode.All)
		require.Equal(t, "sim-priority-5", c.Spec.PriorityClassName)
		require.Len(t, o.SegmentGroups, 3)
		for i, pg := range o.SegmentGroups {
			require.Equal(t, "j-s"+wantSegments[2*i], pg.Name)
			require.Equal(t, ptr.To("j"), pg.Spec.ParentCompositePodGroupName)
			require.NotNil(t, pg.Spec.WorkloadRef, "the API requires one beside a parent")
			require.Equal(t, int32(2), pg.Spec.SchedulingPolicy.Gang.MinCount)
			require.Equal(t, clique, pg.Spec.SchedulingConstraints.Topology[0].Key)
		}
		for i, p := range o.Pods {
			require.Equal(t, "j-s"+wantSegments[i], *p.Spec.SchedulingGroup.PodGroupName)
		}
		require.Equal(t, wantSegments, segmentsOf(o))
	})
	t.Run("default: just pods", func(t *testing.T) {
		o, err := (&Builder{Namespace: "sim", Flavor: Plain, TierKeys: tierKeys}).Build(&job)
		require.NoError(t, err)
		require.Nil(t, o.GangGroup)
		require.Nil(t, o.Composite)
		require.Equal(t, wantSegments, segmentsOf(o))
	})
}
