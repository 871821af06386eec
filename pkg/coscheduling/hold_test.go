package coscheduling

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// The head hold as the plugin drives it: who holds, who waits, and the
// timers that end a turn and a yield. The model's own rules (a turn that ran
// out is never renewed) are tested with a fake clock in pkg/ledger.

func TestLargeGangIsNotStarvedBySmallOnes(t *testing.T) {
	// Three of four nodes are busy. A large gang, older than a small one,
	// cannot fit yet: it holds the free node, so the small gang (and plain
	// pods) cannot take it, and each node that frees up joins the hold
	// until the large gang fits.
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	nodes, busy := nodesWithBatchJobs(4, 3, "busy-")
	large, small := members("large", 4, "8"), members("small", 1, "8")
	// The plain pod is queued after the large gang, at the small gang's time.
	plain := plainWholeNodePod(t0.Add(time.Minute))
	env := newTestEnv(t, nodes, append(append(append(busy, large...), small...), plain), []*v1alpha1.PodGroup{
		gangtest.MakePodGroup("large", testNS).MinMember(4).Created(t0).Obj(),
		gangtest.MakePodGroup("small", testNS).MinMember(1).Created(t0.Add(time.Minute)).Obj(),
	})

	_, status := env.schedule(large[0])
	require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
	_, status = env.schedule(small[0])
	require.Equal(t, fwk.Unschedulable, status.Code(), "the small gang took the node the large one waits on: %v", status)
	_, status = env.schedule(plain)
	require.Equal(t, fwk.Unschedulable, status.Code(), "a plain pod took the node the large gang waits on: %v", status)

	// Busy pods finish one by one; the large gang, first in the queue,
	// tries again each time and gathers the room.
	for i := 0; i < 3; i++ {
		env.forget(busy[i])
		node, status := env.schedule(large[0])
		if i < 2 {
			require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
			_, status = env.schedule(small[0])
			require.Equal(t, fwk.Unschedulable, status.Code(), "round %d: the small gang jumped the queue: %v", i, status)
			continue
		}
		require.Equal(t, fwk.Wait, status.Code(), "the large gang must fit once all nodes are free: %v", status)
		env.waitAsync(large[0], node)
	}
	_, heads := env.ledger().Head.Holder()
	require.False(t, heads, "a gang with a whole plan needs no partial hold")
}

func TestHeadKeepsWhatFreesUpBeforeItPlansAgain(t *testing.T) {
	// The head gang waits for three busy nodes. When one frees up, the
	// scheduler may try a later gang or a plain pod before the head plans
	// again (QueueSort orders only kube-scheduler's active queue; a pod
	// leaving backoff sooner is tried first): the node the head waits for
	// stays its own.
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	nodes, busy := nodesWithBatchJobs(4, 3, "busy-")
	large, small := members("large", 4, "8"), members("small", 1, "8")
	plain := plainWholeNodePod(t0.Add(time.Minute))
	env := newTestEnv(t, nodes, append(append(append(busy, large...), small...), plain), []*v1alpha1.PodGroup{
		gangtest.MakePodGroup("large", testNS).MinMember(4).Created(t0).Obj(),
		gangtest.MakePodGroup("small", testNS).MinMember(1).Created(t0.Add(time.Minute)).Obj(),
	})
	_, status := env.schedule(large[0])
	require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
	require.True(t, hasEvent(env.recorded(), ReasonGangHolding, "what frees up on the 3 nodes its plan waits for"))
	require.Equal(t, int64(8), env.ledger().Held()[gpu], "only the free node is held idle; the busy ones still run their pods")

	for i := range 3 {
		env.forget(busy[i])
		_, status = env.schedule(small[0])
		require.Equal(t, fwk.Unschedulable, status.Code(), "round %d: the small gang took a node the head waits for before the head planned again: %v", i, status)
		_, status = env.schedule(plain)
		require.Equal(t, fwk.Unschedulable, status.Code(), "round %d: a plain pod took a node the head waits for: %v", i, status)
	}
	node, status := env.schedule(large[0])
	require.Equal(t, fwk.Wait, status.Code(), "the head fits once its nodes are free: %v", status)
	env.waitAsync(large[0], node)
	_, heads := env.ledger().Head.Holder()
	require.False(t, heads, "a gang with a whole plan needs no partial hold")
}

func TestHeadHoldIsBoundedAndYields(t *testing.T) {
	// Three of four nodes run batch jobs that will finish. A large gang
	// heads the queue and holds the free node for at most its timeout;
	// then the small gang behind it runs (backfill) for as long, and only
	// then may the large gang hold again.
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	nodes, jobs := nodesWithBatchJobs(4, 3, "batch-")
	large, small := members("large", 4, "8"), members("small", 1, "8")
	env := newTestEnv(t, nodes, append(append(jobs, large...), small...), []*v1alpha1.PodGroup{
		gangtest.MakePodGroup("large", testNS).MinMember(4).ScheduleTimeoutSeconds(30).Created(t0).Obj(),
		gangtest.MakePodGroup("small", testNS).MinMember(1).Created(t0.Add(time.Minute)).Obj(),
	})
	_, status := env.schedule(large[0])
	require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
	require.True(t, hasEvent(env.recorded(), ReasonGangHolding, "for up to 30s"))
	_, status = env.schedule(small[0])
	require.Equal(t, fwk.Unschedulable, status.Code(), "the small gang must wait while the head holds: %v", status)

	// Trying again does not renew the turn.
	env.clock.Step(20 * time.Second)
	_, status = env.schedule(large[0])
	require.Equal(t, fwk.Unschedulable, status.Code())
	env.activator.Reset()
	env.clock.Step(10 * time.Second)
	require.Eventually(t, func() bool { return hasEvent(env.recorded(), ReasonHoldExpired, "released for 30s") }, wait.ForeverTestTimeout, 10*time.Millisecond)
	require.Contains(t, env.activator.Get(), testNS+"/small-0", "the pod the hold turned away is tried again when it ends")

	_, status = env.schedule(large[0])
	require.Equal(t, fwk.Unschedulable, status.Code())
	_, heads := env.ledger().Head.Holder()
	require.False(t, heads, "a yielding gang holds nothing")
	_, status = env.schedule(small[0])
	require.True(t, status.IsSuccess(), "backfill: the small gang runs while the head yields: %v", status)

	env.clock.Step(30 * time.Second)
	require.Eventually(t, func() bool {
		for _, k := range env.activator.Get() {
			if k == testNS+"/large-0" {
				return true
			}
		}
		return false
	}, wait.ForeverTestTimeout, 10*time.Millisecond, "the head is tried again when its yield ends")
	env.forget(jobs[0])
	_, status = env.schedule(large[0])
	require.Equal(t, fwk.Unschedulable, status.Code())
	key, heads := env.ledger().Head.Holder()
	require.True(t, heads, "after the yield the large gang holds again")
	require.Equal(t, "large", key.Name)
}

func TestHigherPriorityGangHeadsTheQueueForHolds(t *testing.T) {
	// Both gangs wait for batch jobs to finish. The urgent gang, created
	// later but of higher priority (priorityClassName, resolved to
	// spec.priority by admission), takes the head hold from the older one,
	// and the older one's member is kept out of the held node.
	nodes, busy := nodesWithBatchJobs(3, 2, "busy-")
	old := members("old", 3, "8")
	hot := urgent("hot", 3, 100)
	env := newTestEnv(t, nodes, append(append(busy, old...), hot...), []*v1alpha1.PodGroup{
		gangtest.MakePodGroup("old", testNS).MinMember(3).Created(t0).Obj(),
		gangtest.MakePodGroup("hot", testNS).MinMember(3).Created(t0.Add(time.Hour)).Obj(),
	})
	_, status := env.schedule(old[0])
	require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
	key, heads := env.ledger().Head.Holder()
	require.True(t, heads)
	require.Equal(t, "old", key.Name)

	_, status = env.schedule(hot[0])
	require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
	key, heads = env.ledger().Head.Holder()
	require.True(t, heads)
	require.Equal(t, "hot", key.Name, "priority comes before age")
	require.True(t, env.pl.queueOrderOf(hot[0]).Before(env.pl.queueOrderOf(old[0])))
	held := env.ledger().HeldByOthers(gang.Key{Namespace: testNS, Name: "old"}, env.pl.queueOrderOf(old[0]))
	require.Equal(t, int64(8), held[nodes[2].Name][gpu], "the older gang plans around the urgent gang's hold")
}

func TestGangWithNothingFreeStillHeadsTheQueue(t *testing.T) {
	// Every node is busy. A large gang, first in the queue, fits once the
	// batch jobs finish but has no free place now: it still takes the
	// head's turn, so a later gang, of which a part happens to fit when a
	// node frees up, cannot take the turn and absorb that node.
	nodes, busy := nodesWithBatchJobs(3, 3, "busy-")
	large, later := members("large", 3, "8"), members("later", 2, "8")
	env := newTestEnv(t, nodes, append(append(busy, large...), later...), []*v1alpha1.PodGroup{
		gangtest.MakePodGroup("large", testNS).MinMember(3).Created(t0).Obj(),
		gangtest.MakePodGroup("later", testNS).MinMember(2).Created(t0.Add(time.Minute)).Obj(),
	})
	_, status := env.schedule(large[0])
	require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
	key, heads := env.ledger().Head.Holder()
	require.True(t, heads, "the first gang takes the turn with nothing free")
	require.Equal(t, "large", key.Name)
	require.True(t, hasEvent(env.recorded(), ReasonGangHolding, "nothing is free for it yet"))

	// A node frees up. The later gang (2 nodes) does not fit either, and
	// may not take the turn; the large gang, trying again first, holds the
	// node.
	env.forget(busy[0])
	_, status = env.schedule(later[0])
	require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
	key, _ = env.ledger().Head.Holder()
	require.Equal(t, "large", key.Name, "a later gang took the head's turn")
	_, status = env.schedule(large[0])
	require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
	held := env.ledger().HeldByOthers(gang.Key{Namespace: testNS, Name: "later"}, env.pl.queueOrderOf(later[0]))
	require.Equal(t, int64(8), held[nodes[0].Name][gpu], "what frees up joins the head's hold")
}

// nodesWithBatchJobs returns n GPU nodes, the first busy of them each taken
// whole by a batch pod (named prefix and its index) that will finish.
func nodesWithBatchJobs(n, busy int, prefix string) ([]*v1.Node, []*v1.Pod) {
	nodes := gpuNodes(n)
	pods := make([]*v1.Pod, busy)
	for i := range pods {
		pods[i] = batchPod(fmt.Sprint(prefix, i), nodes[i].Name, "8")
	}
	return nodes, pods
}

// plainWholeNodePod is a pod of no gang that asks for a whole node, queued
// by its creation time.
func plainWholeNodePod(created time.Time) *v1.Pod {
	return st.MakePod().Namespace(testNS).Name("plain").UID("plain").SchedulerName(testScheduler).
		CreationTimestamp(metav1.NewTime(created)).Req(map[v1.ResourceName]string{gpu: "8"}).Obj()
}
