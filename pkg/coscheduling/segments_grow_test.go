package coscheduling

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	"k8s.io/apimachinery/pkg/util/wait"
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

// startFirstSegments starts elasticSegmented's job with ranks 0-3, its
// segments 0 and 1, and binds them.
func startFirstSegments(t *testing.T, env *testEnv, job []*v1.Pod) {
	t.Helper()
	statuses, _, nodes := scheduleAll(t, env, job[:4])
	require.True(t, statuses[3].IsSuccess(), "segments 0 and 1 start: %v", statuses[3])
	for i, p := range job[:4] {
		env.bind(p, nodes[i])
	}
}

// A member whose segment has not all its members waits, and none of the
// segment holds a node: a partial segment never starts.
func TestElasticSegmentWaitsForItsMembers(t *testing.T) {
	env, job := elasticSegmented(t)
	env.delete(job[5])
	startFirstSegments(t, env, job)

	node, status := env.schedule(job[4])
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "%v", status)
	require.Contains(t, status.Message(), "joins the running gang with its whole segment of 2 consecutive ranks, of which 1 are present")
	require.Empty(t, node)
}

// An elastic segmented gang with minMember members but too few whole
// segments waits in PreEnqueue, not once per member per cycle in PreFilter,
// and says which segments lack members; the member that completes one
// releases the held ones.
func TestElasticSegmentedGangWaitsInPreEnqueueForWholeSegments(t *testing.T) {
	env, job := elasticSegmented(t)
	env.delete(job[1])
	env.delete(job[3])
	// Ranks 0, 2, 4 and 5 are minMember 4, but only segment 2 is whole.
	for _, r := range []int{0, 2, 4, 5} {
		status := env.preEnqueue(job[r])
		require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "rank %d: %v", r, status)
		require.Contains(t, status.Message(), "segment 0 (ranks 0–1): 1/2 present, segment 1 (ranks 2–3): 1/2 present")
	}
	require.True(t, hasEvent(env.recorded(), ReasonWaitingForMembers, "4 more must be placed, in whole segments of 2 consecutive ranks; segment 0 (ranks 0–1): 1/2 present"))

	// Rank 1 arrives and completes segment 0: with segment 2 that is
	// quorum, and the held members are released.
	env.activator.Reset()
	env.syncWatch()
	env.create(job[1])
	require.Eventually(t, func() bool { return len(env.activator.Get()) == 4 }, wait.ForeverTestTimeout, 10*time.Millisecond,
		"activated: %v", env.activator.Get())
	for _, r := range []int{0, 1, 2, 4, 5} {
		require.True(t, env.preEnqueue(job[r]).IsSuccess(), "rank %d", r)
	}
}

// A member whose scheduling gates are removed completes its segment without
// being added: it passes PreEnqueue, and releases the siblings held for it.
func TestElasticSegmentedGangUngatedMemberReleasesItsSegment(t *testing.T) {
	env, job := elasticSegmented(t)
	env.delete(job[4])
	env.delete(job[5])
	gated := job[1].DeepCopy()
	gated.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "example.com/quota"}}
	env.update(gated)
	env.waitForLister(gated, func(p *v1.Pod) bool { return len(p.Spec.SchedulingGates) > 0 })
	status := env.preEnqueue(job[0])
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "%v", status)
	require.Contains(t, status.Message(), "segment 0 (ranks 0–1): 1/2 present")

	env.activator.Reset()
	ungated := gated.DeepCopy()
	ungated.Spec.SchedulingGates = nil
	env.update(ungated)
	env.waitForLister(ungated, func(p *v1.Pod) bool { return len(p.Spec.SchedulingGates) == 0 })
	require.True(t, env.preEnqueue(ungated).IsSuccess())
	require.Eventually(t, func() bool { return slices.Contains(env.activator.Get(), testNS+"/"+job[0].Name) },
		wait.ForeverTestTimeout, 10*time.Millisecond, "activated: %v", env.activator.Get())
}

// A segment that joins a running gang waits in Permit for its own members,
// and says so: not the gang's count against minMember, which is met.
func TestElasticSegmentPermitSaysWhatItAwaits(t *testing.T) {
	env, job := elasticSegmented(t)
	startFirstSegments(t, env, job)

	n4, status := env.schedule(job[4])
	require.Equal(t, fwk.Wait, status.Code(), "%v", status)
	require.Contains(t, status.Message(), "waiting for gang "+testNS+"/el: segment 2 (ranks 4–5), which joins the running gang whole: 1/2 members hold a node")
	w4 := env.waitAsync(job[4], n4)
	_, status = env.schedule(job[5])
	require.True(t, status.IsSuccess(), "the segment's last member lets it bind: %v", status)
	require.True(t, outcome(t, w4).IsSuccess())
}

// An elastic segmented PodGroup under a gang composite starts with whole
// segments of its ranks, as it does on its own: rank 1 is not created yet,
// so segment 0 (ranks 0-1) waits and segment 1 (ranks 2-3) starts, not the
// first two members present, ranks 0 and 2, which are of no one segment.
func TestCompositeChildStartsWithWholeSegments(t *testing.T) {
	a := nativeMembers("a", 4, "4")
	for i, p := range a {
		p.Labels = map[string]string{scheduling.KubeflowReplicaIndexLabel: strconv.Itoa(i)}
	}
	present := []*v1.Pod{a[0], a[2], a[3]}
	env := newTestEnv(t, fabric(), present, nil, withTopology(t), withComposites(
		[]*schedulingv1alpha3.CompositePodGroup{composite("job", 1).Obj()},
		child("a", "job", 2).
			Annotation(scheduling.AnnotationSegmentSize, "2").
			Annotation(scheduling.AnnotationSegmentTopologyRequired, scheduling.HostnameKey).Obj()))

	for _, p := range present {
		require.True(t, env.preEnqueue(p).IsSuccess(), p.Name)
	}
	statuses, waits, nodes := scheduleAll(t, env, present)
	require.Equal(t, fwk.Unschedulable, statuses[0].Code(), "rank 0 is outside the plan of segment 1: %v", statuses[0])
	require.True(t, statuses[1].IsWait(), "rank 2 waits for rank 3: %v", statuses[1])
	require.True(t, statuses[2].IsSuccess(), "rank 3 completes segment 1: %v", statuses[2])
	require.True(t, outcome(t, waits[1]).IsSuccess())
	require.Equal(t, nodes[1], nodes[2], "segment 1 on one node")
}

// A member of a running gang whose segment lacks members waits in
// PreEnqueue, not in PreFilter once per cycle, and the member that
// completes its segment releases it.
func TestElasticSegmentJoiningWaitsInPreEnqueue(t *testing.T) {
	env, job := elasticSegmented(t)
	env.delete(job[5])
	startFirstSegments(t, env, job)

	status := env.preEnqueue(job[4])
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "%v", status)
	require.Contains(t, status.Message(), "of which 1 are present: segment 2 (ranks 4–5)")
	require.True(t, hasEvent(env.recorded(), ReasonWaitingForMembers, "el-4 joins the running gang with its whole segment"))

	env.activator.Reset()
	env.syncWatch()
	env.create(job[5])
	require.True(t, env.preEnqueue(job[5]).IsSuccess())
	require.Eventually(t, func() bool { return slices.Contains(env.activator.Get(), testNS+"/"+job[4].Name) },
		wait.ForeverTestTimeout, 10*time.Millisecond, "activated: %v", env.activator.Get())
	require.True(t, env.preEnqueue(job[4]).IsSuccess())
}
