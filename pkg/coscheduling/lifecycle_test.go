package coscheduling

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics/testutil"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeports"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/contract"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// runGang schedules every member of a gang and lets them bind, and returns
// the bound pods in order.
func (e *testEnv) runGang(job []*v1.Pod) []*v1.Pod {
	e.t.Helper()
	type placed struct {
		pod  *v1.Pod
		node string
		wait <-chan *fwk.Status
	}
	var ps []placed
	for i, p := range job {
		node, status := e.schedule(p)
		if node == "" || !(status.IsSuccess() || status.IsWait()) {
			e.t.Fatalf("member %d (%s): node %q, status %v", i, p.Name, node, status)
		}
		pp := placed{pod: p, node: node}
		if status.IsWait() {
			pp.wait = e.waitAsync(p, node)
		}
		ps = append(ps, pp)
	}
	var bound []*v1.Pod
	for _, pp := range ps {
		if pp.wait != nil {
			select {
			case s := <-pp.wait:
				if !s.IsSuccess() {
					e.t.Fatalf("member %s was not allowed: %v", pp.pod.Name, s)
				}
			case <-time.After(wait.ForeverTestTimeout):
				e.t.Fatalf("member %s was never allowed", pp.pod.Name)
			}
		}
		bound = append(bound, e.bind(pp.pod, pp.node))
	}
	return bound
}

// replace deletes a bound member, as an eviction or a drain does, and
// creates its replacement under a new UID, as the job's controller does.
func (e *testEnv) replace(member *v1.Pod) *v1.Pod {
	e.t.Helper()
	e.delete(member)
	r := member.DeepCopy()
	r.UID = member.UID + "-replacement"
	r.Spec.NodeName = ""
	e.create(r)
	return r
}

func TestRunningGangReplacementBindsAtOnce(t *testing.T) {
	// Case 1 of the gang-lifecycle issue: an 8 x 8-GPU gang whose PodGroup
	// carries minResources runs; one member is deleted and recreated. The
	// replacement binds at once on the free node: the gang's own running
	// members count towards minResources.
	placedBefore, err := testutil.GetCounterMetricValue(replacements)
	require.NoError(t, err)
	job := members("job", 8, "8")
	env := newTestEnv(t, gpuNodes(9), job, []*v1alpha1.PodGroup{
		gangtest.MakePodGroup("job", testNS).MinMember(8).MinResources(map[v1.ResourceName]string{gpu: "64"}).Obj(),
	})
	bound := env.runGang(job)
	freed := bound[3].Spec.NodeName
	env.recorded()

	r := env.replace(bound[3])
	require.Nil(t, env.preEnqueue(r), "a running gang's replacement is not held for quorum")
	node, status := env.schedule(r)
	require.True(t, status.IsSuccess(), "the replacement binds without waiting: %v", status)
	require.Contains(t, []string{freed, "node-ai"}, node)
	require.True(t, hasEvent(env.recorded(), ReasonMemberPlaced, "member job-3 placed next to its running gang"))
	placedAfter, err := testutil.GetCounterMetricValue(replacements)
	require.NoError(t, err)
	require.Equal(t, placedBefore+1, placedAfter)
}

func TestFinishedMembersCountTowardsQuorum(t *testing.T) {
	// Case 2: one member succeeded, another is recreated. Quorum counts the
	// succeeded member, so the replacement is not held at "2/3 present".
	job := members("job", 3, "8")
	env := newTestEnv(t, gpuNodes(3), job, []*v1alpha1.PodGroup{gangtest.MakePodGroup("job", testNS).MinMember(3).Obj()})
	bound := env.runGang(job)

	done := bound[0].DeepCopy()
	done.Status.Phase = v1.PodSucceeded
	env.update(done)
	// A scheduler restart forgets that the gang ran; only the pods say so.
	env.ledger().ForgetGang(gang.Key{Namespace: testNS, Name: "job"})

	r := env.replace(bound[1])
	require.Eventually(t, func() bool { return env.preEnqueue(r).IsSuccess() }, wait.ForeverTestTimeout, 10*time.Millisecond,
		"the succeeded member must count: 1 bound + 1 succeeded + 1 replacement make quorum")
	_, status := env.schedule(r)
	require.True(t, status.IsSuccess(), "%v", status)

	// Once no member holds a node, succeeded members stop counting: new
	// members are a new run and gather as a whole again.
	env.delete(bound[2])
	env.delete(r)
	fresh := member("job", "job-9", "8")
	env.create(fresh)
	require.Equal(t, fwk.UnschedulableAndUnresolvable, env.preEnqueue(fresh).Code())
	// A whole new run gathers and starts as a gang again: its first member
	// waits for the others in Permit.
	next := []*v1.Pod{fresh, member("job", "job-10", "8"), member("job", "job-11", "8")}
	env.create(next[1])
	env.create(next[2])
	require.True(t, env.preEnqueue(fresh).IsSuccess())
	env.forget(bound[0])
	_, status = env.schedule(fresh)
	require.Equal(t, fwk.Wait, status.Code(), "the new run's first member must wait for its gang: %v", status)
}

func TestMembersThatExcludeEachOtherGetDistinctNodes(t *testing.T) {
	// Case 3: 4 x 4-GPU members, one rank per node. Packing two per 8-GPU
	// node would be Filter's to reject; the plan must not do it.
	antiAffine := func(group string, n int) []*v1.Pod {
		pods := members(group, n, "4")
		for _, p := range pods {
			p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
					TopologyKey:   v1.LabelHostname,
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{scheduling.PodGroupLabel: group}},
				}},
			}}
		}
		return pods
	}
	hostPorts := func(group string, n int) []*v1.Pod {
		pods := members(group, n, "4")
		for _, p := range pods {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 29500, HostPort: 29500, Protocol: v1.ProtocolTCP}}
		}
		return pods
	}
	tests := []struct {
		name    string
		members func(string, int) []*v1.Pod
	}{
		{"required anti-affinity on the hostname", antiAffine},
		{"the same host port", hostPorts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := gpuNodes(8)
			for _, n := range nodes {
				n.Labels = map[string]string{v1.LabelHostname: n.Name}
			}
			job := tt.members("job", 4)
			env := newTestEnv(t, nodes, job, []*v1alpha1.PodGroup{gangtest.MakePodGroup("job", testNS).MinMember(4).Obj()},
				withFilters(t, interpodaffinity.Name, nodeports.Name))
			bound := env.runGang(job)
			seen := map[string]string{}
			for _, p := range bound {
				other, dup := seen[p.Spec.NodeName]
				require.False(t, dup, "%s and %s share node %s", other, p.Name, p.Spec.NodeName)
				seen[p.Spec.NodeName] = p.Name
			}
		})
	}
}

func TestMembersThatExcludeEachOtherPerCliqueAreLearned(t *testing.T) {
	// Anti-affinity on the NVLink clique (one rank per clique) is no cap
	// per node: verification replays the plan, learns which nodes to avoid,
	// and plans again until Filter accepts it.
	nodes := gpuNodes(6)
	for i, n := range nodes {
		n.Labels = map[string]string{v1.LabelHostname: n.Name, cliqueLabel: fmt.Sprint("c", i/2)}
	}
	job := members("job", 3, "4")
	for _, p := range job {
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
				TopologyKey:   cliqueLabel,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{scheduling.PodGroupLabel: "job"}},
			}},
		}}
	}
	env := newTestEnv(t, nodes, job, []*v1alpha1.PodGroup{gangtest.MakePodGroup("job", testNS).MinMember(3).Obj()},
		withFilters(t, interpodaffinity.Name), withTopology(t))
	bound := env.runGang(job)
	cliques := map[string]bool{}
	for _, p := range bound {
		for _, n := range nodes {
			if n.Name == p.Spec.NodeName {
				require.False(t, cliques[n.Labels[cliqueLabel]], "two members in clique %s", n.Labels[cliqueLabel])
				cliques[n.Labels[cliqueLabel]] = true
			}
		}
	}
}

// flakyFilter rejects one node for real scheduling cycles but not when the
// gang plugin asks, as a DRA driver whose devices a sibling just took would.
type flakyFilter struct {
	node     string
	rejected atomic.Int32
}

func (f *flakyFilter) Name() string { return "Flaky" }

func (f *flakyFilter) Filter(ctx context.Context, _ fwk.CycleState, _ *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	if !contract.Simulated(ctx) && ni.Node().Name == f.node {
		f.rejected.Add(1)
		return fwk.NewStatus(fwk.Unschedulable, "device taken")
	}
	return nil
}

func TestFilterRejectionTeachesThePlanner(t *testing.T) {
	// A member is turned away by a Filter plugin where its plan puts it.
	// The gang gives back its reservations, keeps the member's kind off that
	// node, and plans again at once, without a backoff, never on the same
	// plan.
	flaky := &flakyFilter{node: "node-ab"}
	job := members("job", 2, "8")
	env := newTestEnv(t, gpuNodes(3), job, []*v1alpha1.PodGroup{gangtest.MakePodGroup("job", testNS).MinMember(2).Obj()},
		withFilterPlugin("Flaky", flaky))
	n0, status := env.schedule(job[0])
	require.Equal(t, fwk.Wait, status.Code(), "%v", status)
	w0 := env.waitAsync(job[0], n0)
	_, status = env.schedule(job[1])
	require.False(t, status.IsSuccess(), "the member's planned node rejects it")
	require.EqualValues(t, 1, flaky.rejected.Load())
	require.False(t, (<-w0).IsSuccess(), "the sibling gives its node back")
	env.forget(job[0])
	_, _, backingOff := env.ledger().Reservations.Backoff(gang.Key{Namespace: testNS, Name: "job"})
	require.False(t, backingOff, "a rejection that taught something needs no backoff")

	bound := env.runGang(job)
	for _, p := range bound {
		require.NotEqual(t, "node-ab", p.Spec.NodeName, "the planner learned to avoid the node")
	}
	require.EqualValues(t, 1, flaky.rejected.Load(), "the failed plan was not tried again")
}

func TestGangThatCannotFitBesidePermanentPodsHoldsNothing(t *testing.T) {
	// Case 4: services take half the cluster for good. A gang that would
	// fit the empty cluster, but never this one, must not hold the free
	// half: three small gangs that fit it run.
	nodes := gpuNodes(8)
	var services []*v1.Pod
	for i := range 4 {
		services = append(services, servicePod(fmt.Sprint("svc-", i), nodes[i].Name, "8"))
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	big := members("big", 6, "8")
	pgs := []*v1alpha1.PodGroup{gangtest.MakePodGroup("big", testNS).MinMember(6).Created(t0).Obj()}
	var small [][]*v1.Pod
	for i := range 3 {
		name := fmt.Sprint("small-", i)
		small = append(small, members(name, 1, "8"))
		pgs = append(pgs, gangtest.MakePodGroup(name, testNS).MinMember(1).Created(t0.Add(time.Minute)).Obj())
	}
	pods := append(services, big...)
	for _, s := range small {
		pods = append(pods, s...)
	}
	env := newTestEnv(t, nodes, pods, pgs)
	_, status := env.schedule(big[0])
	require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
	require.True(t, hasEvent(env.recorded(), ReasonPermanentPodsInTheWay, "it waits without holding capacity"))
	_, heads := env.ledger().Head.Holder()
	require.False(t, heads, "a gang that cannot fit beside pods that stay must not hold capacity")
	for i, s := range small {
		_, status := env.schedule(s[0])
		require.True(t, status.IsSuccess(), "small gang %d: %v", i, status)
	}
}

func TestDeletedWaitingMemberFailsGangAtOnce(t *testing.T) {
	// Case 5: a member waiting in Permit is deleted. Its siblings give back
	// their nodes at once, not at the deadline, and the replacement gets a
	// place in a fresh plan.
	job := members("job", 3, "8")
	env := newTestEnv(t, gpuNodes(3), job, []*v1alpha1.PodGroup{gangtest.MakePodGroup("job", testNS).MinMember(3).Obj()})
	var waits []<-chan *fwk.Status
	for _, p := range job[:2] {
		node, status := env.schedule(p)
		require.Equal(t, fwk.Wait, status.Code(), "%s: %v", p.Name, status)
		waits = append(waits, env.waitAsync(p, node))
	}
	env.delete(job[1])
	select {
	case s := <-waits[0]:
		require.False(t, s.IsSuccess(), "the sibling was allowed without quorum")
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("the sibling kept its node after a waiting member was deleted")
	}
	<-waits[1]
	env.forget(job[0])
	require.True(t, hasEvent(env.recorded(), ReasonMemberDeleted, "member job-1 was deleted while it waited for its gang; waiting members rejected: 1; retrying now"))

	r := job[1].DeepCopy()
	r.UID = "job-1-replacement"
	env.create(r)
	env.runGang([]*v1.Pod{job[0], r, job[2]})
}

func TestGangStateIsForgottenWithItsTimers(t *testing.T) {
	job := members("job", 2, "8")
	pg := gangtest.MakePodGroup("job", testNS).MinMember(2).Obj()
	env := newTestEnv(t, gpuNodes(2), job, []*v1alpha1.PodGroup{pg})
	n0, status := env.schedule(job[0])
	require.Equal(t, fwk.Wait, status.Code())
	w := env.waitAsync(job[0], n0)
	require.True(t, env.fh.RejectWaitingPod(job[0].UID))
	<-w
	require.True(t, env.clock.HasWaiters(), "a failed gang waits out its backoff on a timer")
	env.DeletePodGroup(pg)
	require.Eventually(t, func() bool { return !env.ledger().Knows(gang.Key{Namespace: testNS, Name: "job"}) },
		wait.ForeverTestTimeout, 10*time.Millisecond, "a deleted PodGroup's gang leaves nothing in the ledger")
	require.False(t, env.clock.HasWaiters(), "a forgotten gang's timers are stopped")
}

func TestGatedMemberFollowsItsLabel(t *testing.T) {
	a := member("a", "a-0", "8")
	env := newTestEnv(t, gpuNodes(1), []*v1.Pod{a}, []*v1alpha1.PodGroup{
		gangtest.MakePodGroup("a", testNS).MinMember(2).Obj(),
		gangtest.MakePodGroup("b", testNS).MinMember(1).Obj(),
	})
	require.False(t, env.preEnqueue(a).IsSuccess())
	require.Equal(t, 1, env.ledger().Gate.Held(gang.Key{Namespace: testNS, Name: "a"}))

	moved := a.DeepCopy()
	moved.Labels[scheduling.PodGroupLabel] = "b"
	env.update(moved)
	require.Eventually(t, func() bool {
		return env.ledger().Gate.Held(gang.Key{Namespace: testNS, Name: "a"}) == 0
	}, wait.ForeverTestTimeout, 10*time.Millisecond, "a pod that left gang a is no longer held for it")
	require.True(t, env.preEnqueue(moved).IsSuccess())
}

func TestGangMetricsCoverEveryInstance(t *testing.T) {
	// Two profiles, two plugin instances: the gauges sum both.
	first := newTestEnv(t, gpuNodes(1), []*v1.Pod{member("a", "a-0", "8")}, []*v1alpha1.PodGroup{gangtest.MakePodGroup("a", testNS).MinMember(2).Obj()})
	second := newTestEnv(t, gpuNodes(1), []*v1.Pod{member("b", "b-0", "8")}, []*v1alpha1.PodGroup{gangtest.MakePodGroup("b", testNS).MinMember(2).Obj()})
	require.False(t, first.pl.PreEnqueue(first.ctx, member("a", "a-0", "8")).IsSuccess())
	require.False(t, second.pl.PreEnqueue(second.ctx, member("b", "b-0", "8")).IsSuccess())
	members := 0
	instances.each(func(pl *Plugin) {
		if pl == first.pl || pl == second.pl {
			m, _, _ := pl.ledger.Waiting()
			members += m
		}
	})
	require.Equal(t, 2, members)
	require.NoError(t, testutil.CustomCollectAndCompare(&gangCollector{}, strings.NewReader(`# HELP gpu_gang_waiting_gangs [ALPHA] Gangs that are not scheduled yet, by state: members (held until their PodGroup and minMember members exist) or placing (a plan holds capacity while members reserve).
# TYPE gpu_gang_waiting_gangs gauge
gpu_gang_waiting_gangs{state="members"} 2
gpu_gang_waiting_gangs{state="placing"} 0
`), "gpu_gang_waiting_gangs"))
}

// The held-capacity gauge sums what every instance's plans and head hold
// keep, so that a benchmark can count it as held without a pod bound.
func TestHeldCapacityGauge(t *testing.T) {
	first := newTestEnv(t, gpuNodes(1), nil, nil)
	second := newTestEnv(t, gpuNodes(1), nil, nil)
	slot := func(uid string, gpus int64) ledger.Slot {
		return ledger.Slot{UID: types.UID(uid), Node: "n0", Request: capacity.Amounts{"nvidia.com/gpu": gpus}}
	}
	first.ledger().HoldPlan(gang.Key{Namespace: testNS, Name: "a"}, []ledger.Slot{slot("a-0", 8), slot("a-1", 4)}, first.clock.Now().Add(time.Hour), &placement.Plan{}, 1)
	second.ledger().Head.Take(gang.Key{Namespace: testNS, Name: "b"}, ledger.QueueOrder{Group: "b"}, []ledger.Slot{slot("b-0", 2)}, time.Hour)
	require.NoError(t, testutil.CustomCollectAndCompare(&gangCollector{}, strings.NewReader(`# HELP gpu_gang_held_capacity [ALPHA] Capacity that plans of gangs in flight and the head hold keep from other pods with no pod reserved on it yet, by resource. Members reserved and waiting in Permit are not in it.
# TYPE gpu_gang_held_capacity gauge
gpu_gang_held_capacity{resource="nvidia.com/gpu"} 14
`), "gpu_gang_held_capacity"))
}

func TestReplacementStaysInsideRequiredLeaf(t *testing.T) {
	// A running gang requires one leaf. Its replacement waits while that
	// leaf is full, though other leaves have room, and lands in the leaf as
	// soon as room frees up there.
	leafOf := func(node string) string { return node[:len("s0-l0")] }
	job := members("job", 3, "4")
	env := newTestEnv(t, fabric(), job, []*v1alpha1.PodGroup{
		gangtest.MakePodGroup("job", testNS).MinMember(3).Annotation(scheduling.AnnotationTopologyRequired, leafLabel).Obj(),
	}, withTopology(t))
	bound := env.runGang(job)
	home := leafOf(bound[0].Spec.NodeName)
	used := map[string]int{}
	for _, p := range bound {
		require.Equal(t, home, leafOf(p.Spec.NodeName), "the gang starts inside one leaf")
		used[p.Spec.NodeName] += 4
	}
	for _, n := range env.nodes {
		if leafOf(n.Name) == home && used[n.Name] < 8 {
			env.assume(batchPod("filler-"+n.Name, n.Name, fmt.Sprint(8-used[n.Name])))
		}
	}
	freed := bound[1].Spec.NodeName
	r := env.replace(bound[1])
	taken := batchPod("filler-freed", freed, "4")
	env.assume(taken)
	_, status := env.schedule(r)
	require.Equal(t, fwk.Unschedulable, status.Code(), "the replacement must not leave the required leaf: %v", status)
	require.Contains(t, status.Message(), "the leaf that runs the gang's other members")

	env.forget(taken)
	node, status := env.schedule(r)
	require.True(t, status.IsSuccess(), "%v", status)
	require.Equal(t, home, leafOf(node))
}

func TestANewRunGathersAsAGang(t *testing.T) {
	// Every member of the last run succeeded; the job restarts under the
	// same PodGroup. The new members must start together again, not one by
	// one on the strength of the finished ones.
	old := members("job", 2, "8")
	for _, p := range old {
		p.Status.Phase = v1.PodSucceeded
	}
	fresh := []*v1.Pod{member("job", "job-2", "8"), member("job", "job-3", "8")}
	env := newTestEnv(t, gpuNodes(2), append(old, fresh...), []*v1alpha1.PodGroup{gangtest.MakePodGroup("job", testNS).MinMember(2).Obj()})
	node, status := env.schedule(fresh[0])
	require.Equal(t, fwk.Wait, status.Code(), "the new run's first member must wait for its gang: %v", status)
	w := env.waitAsync(fresh[0], node)
	_, status = env.schedule(fresh[1])
	require.True(t, status.IsSuccess(), "%v", status)
	require.True(t, (<-w).IsSuccess())
}
