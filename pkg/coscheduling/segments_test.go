package coscheduling

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

func TestSegmentedGangs(t *testing.T) {
	// Free: 4 GPUs on each node of s0-l0, s0-l1-n0 and s1-l1-n1 whole. The
	// flat plan of four 4-GPU members stays in spine s0 and puts ranks 0
	// and 1 on two nodes; segments of two ranks on one node take the two
	// whole nodes.
	used := map[string]string{"s0-l0-n0": "4", "s0-l0-n1": "4", "s0-l1-n1": "8", "s1-l0-n0": "8", "s1-l0-n1": "8", "s1-l1-n0": "8"}
	for _, tc := range []struct {
		name                 string
		onPodGroup, onMember map[string]string
	}{
		{"gpu-gang's PodGroup annotations", map[string]string{
			scheduling.AnnotationSegmentSize: "2", scheduling.AnnotationSegmentTopologyRequired: scheduling.HostnameKey}, nil},
		{"Kueue's slice annotations", nil, map[string]string{
			scheduling.KueueSliceSizeAnnotation: "2", scheduling.KueueSliceRequiredTopologyAnnotation: scheduling.HostnameKey}},
	} {
		t.Run("each segment lands on one node: "+tc.name, func(t *testing.T) {
			job := members("seg", 4, "4")
			pods := slices.Clone(job)
			for _, p := range job {
				p.Annotations = tc.onMember
			}
			for _, n := range slices.Sorted(maps.Keys(used)) {
				pods = append(pods, batchPod("busy-"+n, n, used[n]))
			}
			pg := gangtest.MakePodGroup("seg", testNS).MinMember(4)
			for k, v := range tc.onPodGroup {
				pg.Annotation(k, v)
			}
			env := newTestEnv(t, fabric(), pods, []*v1alpha1.PodGroup{pg.Obj()}, withTopology(t))
			got := plannedNodes(t, env, job)
			require.Equal(t, got[0], got[1], "ranks 0 and 1: %v", got)
			require.Equal(t, got[2], got[3], "ranks 2 and 3: %v", got)
			require.ElementsMatch(t, []string{"s0-l1-n0", "s1-l1-n1"}, []string{got[0], got[2]})
		})
	}

	t.Run("a returning member plans in its own segment, with its anchors", func(t *testing.T) {
		// Ranks 0 and 1 run on s0-l0-n0, rank 2 on s0-l1-n0, rank 3 returns:
		// the request puts rank 3 with rank 2's anchor, in segment 1, and
		// rank 0 and 1's anchors in segment 0.
		job := members("back", 4, "4")
		seg, err := gang.SegmentsOf(gang.FromPodGroup(gangtest.MakePodGroup("back", testNS).MinMember(4).
			Annotation(scheduling.AnnotationSegmentSize, "2").
			Annotation(scheduling.AnnotationSegmentTopologyRequired, leafLabel).Obj()), job[0])
		require.NoError(t, err)
		anchorOf := map[types.UID]int{job[0].UID: 0, job[1].UID: 1, job[2].UID: 2}
		got, err := gangHierarchy("back", seg, placement.Policy{}, job, job[3:], anchorOf, &demand{})
		require.NoError(t, err)
		leaf := placement.Policy{Level: leafLabel, Required: true}
		want := &placement.Subgroup{Name: "back", Children: []placement.Subgroup{
			{Name: "back segment 0 (ranks 0-1)", Policy: leaf, Anchors: []int{0, 1}},
			{Name: "back segment 1 (ranks 2-3)", Policy: leaf, Members: []int{0}, Anchors: []int{2}},
		}}
		require.Equal(t, want, got)

		// The plan keeps rank 3 in segment 1's leaf, though the gang
		// requires only its spine and leaf s0-l0, which runs most of it,
		// has room on s0-l0-n1.
		job[0].Spec.NodeName, job[1].Spec.NodeName, job[2].Spec.NodeName = "s0-l0-n0", "s0-l0-n0", "s0-l1-n0"
		env := newTestEnv(t, fabric(), job, []*v1alpha1.PodGroup{gangtest.MakePodGroup("back", testNS).MinMember(4).
			Annotation(scheduling.AnnotationTopologyRequired, spineLabel).
			Annotation(scheduling.AnnotationSegmentSize, "2").
			Annotation(scheduling.AnnotationSegmentTopologyRequired, leafLabel).Obj()}, withTopology(t))
		node := plannedNodes(t, env, job[3:])[0]
		require.Equal(t, "s0-l1", node[:len("s0-l1")], "rank 3 runs in segment 1's leaf, beside rank 2: %s", node)
	})

	for _, tc := range []struct {
		name        string
		annotations map[string]string
		minMember   int32
		want        string
	}{
		{"a size that does not divide the members", map[string]string{
			scheduling.AnnotationSegmentSize: "3", scheduling.AnnotationSegmentTopologyRequired: leafLabel}, 4, "does not divide the gang's 4 members"},
		{"an unknown level", map[string]string{
			scheduling.AnnotationSegmentSize: "2", scheduling.AnnotationSegmentTopologyRequired: "example.com/rack"}, 4, "name a configured level's label key"},
		{"a level looser than the gang's", map[string]string{
			scheduling.AnnotationSegmentSize: "2", scheduling.AnnotationSegmentTopologyRequired: spineLabel,
			scheduling.AnnotationTopologyRequired: leafLabel}, 4, "looser than the gang's level"},
		{"an elastic minimum of part segments", map[string]string{
			scheduling.AnnotationSegmentSize: "2", scheduling.AnnotationSegmentTopologyRequired: leafLabel}, 3, "not a whole number of segments"},
		{"a size without a level", map[string]string{scheduling.AnnotationSegmentSize: "2"}, 4, "without a segment level"},
	} {
		t.Run("bad input: "+tc.name, func(t *testing.T) {
			job := members("bad", 4, "8")
			pg := gangtest.MakePodGroup("bad", testNS).MinMember(tc.minMember)
			for k, v := range tc.annotations {
				pg.Annotation(k, v)
			}
			env := newTestEnv(t, fabric(), job, []*v1alpha1.PodGroup{pg.Obj()}, withTopology(t))
			_, status, _ := env.fh.RunPreFilterPlugins(env.ctx, framework.NewCycleState(), job[0])
			require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "%v", status)
			require.True(t, hasEvent(env.recorded(), ReasonInvalidPodGroup, tc.want), "want an InvalidPodGroup Event with %q", tc.want)
		})
	}
}
