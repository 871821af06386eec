package coscheduling

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
	"github.com/gpu-gang/gpu-gang/pkg/preemption"
)

func TestPreemptionBuildsTheRequestAndActsOnTheDecision(t *testing.T) {
	nodes, running, pgs := fullFabric()
	job := urgent("urgent", 2, 100)
	pgs = append(pgs, gangtest.MakePodGroup("urgent", testNS).MinMember(2).Created(t0.Add(time.Hour)).Obj())
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "protect-c"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{scheduling.PodGroupLabel: "low-c"}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0},
	}
	// The budget is there from the start: created later, it could fall
	// between the PDB informer's list and its watch and never be seen.
	env := newTestEnv(t, nodes, append(running, job...), pgs, withTopology(t), withObjects(pdb))
	got, err := env.Informers.Policy().V1().PodDisruptionBudgets().Lister().PodDisruptionBudgets(testNS).Get("protect-c")
	require.NoError(t, err)
	require.NotNil(t, got)
	rec := env.record()
	before, err := testutil.GetCounterMetricValue(preemptions.WithLabelValues("gang"))
	require.NoError(t, err)
	victimsBefore, err := testutil.GetHistogramMetricCount(preemptionVictims.ObserverMetric)
	require.NoError(t, err)
	env.syncWatch()

	res, status := env.attempt(job[0])
	require.True(t, status.IsSuccess(), "%v", status)

	req := rec.last()
	require.Equal(t, int32(100), req.Priority)
	require.Equal(t, "team-a/urgent", req.Gang)
	require.Len(t, req.Members, 2)
	require.Len(t, req.Nodes, 8)
	gpus := dimOf(t, req, gpu)
	for _, n := range req.Nodes {
		require.Equal(t, int64(0), n.Free[gpus], "node %s is full", n.Name)
	}
	type unitView struct {
		Name     string
		Kind     preemption.UnitKind
		Pods     int
		Surplus  int
		Keep     []bool
		Started  time.Time
		Nodes    []string
		Budgeted bool
	}
	var units []unitView
	for _, u := range req.Units {
		uv := unitView{Name: u.Name, Kind: u.Kind, Pods: len(u.Pods), Surplus: u.Surplus, Started: u.Started}
		for _, p := range u.Pods {
			uv.Keep = append(uv.Keep, p.Keep)
			uv.Nodes = append(uv.Nodes, req.Nodes[p.Node].Name)
			uv.Budgeted = uv.Budgeted || len(p.PDBs) > 0
		}
		units = append(units, uv)
	}
	want := []unitView{
		{Name: "team-a/low-a", Pods: 2, Keep: []bool{true, false}, Started: t0, Nodes: []string{"s0-l0-n0", "s0-l0-n1"}},
		{Name: "team-a/low-b", Pods: 2, Keep: []bool{true, false}, Started: t0.Add(time.Minute), Nodes: []string{"s0-l1-n0", "s0-l1-n1"}},
		{Name: "team-a/low-c", Pods: 2, Keep: []bool{true, false}, Started: t0.Add(2 * time.Minute), Nodes: []string{"s1-l0-n0", "s1-l0-n1"}, Budgeted: true},
		{Name: "team-a/low-d", Pods: 2, Keep: []bool{true, false}, Started: t0.Add(3 * time.Minute), Nodes: []string{"s1-l1-n0", "s1-l1-n1"}},
	}
	if diff := cmp.Diff(want, units); diff != "" {
		t.Errorf("units (-want,+got):\n%s", diff)
	}
	require.Equal(t, []preemption.PDB{{Name: "team-a/protect-c", Allowed: 0}}, req.PDBs)

	// The engine evicts the gang that started last, low-d, and the
	// plugin carries it out: marked, deleted, Events, metrics, and the
	// freed leaf held for the urgent gang with its first member nominated.
	require.Equal(t, []string{"low-d-0", "low-d-1"}, env.deleted())
	require.NotNil(t, res)
	require.Equal(t, fwk.ModeOverride, res.Mode())
	require.Equal(t, "s1-l1-n0", res.NominatedNodeName)
	events := env.recorded()
	require.True(t, hasEvent(events, ReasonPreempted, "preempted by team-a/urgent, priority 100, to place it in"), "%v", events)
	require.True(t, hasEvent(events, ReasonPreempting, "team-a/low-d"), "%v", events)
	after, err := testutil.GetCounterMetricValue(preemptions.WithLabelValues("gang"))
	require.NoError(t, err)
	require.Equal(t, before+1, after)
	victimsAfter, err := testutil.GetHistogramMetricCount(preemptionVictims.ObserverMetric)
	require.NoError(t, err)
	require.Equal(t, victimsBefore+1, victimsAfter)

	key := gang.Key{Namespace: testNS, Name: "urgent"}
	held := env.ledger().HeldByOthers(gang.Key{}, lastInQueue)
	require.Equal(t, int64(8), held["s1-l1-n0"][gpu])
	require.Equal(t, int64(8), held["s1-l1-n1"][gpu])
	for i, p := range job {
		nodes, ok := env.ledger().Reservations.PlanSlots(key, p.UID, capacity.PodAmounts(p))
		require.True(t, ok)
		require.Equal(t, []string{fmt.Sprintf("s1-l1-n%d", i)}, nodes, "member %s is pinned to its freed node", p.Name)
	}

	// Once the victims are gone, the urgent gang schedules into its
	// freed leaf and its time to bound is observed.
	boundBefore, err := testutil.GetHistogramMetricCount(preemptorTimeToBound.ObserverMetric)
	require.NoError(t, err)
	victims := podsNamed(running, "low-d-0", "low-d-1")
	for _, p := range victims {
		env.waitForLister(p, nil)
	}
	// The informer's handlers see a deletion after its lister does.
	require.Eventually(t, func() bool {
		_, waiting := env.ledger().Preemptions.AwaitingVictims(ledger.Owner(job[0]))
		return !waiting
	}, wait.ForeverTestTimeout, 10*time.Millisecond, "every victim is gone")
	// The scheduler's cache may still show the victims for a moment: the
	// member waits on its pinned node rather than failing its gang.
	res, status = env.attempt(job[1])
	require.Nil(t, res)
	require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
	require.Contains(t, status.Message(), ErrReasonAwaitingVictims)
	_, ok := env.ledger().Reservations.Remaining(key)
	require.True(t, ok, "the attempt still holds its plan")
	for _, p := range victims {
		env.forget(p)
	}
	bound := env.runGang(job)
	require.Equal(t, "s1-l1-n0", bound[0].Spec.NodeName)
	require.Equal(t, "s1-l1-n1", bound[1].Spec.NodeName)
	require.Eventually(t, func() bool {
		n, err := testutil.GetHistogramMetricCount(preemptorTimeToBound.ObserverMetric)
		return err == nil && n == boundBefore+1
	}, wait.ForeverTestTimeout, 10*time.Millisecond, "the preemptor's time to bound is observed once it binds")
	require.False(t, env.ledger().Preemptions.End(ledger.Owner(job[0])), "a bound preemptor's record goes")
}

func TestNoPreemptionTwiceForOnePlacement(t *testing.T) {
	// Victims terminate gracefully: while they do, the preemptor and its
	// siblings wait, and nothing more is evicted, however often they are
	// tried.
	nodes, running, pgs := fullFabric()
	job := urgent("urgent", 2, 100)
	pgs = append(pgs, gangtest.MakePodGroup("urgent", testNS).MinMember(2).Created(t0.Add(time.Hour)).Obj())
	env := newTestEnv(t, nodes, append(running, job...), pgs, withTopology(t))
	env.gracefulDeletes()
	rec := env.record()
	env.syncWatch()

	_, status := env.attempt(job[0])
	require.True(t, status.IsSuccess(), "%v", status)
	require.Equal(t, []string{"low-d-0", "low-d-1"}, env.deleted())
	require.Equal(t, 1, rec.calls())

	for round := range 3 {
		for _, p := range job {
			res, status := env.attempt(p)
			require.Nil(t, res, "round %d, %s", round, p.Name)
			require.Equal(t, fwk.Unschedulable, status.Code(), "round %d, %s: %v", round, p.Name, status)
			require.Contains(t, status.Message(), ErrReasonAwaitingVictims)
		}
	}
	require.Equal(t, 1, rec.calls(), "a preemptor waiting for its victims decides nothing again")
	require.Equal(t, []string{"low-d-0", "low-d-1"}, env.deleted(), "nothing more is evicted")

	// A scheduler that lost its memory of the preemption (the record's
	// wait ran out) still evicts nothing more: the victims being deleted
	// count as room, and the gang fits in it. The informer must show them
	// leaving first: until it does, they are running pods to this scheduler.
	for _, p := range podsNamed(running, "low-d-0", "low-d-1") {
		env.waitForLister(p, func(q *v1.Pod) bool { return q.DeletionTimestamp != nil })
	}
	env.clock.Step(10 * time.Minute)
	env.ledger().ForgetGang(gang.Key{Namespace: testNS, Name: "urgent"})
	res, status := env.attempt(job[0])
	require.Nil(t, res)
	require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
	require.Contains(t, status.Message(), "fits once the pods already leaving are gone")
	require.Equal(t, []string{"low-d-0", "low-d-1"}, env.deleted())
}

func TestTwoPreemptorsNeverCountOnTheSameRoom(t *testing.T) {
	// Two urgent gangs each need a leaf. The first preempts low-d; its
	// victims are still terminating when the second decides: the second
	// may not choose them again nor count on their room, so it preempts
	// the next cheapest gang, low-c.
	nodes, running, pgs := fullFabric()
	first, second := urgent("first", 2, 100), urgent("second", 2, 100)
	pgs = append(pgs,
		gangtest.MakePodGroup("first", testNS).MinMember(2).Created(t0.Add(time.Hour)).Obj(),
		gangtest.MakePodGroup("second", testNS).MinMember(2).Created(t0.Add(2*time.Hour)).Obj())
	env := newTestEnv(t, nodes, append(append(running, first...), second...), pgs, withTopology(t))
	env.gracefulDeletes()
	rec := env.record()
	env.syncWatch()

	_, status := env.attempt(first[0])
	require.True(t, status.IsSuccess(), "%v", status)
	require.Equal(t, []string{"low-d-0", "low-d-1"}, env.deleted())
	// The informer sees the victims terminating; the snapshot (the
	// scheduler's cache) may lag and still show them running.
	for _, p := range podsNamed(running, "low-d-0", "low-d-1") {
		env.waitForLister(p, func(q *v1.Pod) bool { return q.DeletionTimestamp != nil })
	}

	res, status := env.attempt(second[0])
	require.True(t, status.IsSuccess(), "%v", status)
	require.Equal(t, "s1-l0-n0", res.NominatedNodeName)
	req := rec.last()
	for _, u := range req.Units {
		require.NotEqual(t, "team-a/low-d", u.Name, "a victim being evicted is never chosen again")
	}
	g := dimOf(t, req, gpu)
	for _, n := range req.Nodes {
		if n.Name == "s1-l1-n0" || n.Name == "s1-l1-n1" {
			require.Equal(t, int64(0), n.Free[g], "node %s: the first preemptor's victims leave, and it holds their room", n.Name)
		}
	}
	require.Equal(t, []string{"low-c-0", "low-c-1", "low-d-0", "low-d-1"}, env.deleted())

	// When every victim is gone, each gang binds into its own leaf.
	env.finishDeletion(podsNamed(running, "low-c-0", "low-c-1", "low-d-0", "low-d-1")...)
	a := env.runGang(first)
	b := env.runGang(second)
	require.Equal(t, []string{"s1-l1-n0", "s1-l1-n1"}, []string{a[0].Spec.NodeName, a[1].Spec.NodeName})
	require.Equal(t, []string{"s1-l0-n0", "s1-l0-n1"}, []string{b[0].Spec.NodeName, b[1].Spec.NodeName})
}

func TestPlainPodTakesOneElasticMember(t *testing.T) {
	// An elastic gang (minMember 3, 4 running) fills four nodes. A plain
	// high-priority pod needing a whole node evicts one member above
	// minMember, never the lowest-ranked one, and the gang keeps running.
	nodes := gpuNodes(4)
	running := runningGang("elastic", 0, t0, nodes[0].Name, nodes[1].Name, nodes[2].Name, nodes[3].Name)
	plain := st.MakePod().Namespace("other").Name("urgent").UID("other/urgent").SchedulerName(testScheduler).
		Priority(100).Req(map[v1.ResourceName]string{gpu: "8"}).Obj()
	env := newTestEnv(t, nodes, append(running, plain), []*v1alpha1.PodGroup{gangtest.MakePodGroup("elastic", testNS).MinMember(3).Obj()}, withTopology(t))
	rec := env.record()
	env.syncWatch()

	res, status := env.attempt(plain)
	require.True(t, status.IsSuccess(), "%v", status)
	req := rec.last()
	require.Len(t, req.Units, 1)
	require.Equal(t, 1, req.Units[0].Surplus)
	gone := env.deleted()
	require.Len(t, gone, 1)
	require.NotEqual(t, "elastic-0", gone[0], "the lowest-ranked member is kept")
	victim := podsNamed(running, gone[0])[0]
	require.Equal(t, victim.Spec.NodeName, res.NominatedNodeName)
	require.True(t, hasEvent(env.recorded(), ReasonPreempted, "1 member(s) above minMember ("+gone[0]+") evicted; the gang keeps running with 3"))

	env.waitForLister(victim, nil)
	env.forget(victim)
	res, status = env.attempt(plain)
	require.Nil(t, res)
	require.Nil(t, status, "the plain pod fits where its victim was")
	require.Len(t, env.deleted(), 1)
}

// A running gang whose PodGroup was edited to an invalid minMember is
// still a victim by pkg/gang's rules (gang.SurplusOf, gang.StartedAt): its
// members may go one by one down to the last, and it started with its first
// member.
func TestVictimWithAnInvalidMinMember(t *testing.T) {
	nodes := gpuNodes(4)
	running := runningGang("edited", 0, t0, nodes[0].Name, nodes[1].Name, nodes[2].Name, nodes[3].Name)
	running[2].Status.StartTime = ptr.To(metav1.NewTime(t0.Add(-time.Minute)))
	plain := st.MakePod().Namespace("other").Name("urgent").UID("other/urgent").SchedulerName(testScheduler).
		Priority(100).Req(map[v1.ResourceName]string{gpu: "8"}).Obj()
	env := newTestEnv(t, nodes, append(running, plain), []*v1alpha1.PodGroup{gangtest.MakePodGroup("edited", testNS).MinMember(0).Obj()}, withTopology(t))
	rec := env.record()
	env.syncWatch()

	_, status := env.attempt(plain)
	require.True(t, status.IsSuccess(), "%v", status)
	req := rec.last()
	require.Len(t, req.Units, 1)
	require.Equal(t, 3, req.Units[0].Surplus, "every member but one may go")
	require.Equal(t, t0.Add(-time.Minute), req.Units[0].Started, "the gang started with its first member")
	require.Len(t, env.deleted(), 1, "one member makes room for the pod")
}

func TestNoPreemption(t *testing.T) {
	for _, tc := range []struct {
		name     string
		priority int32
		policy   v1.PreemptionPolicy
		want     string
	}{
		{name: "equal priority", priority: 0, want: "no running pod has a priority below the 0 of team-a/urgent"},
		{name: "preemptionPolicy Never", priority: 100, policy: v1.PreemptNever, want: "has preemptionPolicy Never"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes, running, pgs := fullFabric()
			job := urgent("urgent", 2, tc.priority)
			for _, p := range job {
				if tc.policy != "" {
					p.Spec.PreemptionPolicy = ptr.To(tc.policy)
				}
			}
			pgs = append(pgs, gangtest.MakePodGroup("urgent", testNS).MinMember(2).Created(t0.Add(time.Hour)).Obj())
			env := newTestEnv(t, nodes, append(running, job...), pgs, withTopology(t))
			env.syncWatch()
			res, status := env.attempt(job[0])
			require.Nil(t, res)
			require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
			require.Contains(t, status.Message(), tc.want)
			require.Empty(t, env.deleted())
		})
	}
}

func TestPreemptorThatGoesAwayReleasesTheRoom(t *testing.T) {
	t.Run("a gang whose PodGroup is deleted", func(t *testing.T) {
		nodes, running, pgs := fullFabric()
		job := urgent("urgent", 2, 100)
		pg := gangtest.MakePodGroup("urgent", testNS).MinMember(2).Created(t0.Add(time.Hour)).Obj()
		env := newTestEnv(t, nodes, append(running, job...), append(pgs, pg), withTopology(t))
		env.gracefulDeletes()
		env.syncWatch()
		_, status := env.attempt(job[0])
		require.True(t, status.IsSuccess(), "%v", status)
		require.NotEmpty(t, env.ledger().HeldByOthers(gang.Key{}, lastInQueue))

		env.DeletePodGroup(pg)
		require.Eventually(t, func() bool {
			_, waiting := env.ledger().Preemptions.AwaitingVictims(ledger.Owner(job[0]))
			return !waiting && len(env.ledger().HeldByOthers(gang.Key{}, lastInQueue)) == 0 && len(env.ledger().Preemptions.PendingVictims()) == 0
		}, wait.ForeverTestTimeout, 10*time.Millisecond,
			"the gang sources tell the plugin: nothing is held for a preemptor that is gone, and its victims are no longer anyone's")
	})
	t.Run("a plain pod that is deleted", func(t *testing.T) {
		nodes := gpuNodes(1)
		busy := runningGang("low", 0, t0, nodes[0].Name)
		plain := st.MakePod().Namespace("other").Name("urgent").UID("other/urgent").SchedulerName(testScheduler).
			Priority(100).Req(map[v1.ResourceName]string{gpu: "8"}).Obj()
		env := newTestEnv(t, nodes, append(busy, plain), []*v1alpha1.PodGroup{gangtest.MakePodGroup("low", testNS).Obj()}, withTopology(t))
		env.gracefulDeletes()
		env.syncWatch()
		_, status := env.attempt(plain)
		require.True(t, status.IsSuccess(), "%v", status)
		_, waiting := env.ledger().Preemptions.AwaitingVictims(ledger.Owner(plain))
		require.True(t, waiting)

		env.finishDeletion(plain)
		require.Eventually(t, func() bool {
			_, waiting := env.ledger().Preemptions.AwaitingVictims(ledger.Owner(plain))
			return !waiting
		}, wait.ForeverTestTimeout, 10*time.Millisecond)
		require.Empty(t, env.ledger().Preemptions.PendingVictims())
	})
}

func TestGangPlansAroundAPreemptorsNomination(t *testing.T) {
	// A plain pod of higher priority preempted for node-aa and is nominated
	// there while its victims go. A lower-priority gang must not plan into
	// that room, as kube-scheduler's own Filter would not let it.
	job := members("job", 2, "8")
	urgent := st.MakePod().Namespace(testNS).Name("urgent").UID("urgent").Priority(1000).Req(map[v1.ResourceName]string{gpu: "8"}).
		NominatedNodeName("node-aa").Obj()
	env := newTestEnv(t, gpuNodes(3), append(job, urgent), []*v1alpha1.PodGroup{gangtest.MakePodGroup("job", testNS).MinMember(2).Obj()})
	pi, err := framework.NewPodInfo(urgent)
	require.NoError(t, err)
	env.nominator.AddNominatedPod(klog.Background(), pi, &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: "node-aa"})

	_, status, _ := env.fh.RunPreFilterPlugins(env.ctx, framework.NewCycleState(), job[0])
	require.True(t, status.IsSuccess(), "%v", status)
	for _, p := range job {
		nodes, _ := env.ledger().Reservations.PlanSlots(gang.Key{Namespace: testNS, Name: "job"}, p.UID, capacity.PodAmounts(p))
		require.NotContains(t, nodes, "node-aa", "member %s was planned into a preemptor's room", p.Name)
	}
}

// A victim gang is movable when its PodGroup says so; a malformed value
// counts as not movable and an Event on the PodGroup names it and the fix.
// The engine then evicts the movable gang, though it has run longest.
func TestVictimMovableFromAnnotation(t *testing.T) {
	nodes, running, pgs := fullFabric()
	annotations := map[string]string{"low-a": "true", "low-b": "yes", "low-c": "false"}
	for _, pg := range pgs {
		if v, ok := annotations[pg.Name]; ok {
			pg.Annotations = map[string]string{scheduling.AnnotationMovable: v}
		}
	}
	job := urgent("urgent", 2, 100)
	pgs = append(pgs, gangtest.MakePodGroup("urgent", testNS).MinMember(2).Created(t0.Add(time.Hour)).Obj())
	env := newTestEnv(t, nodes, append(running, job...), pgs, withTopology(t))
	rec := env.record()
	env.syncWatch()

	_, status := env.attempt(job[0])
	require.True(t, status.IsSuccess(), "%v", status)
	movable := map[string]bool{}
	for _, u := range rec.last().Units {
		movable[u.Name] = u.Movable
	}
	require.Equal(t, map[string]bool{"team-a/low-a": true, "team-a/low-b": false, "team-a/low-c": false, "team-a/low-d": false}, movable)
	require.Equal(t, []string{"low-a-0", "low-a-1"}, env.deleted(), "the movable gang goes first")
	events := env.recorded()
	require.True(t, hasEvent(events, scheduling.ReasonInvalidPodGroup,
		`gang team-a/low-b: annotation gpu-gang.x-k8s.io/movable="yes" is not "true" or "false"; preemption counts the gang as not movable`), "%v", events)
	require.False(t, hasEvent(events, scheduling.ReasonInvalidPodGroup, "team-a/low-c"), "%v", events)
}
