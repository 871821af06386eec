package coscheduling

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
	"github.com/gpu-gang/gpu-gang/pkg/preemption"
)

// fakeNominator keeps nominations in memory, as the scheduling queue does.
type fakeNominator struct {
	mu     sync.Mutex
	byNode map[string][]fwk.PodInfo
}

func (n *fakeNominator) AddNominatedPod(_ klog.Logger, pi fwk.PodInfo, ni *fwk.NominatingInfo) {
	if ni.Mode() != fwk.ModeOverride {
		return
	}
	n.DeleteNominatedPodIfExists(pi.GetPod())
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.byNode == nil {
		n.byNode = map[string][]fwk.PodInfo{}
	}
	n.byNode[ni.NominatedNodeName] = append(n.byNode[ni.NominatedNodeName], pi)
}

func (n *fakeNominator) DeleteNominatedPodIfExists(pod *v1.Pod) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for node, pis := range n.byNode {
		kept := pis[:0]
		for _, pi := range pis {
			if pi.GetPod().UID != pod.UID {
				kept = append(kept, pi)
			}
		}
		n.byNode[node] = kept
	}
}

func (n *fakeNominator) UpdateNominatedPod(_ klog.Logger, _ *v1.Pod, _ fwk.PodInfo) {}

func (n *fakeNominator) NominatedPodsForNode(node string) []fwk.PodInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]fwk.PodInfo(nil), n.byNode[node]...)
}

// recordingDecider passes requests to the real engine and keeps them.
type recordingDecider struct {
	decider
	mu       sync.Mutex
	requests []*preemption.Request
}

func (r *recordingDecider) Decide(ctx context.Context, req *preemption.Request) (*preemption.Decision, error) {
	r.mu.Lock()
	r.requests = append(r.requests, req)
	r.mu.Unlock()
	return r.decider.Decide(ctx, req)
}

func (r *recordingDecider) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.requests)
}

func (r *recordingDecider) last() *preemption.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[len(r.requests)-1]
}

// record wraps the environment's decider.
func (e *testEnv) record() *recordingDecider {
	e.t.Helper()
	require.NotNil(e.t, e.pl.decider, "preemption needs the topology planner")
	r := &recordingDecider{decider: e.pl.decider}
	e.pl.decider = r
	return r
}

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// runningGang is a gang bound to nodes, one 8-GPU member per node, of the
// given priority, started at started.
func runningGang(group string, prio int32, started time.Time, nodes ...string) []*v1.Pod {
	pods := make([]*v1.Pod, len(nodes))
	for i, n := range nodes {
		p := member(group, fmt.Sprintf("%s-%d", group, i), "8")
		p.Labels[scheduling.RankLabel] = fmt.Sprint(i)
		p.Spec.NodeName = n
		p.Spec.Priority = ptr.To(prio)
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
		p.Status.Phase = v1.PodRunning
		p.Status.StartTime = ptr.To(metav1.NewTime(started))
		pods[i] = p
	}
	return pods
}

// urgent is a pending gang of n 8-GPU members of priority prio, as the
// Priority admission plugin leaves them: priorityClassName and the
// resolved spec.priority.
func urgent(group string, n int, prio int32) []*v1.Pod {
	pods := members(group, n, "8")
	for i, p := range pods {
		p.Labels[scheduling.RankLabel] = fmt.Sprint(i)
		p.Spec.PriorityClassName = "urgent"
		p.Spec.Priority = ptr.To(prio)
		p.CreationTimestamp = metav1.NewTime(t0.Add(time.Hour))
	}
	return pods
}

// fullFabric fills the 8-node fabric of topology_test.go with four
// low-priority 2-node gangs, one per leaf; the later a gang's leaf, the
// more recently it started, so low-d loses the least work.
func fullFabric() (nodes []*v1.Node, running []*v1.Pod, pgs []*v1alpha1.PodGroup) {
	nodes = fabric()
	for i, leaf := range []string{"s0-l0", "s0-l1", "s1-l0", "s1-l1"} {
		name := "low-" + string(rune('a'+i))
		running = append(running, runningGang(name, 0, t0.Add(time.Duration(i)*time.Minute), leaf+"-n0", leaf+"-n1")...)
		pgs = append(pgs, gangtest.MakePodGroup(name, testNS).MinMember(2).Created(t0).Obj())
	}
	return nodes, running, pgs
}

// attempt runs one scheduling cycle for pod as the scheduler does, through
// PostFilter if no node fits, and returns PostFilter's result and status
// (nil, nil if a node fit; the pod is then assumed and reserved).
func (e *testEnv) attempt(pod *v1.Pod) (*fwk.PostFilterResult, *fwk.Status) {
	e.t.Helper()
	state := framework.NewCycleState()
	res, status, _ := e.fh.RunPreFilterPlugins(e.ctx, state, pod)
	statuses := framework.NewDefaultNodeToStatus()
	if !status.IsSuccess() {
		statuses.SetAbsentNodesStatus(status)
		return e.fh.RunPostFilterPlugins(e.ctx, state, pod, statuses)
	}
	infos, err := e.snapshot.NodeInfos().List()
	require.NoError(e.t, err)
	sort.Slice(infos, func(i, j int) bool { return infos[i].Node().Name < infos[j].Node().Name })
	if res != nil && !res.AllNodes() {
		statuses.SetAbsentNodesStatus(fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node(s) didn't satisfy plugin(s) [Coscheduling]"))
	}
	for _, ni := range infos {
		if res != nil && !res.AllNodes() && !res.NodeNames.Has(ni.Node().Name) {
			continue
		}
		s := e.fh.RunFilterPlugins(e.ctx, state, pod, ni)
		if s.IsSuccess() {
			assumed := pod.DeepCopy()
			assumed.Spec.NodeName = ni.Node().Name
			e.assume(assumed)
			require.True(e.t, e.fh.RunReservePluginsReserve(e.ctx, state, assumed, ni.Node().Name).IsSuccess())
			return nil, nil
		}
		statuses.Set(ni.Node().Name, s)
	}
	return e.fh.RunPostFilterPlugins(e.ctx, state, pod, statuses)
}

// gracefulDeletes makes the fake API server delete pods gracefully, as
// kube-apiserver does for a bound pod with a grace period: the pod gets a
// deletionTimestamp and stays until finishDeletion.
func (e *testEnv) gracefulDeletes() {
	e.client.PrependReactor("delete", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		da := action.(k8stesting.DeleteAction)
		obj, err := e.client.Tracker().Get(da.GetResource(), da.GetNamespace(), da.GetName())
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*v1.Pod).DeepCopy()
		pod.DeletionTimestamp = ptr.To(metav1.Now())
		pod.DeletionGracePeriodSeconds = pod.Spec.TerminationGracePeriodSeconds
		return true, nil, e.client.Tracker().Update(da.GetResource(), pod, da.GetNamespace())
	})
}

// finishDeletion removes pods being deleted, as their kubelet confirms it,
// and waits until the informer and the snapshot no longer have them.
func (e *testEnv) finishDeletion(pods ...*v1.Pod) {
	e.t.Helper()
	e.syncWatch()
	for _, p := range pods {
		require.NoError(e.t, e.client.Tracker().Delete(v1.SchemeGroupVersion.WithResource("pods"), p.Namespace, p.Name))
		e.waitForLister(p, nil)
		e.forget(p)
	}
}

// deleted returns the names of the pods the plugin deleted, in order, and
// checks that each was first marked as a preemption victim.
func (e *testEnv) deleted() []string {
	e.t.Helper()
	marked := map[string]bool{}
	var out []string
	for _, a := range e.client.Actions() {
		switch a := a.(type) {
		case k8stesting.PatchAction:
			if a.GetResource().Resource == "pods" && a.GetSubresource() == "status" {
				marked[a.GetName()] = true
				require.Contains(e.t, string(a.GetPatch()), string(v1.PodReasonPreemptionByScheduler))
			}
		case k8stesting.DeleteAction:
			if a.GetResource().Resource == "pods" && a.GetNamespace() != "probe" {
				require.True(e.t, marked[a.GetName()], "pod %s was deleted without the %s condition", a.GetName(), v1.DisruptionTarget)
				out = append(out, a.GetName())
			}
		}
	}
	sort.Strings(out)
	return out
}

// dimOf is the index of a resource in a request's vectors.
func dimOf(t *testing.T, req *preemption.Request, name v1.ResourceName) int {
	t.Helper()
	for d, r := range req.Resources {
		if r == string(name) {
			return d
		}
	}
	t.Fatalf("the request does not count %s: %v", name, req.Resources)
	return -1
}

func podsNamed(pods []*v1.Pod, names ...string) []*v1.Pod {
	var out []*v1.Pod
	for _, p := range pods {
		for _, n := range names {
			if p.Name == n {
				out = append(out, p)
			}
		}
	}
	return out
}

func TestPreemptionBuildsTheRequestAndActsOnTheDecision(t *testing.T) {
	nodes, running, pgs := fullFabric()
	job := urgent("urgent", 2, 100)
	pgs = append(pgs, gangtest.MakePodGroup("urgent", testNS).MinMember(2).Created(t0.Add(time.Hour)).Obj())
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "protect-c"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{scheduling.PodGroupLabel: "low-c"}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0},
	}
	env := newTestEnv(t, nodes, append(running, job...), pgs, withTopology(t))
	_, err := env.client.PolicyV1().PodDisruptionBudgets(testNS).Create(env.ctx, pdb, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := env.pl.pdbLister.PodDisruptionBudgets(testNS).Get("protect-c")
		return err == nil && got != nil
	}, wait.ForeverTestTimeout, 10*time.Millisecond)
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
	held := env.pl.gangs.heldByOthers(gang.Key{}, lastInQueue)
	require.Equal(t, int64(8), held["s1-l1-n0"][gpu])
	require.Equal(t, int64(8), held["s1-l1-n1"][gpu])
	for i, p := range job {
		nodes, ok := env.pl.gangs.planSlots(key, p.UID, podAmounts(p))
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
		_, waiting := env.pl.gangs.awaitingVictims(preemptorID(job[0]))
		return !waiting
	}, wait.ForeverTestTimeout, 10*time.Millisecond, "every victim is gone")
	// The scheduler's cache may still show the victims for a moment: the
	// member waits on its pinned node rather than failing its gang.
	res, status = env.attempt(job[1])
	require.Nil(t, res)
	require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
	require.Contains(t, status.Message(), ErrReasonAwaitingVictims)
	_, ok := env.pl.gangs.remaining(key)
	require.True(t, ok, "the claim is still held")
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
	require.False(t, env.pl.gangs.endPreemption(preemptorID(job[0])), "a bound preemptor's record goes")
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
	// count as room, and the gang fits in it.
	env.clock.Step(10 * time.Minute)
	env.pl.gangs.forgetGang(gang.Key{Namespace: testNS, Name: "urgent"})
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

func TestHigherPriorityGangHeadsTheQueueForHolds(t *testing.T) {
	// Both gangs wait for batch jobs to finish. The urgent gang, created
	// later but of higher priority (priorityClassName, resolved to
	// spec.priority by admission), takes the head hold from the older one,
	// and the older one's member is kept out of the held node.
	nodes := gpuNodes(3)
	busy := []*v1.Pod{batchPod("busy-0", nodes[0].Name, "8"), batchPod("busy-1", nodes[1].Name, "8")}
	old := members("old", 3, "8")
	hot := urgent("hot", 3, 100)
	env := newTestEnv(t, nodes, append(append(busy, old...), hot...), []*v1alpha1.PodGroup{
		gangtest.MakePodGroup("old", testNS).MinMember(3).Created(t0).Obj(),
		gangtest.MakePodGroup("hot", testNS).MinMember(3).Created(t0.Add(time.Hour)).Obj(),
	})
	_, status := env.schedule(old[0])
	require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
	key, heads := env.pl.gangs.headOf()
	require.True(t, heads)
	require.Equal(t, "old", key.Name)

	_, status = env.schedule(hot[0])
	require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
	key, heads = env.pl.gangs.headOf()
	require.True(t, heads)
	require.Equal(t, "hot", key.Name, "priority comes before age")
	require.True(t, env.pl.queueOrderOf(hot[0]).before(env.pl.queueOrderOf(old[0])))
	held := env.pl.gangs.heldByOthers(gang.Key{Namespace: testNS, Name: "old"}, env.pl.queueOrderOf(old[0]))
	require.Equal(t, int64(8), held[nodes[2].Name][gpu], "the older gang plans around the urgent gang's hold")
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
		require.NotEmpty(t, env.pl.gangs.heldByOthers(gang.Key{}, lastInQueue))

		env.DeletePodGroup(pg)
		require.Eventually(t, func() bool {
			_, waiting := env.pl.gangs.awaitingVictims(preemptorID(job[0]))
			return !waiting
		}, wait.ForeverTestTimeout, 10*time.Millisecond, "the gang sources tell the plugin")
		require.Empty(t, env.pl.gangs.heldByOthers(gang.Key{}, lastInQueue), "nothing is held for a preemptor that is gone")
		require.Empty(t, env.pl.gangs.pendingVictims(), "its victims are no longer anyone's")
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
		_, waiting := env.pl.gangs.awaitingVictims(preemptorID(plain))
		require.True(t, waiting)

		env.finishDeletion(plain)
		require.Eventually(t, func() bool {
			_, waiting := env.pl.gangs.awaitingVictims(preemptorID(plain))
			return !waiting
		}, wait.ForeverTestTimeout, 10*time.Millisecond)
		require.Empty(t, env.pl.gangs.pendingVictims())
	})
}

func TestGangPlansAroundAPreemptorsNomination(t *testing.T) {
	// A plain pod of higher priority preempted for node-aa and is nominated
	// there while its victims go. A lower-priority gang must not plan into
	// that room, as kube-scheduler's own Filter would not let it.
	job := members("job", 2, "8")
	env := newTestEnv(t, gpuNodes(3), job, []*v1alpha1.PodGroup{gangtest.MakePodGroup("job", testNS).MinMember(2).Obj()})
	urgent := st.MakePod().Namespace(testNS).Name("urgent").UID("urgent").Priority(1000).Req(map[v1.ResourceName]string{gpu: "8"}).Obj()
	pi, err := framework.NewPodInfo(urgent)
	require.NoError(t, err)
	env.nominator.AddNominatedPod(klog.Background(), pi, &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: "node-aa"})

	_, status, _ := env.fh.RunPreFilterPlugins(env.ctx, framework.NewCycleState(), job[0])
	require.True(t, status.IsSuccess(), "%v", status)
	for _, p := range job {
		nodes, _ := env.pl.gangs.planSlots(gang.Key{Namespace: testNS, Name: "job"}, p.UID, podAmounts(p))
		require.NotContains(t, nodes, "node-aa", "member %s was planned into a preemptor's room", p.Name)
	}
}
