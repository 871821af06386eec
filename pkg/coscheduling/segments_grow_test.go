package coscheduling

import (
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// elasticSegmented is a 6-rank job of 4-GPU members with replica indices,
// in segments of 2 ranks that each fill one node, of which it needs 2
// (minMember 4), on the fabric with three whole free nodes, s0-l0-n0,
// s0-l0-n1 and s0-l1-n0, one for each segment, and half of s0-l1-n1, the
// best fit for one member alone.
func elasticSegmented(t *testing.T) (*testEnv, []*v1.Pod) {
	job := members("el", 6, "4")
	for i, p := range job {
		p.Labels[scheduling.KubeflowReplicaIndexLabel] = strconv.Itoa(i)
	}
	pods := slices.Clone(job)
	for _, n := range []string{"s1-l0-n0", "s1-l0-n1", "s1-l1-n0", "s1-l1-n1"} {
		pods = append(pods, busy(n))
	}
	pods = append(pods, batchPod("half-s0-l1-n1", "s0-l1-n1", "4"))
	env := newTestEnv(t, fabric(), pods, []*v1alpha1.PodGroup{gangtest.MakePodGroup("el", testNS).MinMember(4).
		Annotation(scheduling.AnnotationSegmentSize, "2").
		Annotation(scheduling.AnnotationSegmentTopologyRequired, scheduling.HostnameKey).Obj()}, withTopology(t))
	return env, job
}

// An elastic segmented gang starts with whole segments of its own ranks and
// grows by whole segments. Rank 5 leaves the queue first (as in S10, where
// elastic-9 did): it took a slot planned for ranks 0-3, so the job started
// with segments that were not its own, and ranks 3 and 4 were then planned
// beside their segments' anchors on full nodes and never bound. Planned
// alone, rank 4 would take the half-free node and strand rank 5.
func TestElasticSegmentedGangGrowsByWholeSegments(t *testing.T) {
	env, job := elasticSegmented(t)

	placed := map[int]string{}
	round := func(ranks ...int) []*fwk.Status {
		pods := make([]*v1.Pod, len(ranks))
		for i, r := range ranks {
			pods[i] = job[r]
		}
		statuses, waits, nodes := scheduleAll(t, env, pods)
		for i, r := range ranks {
			if statuses[i].IsSuccess() || (waits[i] != nil && outcome(t, waits[i]).IsSuccess()) {
				placed[r] = nodes[i]
			}
		}
		for _, r := range ranks {
			if n, ok := placed[r]; ok && job[r].Spec.NodeName == "" {
				job[r] = env.bind(job[r], n)
			}
		}
		return statuses
	}
	first := round(5, 0, 1, 2, 3)
	// The members left try twice more, in rank order, as the queue would
	// bring them back once their siblings bind.
	for range 2 {
		var left []int
		for r := range job {
			if _, ok := placed[r]; !ok {
				left = append(left, r)
			}
		}
		round(left...)
	}

	require.Len(t, placed, 6, "every member binds: %v", placed)
	for s := 0; s < 3; s++ {
		require.Equal(t, placed[2*s], placed[2*s+1], "segment %d (ranks %d-%d) on one node: %v", s, 2*s, 2*s+1, placed)
	}
	require.Equal(t, fwk.Unschedulable, first[0].Code(), "rank 5 is outside the plan of segments 0 and 1: %v", first[0])
	require.NotEqual(t, "s0-l1-n1", placed[4], "segment 2 joins whole, on a whole node, not one member on the half node that best fits it alone")
}

// A member whose segment has not all its members waits, and none of the
// segment holds a node: a partial segment never starts.
func TestElasticSegmentWaitsForItsMembers(t *testing.T) {
	env, job := elasticSegmented(t)
	env.delete(job[5])
	statuses, _, nodes := scheduleAll(t, env, job[:4])
	require.True(t, statuses[3].IsSuccess(), "segments 0 and 1 start: %v", statuses[3])
	for i, p := range job[:4] {
		env.bind(p, nodes[i])
	}

	node, status := env.schedule(job[4])
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "%v", status)
	require.Contains(t, status.Message(), "joins the running gang with its whole segment of 2 consecutive ranks, of which 1 are present")
	require.Empty(t, node)
}
