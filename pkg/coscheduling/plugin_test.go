package coscheduling

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics/testutil"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

func TestCapacityPreCheck(t *testing.T) {
	occupied := func(name string, gpus string) *v1.Pod { return batchPod(name, "node-aa", gpus) }
	tests := []struct {
		name      string
		nodes     []*v1.Node
		existing  []*v1.Pod
		pg        *v1alpha1.PodGroup
		gang      []*v1.Pod
		wantCode  fwk.Code
		wantMsg   string
		wantNodes int
		wantEvent string
	}{
		{
			name:      "eight whole-node pods on eight free nodes",
			nodes:     gpuNodes(8),
			pg:        gangtest.MakePodGroup("big", testNS).MinMember(8).Obj(),
			gang:      members("big", 8, "8"),
			wantCode:  fwk.Success,
			wantNodes: 8,
		},
		{
			name:      "five whole-node pods never fit four nodes",
			nodes:     gpuNodes(4),
			pg:        gangtest.MakePodGroup("five", testNS).MinMember(5).Obj(),
			gang:      members("five", 5, "8"),
			wantCode:  fwk.UnschedulableAndUnresolvable,
			wantMsg:   "gang team-a/five needs 5 × {cpu=1 nvidia.com/gpu=8 pods=1}, but even with all 4 nodes empty only 4 of its 5 members would fit",
			wantEvent: ReasonGangTooLarge,
		},
		{
			name:  "cluster totals suffice but per-node fit does not",
			nodes: gpuNodes(4),
			// 5 × 6 GPUs = 30 <= 32 GPUs in all, but one 6-GPU pod per node.
			pg:        gangtest.MakePodGroup("six", testNS).MinMember(5).Obj(),
			gang:      members("six", 5, "6"),
			wantCode:  fwk.UnschedulableAndUnresolvable,
			wantMsg:   "only 4 of its 5 members would fit",
			wantEvent: ReasonGangTooLarge,
		},
		{
			name:      "fits an empty cluster but not the free capacity",
			nodes:     gpuNodes(4),
			existing:  []*v1.Pod{occupied("hog", "4")},
			pg:        gangtest.MakePodGroup("four", testNS).MinMember(4).Obj(),
			gang:      members("four", 4, "8"),
			wantCode:  fwk.Unschedulable,
			wantMsg:   "free capacity fits 3 of its 4 members now (no node has cpu=1 nvidia.com/gpu=8 pods=1 free for team-a/four-3); it fits once running jobs finish",
			wantNodes: 4, // the head of the queue holds its plan: three free nodes and the one it waits for
			wantEvent: ReasonGangHolding,
		},
		{
			name:      "fits an empty cluster but not beside pods that never finish",
			nodes:     gpuNodes(4),
			existing:  []*v1.Pod{servicePod("inference", "node-aa", "4")},
			pg:        gangtest.MakePodGroup("four", testNS).MinMember(4).Obj(),
			gang:      members("four", 4, "8"),
			wantCode:  fwk.Unschedulable,
			wantMsg:   "it would fit an empty cluster, but pods that do not finish on their own",
			wantEvent: ReasonPermanentPodsInTheWay,
		},
		{
			name:      "minResources beyond the cluster",
			nodes:     gpuNodes(2),
			pg:        gangtest.MakePodGroup("min", testNS).MinMember(1).MinResources(map[v1.ResourceName]string{gpu: "32"}).Obj(),
			gang:      members("min", 1, "8"),
			wantCode:  fwk.UnschedulableAndUnresolvable,
			wantMsg:   "spec.minResources asks for 32 nvidia.com/gpu, but the cluster has 16 in all",
			wantEvent: ReasonGangTooLarge,
		},
		{
			name:     "minResources beyond free capacity",
			nodes:    gpuNodes(2),
			existing: []*v1.Pod{occupied("hog", "4")},
			pg:       gangtest.MakePodGroup("min", testNS).MinMember(1).MinResources(map[v1.ResourceName]string{gpu: "16"}).Obj(),
			gang:     members("min", 1, "8"),
			wantCode: fwk.Unschedulable,
			wantMsg:  "its placed members hold 0, and 12 is free now",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newTestEnv(t, tt.nodes, append(tt.existing, tt.gang...), []*v1alpha1.PodGroup{tt.pg})
			res, status, _ := env.fh.RunPreFilterPlugins(env.ctx, framework.NewCycleState(), tt.gang[0])
			require.Equal(t, tt.wantCode, status.Code(), "status: %v", status)
			if tt.wantMsg != "" {
				require.Contains(t, status.Message(), tt.wantMsg)
			}
			held := env.ledger().HeldByOthers(gang.Key{}, lastInQueue)
			if tt.wantNodes > 0 {
				if status.IsSuccess() {
					require.Len(t, res.NodeNames, 1, "a planned member is pinned to its node")
				}
				require.Len(t, held, tt.wantNodes, "nodes the plan holds")
			} else {
				require.Empty(t, held, "nothing is held")
			}
			if tt.wantEvent != "" {
				require.True(t, hasEvent(env.recorded(), tt.wantEvent, ""), "want a %s Event", tt.wantEvent)
			}
			if tt.wantCode != fwk.Success {
				require.Empty(t, env.ledger().Reservations.ReservedUIDs(gang.Key{Namespace: testNS, Name: tt.pg.Name}), "a gang that does not fit reserves nothing")
			}
			if tt.wantCode == fwk.UnschedulableAndUnresolvable {
				require.Empty(t, env.ledger().HeldByOthers(gang.Key{}, lastInQueue), "a gang that can never fit holds nothing")
			}
		})
	}
}

// counter reads a counter's value; metrics are process-wide, so tests
// compare before and after.
func counter(t *testing.T, result string) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(attempts.WithLabelValues(result))
	require.NoError(t, err)
	return v
}

func TestGangBindsTogether(t *testing.T) {
	scheduledBefore := counter(t, resultScheduled)
	spannedBefore, err := testutil.GetHistogramMetricCount(domainsSpanned.WithLabelValues("kubernetes.io/hostname"))
	require.NoError(t, err)
	job := members("job", 4, "8")
	env := newTestEnv(t, gpuNodes(4), job, []*v1alpha1.PodGroup{gangtest.MakePodGroup("job", testNS).MinMember(4).Obj()})

	var waits []<-chan *fwk.Status
	nodes := map[string]bool{}
	for i, p := range job {
		node, status := env.schedule(p)
		require.NotEmpty(t, node, "member %d found no node: %v", i, status)
		nodes[node] = true
		if i < len(job)-1 {
			require.Equal(t, fwk.Wait, status.Code(), "member %d: %v", i, status)
			waits = append(waits, env.waitAsync(p, node))
		} else {
			require.True(t, status.IsSuccess(), "last member: %v", status)
		}
	}
	for i, w := range waits {
		select {
		case s := <-w:
			require.True(t, s.IsSuccess(), "waiting member %d: %v", i, s)
		case <-time.After(wait.ForeverTestTimeout):
			t.Fatalf("waiting member %d was never allowed", i)
		}
	}
	require.Len(t, nodes, 4, "each whole-node member needs its own node")
	require.True(t, hasEvent(env.recorded(), ReasonGangScheduled, "4/4 members reserved"))
	require.Equal(t, scheduledBefore+1, counter(t, resultScheduled))
	spannedAfter, err := testutil.GetHistogramMetricCount(domainsSpanned.WithLabelValues("kubernetes.io/hostname"))
	require.NoError(t, err)
	require.Equal(t, spannedBefore+1, spannedAfter)
	require.Empty(t, env.ledger().HeldByOthers(gang.Key{}, lastInQueue), "a scheduled gang holds nothing more")
}

func TestHeldCapacityKeepsGangsApart(t *testing.T) {
	// Two gangs that each need 3 of 5 nodes: whoever plans first holds its
	// nodes; the other reserves nothing.
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, b := members("a", 3, "8"), members("b", 3, "8")
	plain := st.MakePod().Namespace(testNS).Name("plain").UID("plain").SchedulerName(testScheduler).
		CreationTimestamp(metav1.NewTime(t0.Add(-time.Minute))).Req(map[v1.ResourceName]string{gpu: "8"}).Obj()
	env := newTestEnv(t, gpuNodes(5), append(append(a, b...), plain), []*v1alpha1.PodGroup{
		gangtest.MakePodGroup("a", testNS).MinMember(3).Created(t0).Obj(),
		gangtest.MakePodGroup("b", testNS).MinMember(3).Created(t0.Add(time.Minute)).Obj(),
	})
	nodeA, status := env.schedule(a[0])
	require.Equal(t, fwk.Wait, status.Code(), "first member of a: %v", status)
	env.waitAsync(a[0], nodeA)

	_, status = env.schedule(b[0])
	require.Equal(t, fwk.Unschedulable, status.Code(), "b must not start while a holds its plan: %v", status)
	require.Contains(t, status.Message(), "held for other gangs")
	require.Len(t, env.ledger().Reservations.ReservedUIDs(gang.Key{Namespace: testNS, Name: "b"}), 0)

	// b, first in the queue of gangs that wait for room, holds the two
	// nodes a does not, so that it is not starved. A plain pod queued
	// before b (here: older) still gets one of them; it never gets a's.
	node, status := env.schedule(plain)
	require.True(t, status.IsSuccess(), "plain pod: %v", status)
	nodesOfA, _ := env.ledger().Reservations.PlanSlots(gang.Key{Namespace: testNS, Name: "a"}, "", capacity.Amounts{})
	require.NotContains(t, nodesOfA, node, "the plain pod landed on a node gang a holds")
}

func TestFailedMemberRejectsWaitingSiblings(t *testing.T) {
	rejectedBefore := counter(t, resultRejected)
	job := members("job", 3, "8")
	env := newTestEnv(t, gpuNodes(3), job, []*v1alpha1.PodGroup{gangtest.MakePodGroup("job", testNS).MinMember(3).Obj()})
	var waits []<-chan *fwk.Status
	for _, p := range job[:2] {
		node, status := env.schedule(p)
		require.Equal(t, fwk.Wait, status.Code(), "%s: %v", p.Name, status)
		waits = append(waits, env.waitAsync(p, node))
	}
	// The second member is rejected while it waits, as the scheduler does
	// when a waiting pod is deleted: the whole gang gives its nodes back.
	require.True(t, env.fh.RejectWaitingPod(job[1].UID))
	for i, w := range waits {
		select {
		case s := <-w:
			require.False(t, s.IsSuccess(), "member %d was allowed without quorum", i)
		case <-time.After(wait.ForeverTestTimeout):
			t.Fatalf("member %d was never rejected", i)
		}
	}
	require.True(t, hasEvent(env.recorded(), ReasonGangRejected, "member job-1 gave back its reservation on node node-ab; waiting members rejected: 1; retrying in 2s"))
	require.Empty(t, env.ledger().HeldByOthers(gang.Key{}, lastInQueue), "a rejected gang holds nothing")
	require.Empty(t, env.ledger().Reservations.ReservedUIDs(gang.Key{Namespace: testNS, Name: "job"}))
	require.Equal(t, rejectedBefore+1, counter(t, resultRejected))
}

// Only one member waits here: kube-scheduler 1.37.2's waitingPod writes its
// done flag under a read lock, so a Permit timer and a plugin rejecting the
// same pod at the same instant race (the race detector flags it).
func TestTimeoutBacksOffThenRetries(t *testing.T) {
	timedOutBefore := counter(t, resultTimedOut)
	job := members("job", 2, "8")
	pg := gangtest.MakePodGroup("job", testNS).MinMember(2).ScheduleTimeoutSeconds(1).Obj()
	env := newTestEnv(t, gpuNodes(2), job, []*v1alpha1.PodGroup{pg})

	// One member reserves and waits; the other does not come to a
	// scheduling cycle in time.
	n0, status := env.schedule(job[0])
	require.Equal(t, fwk.Wait, status.Code(), "%v", status)
	w0 := env.waitAsync(job[0], n0)
	// The wait runs on the framework's real timer; the plugin's clock must
	// agree that the deadline has passed.
	env.clock.Step(time.Second)
	select {
	case s := <-w0:
		require.False(t, s.IsSuccess(), "a member was allowed without quorum")
		require.Contains(t, s.Message(), "timeout")
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("the member never timed out")
	}
	env.forget(job[0])
	require.True(t, hasEvent(env.recorded(), ReasonGangTimedOut, "retrying in 2s"))
	require.Empty(t, env.ledger().HeldByOthers(gang.Key{}, lastInQueue), "a timed-out gang holds nothing")
	require.Equal(t, timedOutBefore+1, counter(t, resultTimedOut))
	members, placing, reserved := env.ledger().Waiting()
	require.Equal(t, [3]int{0, 0, 0}, [3]int{members, placing, reserved}, "waiting gangs after the timeout")

	_, status = env.schedule(job[1])
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "a gang backing off must not plan: %v", status)
	require.Contains(t, status.Message(), "retries at")

	// When the backoff ends, the members are moved back to the active queue.
	env.activator.Reset()
	env.clock.Step(2 * time.Second)
	require.Eventually(t, func() bool { return len(env.activator.Get()) == 2 }, wait.ForeverTestTimeout, 10*time.Millisecond,
		"activated: %v", env.activator.Get())

	// The retry succeeds.
	n0, status = env.schedule(job[0])
	require.Equal(t, fwk.Wait, status.Code(), "%v", status)
	w0 = env.waitAsync(job[0], n0)
	_, status = env.schedule(job[1])
	require.True(t, status.IsSuccess(), "%v", status)
	require.True(t, (<-w0).IsSuccess())
}

func TestHeldMembersAreReleasedAtQuorum(t *testing.T) {
	// kube-scheduler runs no queueing hint for new pods unless the
	// GenericWorkload gate is on, so the plugin releases members it held
	// back itself when the member or PodGroup they wait for arrives.
	job := members("job", 3, "8")
	env := newTestEnv(t, gpuNodes(3), job[:2], nil)
	for _, p := range job[:2] {
		require.Equal(t, fwk.UnschedulableAndUnresolvable, env.preEnqueue(p).Code())
	}
	// The PodGroup arrives: still only 2 of 3 members, they are looked at
	// again and held again.
	env.CreatePodGroup(gangtest.MakePodGroup("job", testNS).MinMember(3).Obj())
	require.Eventually(t, func() bool { return slices.Equal([]string{"team-a/job-0", "team-a/job-1"}, env.activator.Get()) },
		wait.ForeverTestTimeout, 10*time.Millisecond, "activated: %v", env.activator.Get())
	for _, p := range job[:2] {
		require.Equal(t, fwk.UnschedulableAndUnresolvable, env.preEnqueue(p).Code())
	}
	env.activator.Reset()
	// The third member arrives and brings quorum: the two are released.
	env.syncWatch()
	_, err := env.client.CoreV1().Pods(testNS).Create(env.ctx, job[2], metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(env.activator.Get()) == 2 }, wait.ForeverTestTimeout, 10*time.Millisecond,
		"activated: %v", env.activator.Get())
	for _, p := range job {
		require.True(t, env.preEnqueue(p).IsSuccess())
	}
}

func TestScheduleTimeoutZeroUsesDefault(t *testing.T) {
	// MPI Operator writes scheduleTimeoutSeconds: 0. It must mean "use the
	// plugin default", never "do not wait".
	launcher := member("mpi", "mpi-launcher", "")
	workers := members("mpi", 2, "8")
	pg := gangtest.MakePodGroup("mpi", testNS).MinMember(3).ScheduleTimeoutSeconds(0).Obj()
	env := newTestEnv(t, gpuNodes(2), append(workers, launcher), []*v1alpha1.PodGroup{pg})

	state := framework.NewCycleState()
	_, status, _ := env.fh.RunPreFilterPlugins(env.ctx, state, launcher)
	require.True(t, status.IsSuccess(), "%v", status)
	require.NoError(t, status.AsError())
	env.ledger().Reservations.Reserve(gang.Key{Namespace: testNS, Name: "mpi"}, launcher.UID, "node-aa", capacity.PodAmounts(launcher))
	got, wait := env.pl.Permit(env.ctx, state, launcher, "node-aa")
	require.Equal(t, fwk.Wait, got.Code())
	require.Equal(t, 60*time.Second, wait)
}

func TestMixedRolesAndElasticGang(t *testing.T) {
	// An MPI-shaped gang: a CPU-only launcher and two 8-GPU workers, plus an
	// elastic extra worker beyond minMember.
	launcher := member("mpi", "mpi-launcher", "")
	launcher.Labels[scheduling.KubeflowReplicaTypeLabel] = "launcher"
	workers := members("mpi", 3, "8")
	pg := gangtest.MakePodGroup("mpi", testNS).MinMember(3).Obj()
	env := newTestEnv(t, gpuNodes(3), append(workers, launcher), []*v1alpha1.PodGroup{pg})

	var waits []<-chan *fwk.Status
	for _, p := range []*v1.Pod{launcher, workers[0], workers[1]} {
		node, status := env.schedule(p)
		require.NotEmpty(t, node, "%s: %v", p.Name, status)
		if status.IsWait() {
			waits = append(waits, env.waitAsync(p, node))
		} else {
			require.True(t, status.IsSuccess(), "%s: %v", p.Name, status)
		}
	}
	for _, w := range waits {
		require.True(t, (<-w).IsSuccess())
	}
	// Quorum is reserved: the extra worker schedules without waiting.
	node, status := env.schedule(workers[2])
	require.True(t, status.IsSuccess(), "elastic extra: %v", status)
	require.NotEmpty(t, node)
}

func TestRecreatedMemberDoesNotWedgeGang(t *testing.T) {
	job := members("job", 2, "8")
	env := newTestEnv(t, gpuNodes(2), job, []*v1alpha1.PodGroup{gangtest.MakePodGroup("job", testNS).MinMember(2).Obj()})
	n0, status := env.schedule(job[0])
	require.Equal(t, fwk.Wait, status.Code())
	w0 := env.waitAsync(job[0], n0)

	// The second member is deleted and recreated under a new UID before it
	// was scheduled; the plan's slot is not tied to the old pod.
	recreated := job[1].DeepCopy()
	recreated.UID = "recreated"
	recreated.ResourceVersion = ""
	env.syncWatch()
	pods := env.client.CoreV1().Pods(testNS)
	require.NoError(t, pods.Delete(env.ctx, job[1].Name, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := env.fh.SharedInformerFactory().Core().V1().Pods().Lister().Pods(testNS).Get(job[1].Name)
		return err != nil
	}, wait.ForeverTestTimeout, 10*time.Millisecond)
	_, err := pods.Create(env.ctx, recreated, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		p, err := env.fh.SharedInformerFactory().Core().V1().Pods().Lister().Pods(testNS).Get(recreated.Name)
		return err == nil && p.UID == recreated.UID
	}, wait.ForeverTestTimeout, 10*time.Millisecond)
	_, status = env.schedule(recreated)
	require.True(t, status.IsSuccess(), "recreated member: %v", status)
	require.True(t, (<-w0).IsSuccess())
}
