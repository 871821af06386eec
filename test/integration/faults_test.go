package integration

// The fault suite: what happens to gangs after admission, and what the
// planner cannot see. Each case is named in the table in README.md with the
// fault, what a user sees, and the bound it must meet. Every case ends with
// no gang half-bound beyond its stated grace (see gangLedger).

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling/v1alpha1"
	"github.com/gpu-gang/gpu-gang/pkg/controller/podgroup"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// Graces the fault cases state for a half-bound span: the time between the
// first and the last bind of a gang that a fault may stretch.
const (
	// bindGrace: nothing stretches the binds; one API call per member.
	bindGrace = partialBindGrace
	// bindRetryGrace: the API server refused one member's binding for a
	// while; the member retries with the scheduler's pod backoff (up to
	// 10 s) once the refusal ends.
	bindRetryGrace = 20 * time.Second
	// restartGrace: the scheduler died between two binds of one gang; a
	// new process (or the standby replica, after the lease runs out) must
	// start, sync and finish the gang.
	restartGrace = 30 * time.Second
	// repairTimeout bounds the time to repair a running gang once its
	// replacement exists.
	repairTimeout = bindTimeout
)

// replacement is a new pod for a member that is gone, as a job's
// controller creates it: the same name and spec, no node.
func replacement(p *v1.Pod) *v1.Pod {
	r := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels, Annotations: p.Annotations}, Spec: *p.Spec.DeepCopy()}
	r.Spec.NodeName = ""
	return r
}

// deleteAndWait deletes pods at once and waits until they are gone.
func (env *testEnv) deleteAndWait(pods ...*v1.Pod) {
	env.t.Helper()
	env.deletePods(pods...)
	err := waitFor(env.t.Context(), bindTimeout, func(ctx context.Context) (bool, error) {
		for _, p := range pods {
			if _, err := kubeClient.CoreV1().Pods(env.ns).Get(ctx, p.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		return true, nil
	})
	if err != nil {
		env.t.Fatalf("waiting for pods %v to go: %v", podNames(pods), err)
	}
}

// conditionMessage is the message of a PodGroup's condition, or "".
func conditionMessage(pg *v1alpha1.PodGroup, condType string) string {
	for _, c := range pg.Status.Conditions {
		if c.Type == condType {
			return c.Message
		}
	}
	return ""
}

// getPod reads a pod.
func (env *testEnv) getPod(name string) *v1.Pod {
	env.t.Helper()
	p, err := kubeClient.CoreV1().Pods(env.ns).Get(env.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		env.t.Fatalf("reading pod %s: %v", name, err)
	}
	return p
}

// Fault 1: a member of a running gang is replaced. The 8 x 8-GPU gang's
// PodGroup carries minResources, as training-operator and MPI Operator
// write it; the replacement binds on the free node, and the PodGroup says
// the gang ran below minMember while the member was missing, and names it.
func TestFaultRunningGangMemberReplaced(t *testing.T) {
	env := newTestEnv(t)
	startPodGroupController(t, podgroup.DefaultMissingMembersGrace)
	env.gpuNodes(9, 8)
	ledger := env.ledgerGangs(bindGrace, map[string]int{"job": 8})
	env.createPodGroup(gangtest.MakePodGroup("job", env.ns).MinMember(8).MinResources(map[v1.ResourceName]string{gpu: "64"}).Obj())
	pods := env.gangPods("job", 8, 8)
	env.createPods(pods...)
	env.waitForBound(bindTimeout, pods...)
	// The controller can only say the gang runs below minMember once it
	// has seen it run.
	env.waitForStatus("job", "the gang is scheduled", func(pg *v1alpha1.PodGroup) bool {
		return hasCondition(pg, podgroup.ConditionScheduled, metav1.ConditionTrue, podgroup.ReasonQuorumScheduled)
	})

	lost := env.getPod(pods[3].Name)
	env.deleteAndWait(lost)
	env.waitForEvent("PodGroup", "job", coscheduling.ReasonMemberLost)
	pg := env.waitForStatus("job", "BelowMinMember names the lost member", func(pg *v1alpha1.PodGroup) bool {
		return hasCondition(pg, podgroup.ConditionBelowMinMember, metav1.ConditionTrue, podgroup.ReasonMembersLost) &&
			strings.Contains(conditionMessage(pg, podgroup.ConditionBelowMinMember), lost.Name+" (deleted from node "+lost.Spec.NodeName+")")
	})
	t.Logf("while the member is missing: %s", conditionMessage(pg, podgroup.ConditionBelowMinMember))

	env.createPods(replacement(lost))
	repair := ledger.waitRepaired("job", repairTimeout)
	t.Logf("time to repair, from the member's loss to its replacement bound: %s", repair)
	env.waitForEvent("PodGroup", "job", coscheduling.ReasonMemberPlaced)
	env.waitForEvent("PodGroup", "job", podgroup.EventMinMemberRestored)
	env.expectCondition(pg, podgroup.ConditionBelowMinMember, metav1.ConditionFalse, podgroup.ReasonAtLeastMinMember)
	ledger.expectNoHalfBound()
}

// Fault 2: one member succeeded and another is replaced. The succeeded
// member counts towards quorum, so the replacement is not held at "2/3
// present".
func TestFaultFinishedMemberAndReplacement(t *testing.T) {
	env := newTestEnv(t)
	env.gpuNodes(3, 8)
	ledger := env.ledgerGangs(bindGrace, map[string]int{"job": 3})
	env.createPodGroup(gangtest.MakePodGroup("job", env.ns).MinMember(3).Obj())
	pods := env.gangPods("job", 3, 8)
	env.createPods(pods...)
	env.waitForBound(bindTimeout, pods...)

	done := env.getPod(pods[0].Name)
	done.Status.Phase = v1.PodSucceeded
	if _, err := kubeClient.CoreV1().Pods(env.ns).UpdateStatus(t.Context(), done, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("marking %s succeeded: %v", done.Name, err)
	}
	lost := env.getPod(pods[1].Name)
	env.deleteAndWait(lost)
	env.createPods(replacement(lost))
	repair := ledger.waitRepaired("job", repairTimeout)
	t.Logf("time to repair: %s", repair)
	ledger.expectNoHalfBound()
}

// Fault 3: members that must land on distinct nodes (one rank per node, as
// hostNetwork jobs need). Packing two 4-GPU members per 8-GPU node is what
// Filter rejects; the plan must not do it, and the gang starts.
func TestFaultMembersExcludeEachOther(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(p *v1.Pod)
	}{
		{"required anti-affinity on the hostname", func(p *v1.Pod) {
			p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
					TopologyKey:   v1.LabelHostname,
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{scheduling.PodGroupLabel: "job"}},
				}},
			}}
		}},
		{"the same host port", func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 29500, HostPort: 29500, Protocol: v1.ProtocolTCP}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			env.gpuNodes(8, 8)
			ledger := env.ledgerGangs(bindGrace, map[string]int{"job": 4})
			env.createPodGroup(gangtest.MakePodGroup("job", env.ns).MinMember(4).Obj())
			pods := env.gangPods("job", 4, 4)
			for _, p := range pods {
				tc.set(p)
			}
			start := time.Now()
			env.createPods(pods...)
			nodes := env.waitForBound(bindTimeout, pods...)
			t.Logf("bound in %s: %v", time.Since(start).Round(time.Millisecond), nodes)
			seen := map[string]string{}
			for pod, node := range nodes {
				if other, ok := seen[node]; ok {
					t.Errorf("%s and %s share node %s", other, pod, node)
				}
				seen[node] = pod
			}
			ledger.expectNoHalfBound()
		})
	}
}

// Fault 4: pods that never leave (services, DaemonSets) take half the
// cluster. A gang that would fit the empty cluster, but never this one,
// must not hold the free half: three small gangs that fit it run at once,
// and the large one waits with a reason.
func TestFaultLongRunningPodsDoNotStarveGangs(t *testing.T) {
	env := newTestEnv(t)
	env.gpuNodes(8, 8)
	var services []*v1.Pod
	for i := range 4 {
		services = append(services, env.pod(fmt.Sprintf("inference-%d", i)).Res(gpuRequest(8)).
			NodeSelector(map[string]string{v1.LabelHostname: env.nodeName(fmt.Sprintf("n%d", i))}).Obj())
	}
	env.createPods(services...)
	env.waitForBound(bindTimeout, services...)

	gangs := map[string]int{"large": 6, "small-0": 1, "small-1": 1, "small-2": 1}
	ledger := env.ledgerGangs(bindGrace, gangs)
	env.createPodGroup(gangtest.MakePodGroup("large", env.ns).MinMember(6).Obj())
	large := env.gangPods("large", 6, 8)
	env.createPods(large...)
	env.waitForEvent("PodGroup", "large", coscheduling.ReasonPermanentPodsInTheWay)

	start := time.Now()
	var small []*v1.Pod
	for i := range 3 {
		name := fmt.Sprintf("small-%d", i)
		env.createPodGroup(gangtest.MakePodGroup(name, env.ns).MinMember(1).Obj())
		small = append(small, env.gangPods(name, 1, 8)...)
	}
	env.createPods(small...)
	env.waitForBound(bindTimeout, small...)
	t.Logf("three small gangs bound %s after they were created, beside the large gang that cannot fit", time.Since(start).Round(time.Millisecond))
	env.expectStaysUnbound(staysUnboundWindow, large...)
	ledger.expectNoHalfBound()
}

// holdInPermit creates a gang of three whole-node members whose members 0
// and 1 reserve their nodes and wait in Permit while member 2 is held back
// before its scheduling cycle (see HoldForTest; the test must have called
// withHoldPlugin). It returns the members once both wait.
func (env *testEnv) holdInPermit(group string) []*v1.Pod {
	env.t.Helper()
	env.createPodGroup(gangtest.MakePodGroup(group, env.ns).MinMember(3).Obj())
	members := env.gangPods(group, 3, 8)
	members[2].Labels[holdLabel] = "true"
	env.createPods(members...)
	waitForGauge(env.t, "gpu_gang_members_waiting_in_permit", 2)
	return members
}

// waitForGauge waits until a gauge of the in-process scheduler reads want.
func waitForGauge(t *testing.T, name string, want float64) {
	t.Helper()
	var got float64
	err := waitFor(t.Context(), bindTimeout, func(context.Context) (bool, error) {
		got = gauge(t, name)
		return got == want, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s to read %v (last %v): %v", name, want, got, err)
	}
}

// gauge reads an unlabelled gauge of the in-process scheduler; 0 when it is
// not there.
func gauge(t *testing.T, name string) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) > 0 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return 0
}

// Fault 5: a member waiting in Permit is deleted. Its siblings give back
// their nodes at once, not at the gang's deadline, and the replacement gets
// a place in a fresh plan.
func TestFaultWaitingMemberDeleted(t *testing.T) {
	withHoldPlugin(t)
	env := newTestEnv(t)
	env.gpuNodes(3, 8)
	ledger := env.ledgerGangs(bindGrace, map[string]int{"job": 3})
	members := env.holdInPermit("job")

	start := time.Now()
	env.deleteAndWait(members[1])
	ev := env.waitForEvent("PodGroup", "job", coscheduling.ReasonMemberDeleted)
	released := time.Since(start)
	t.Logf("siblings released %s after the deletion (deadline 60 s): %s", released.Round(time.Millisecond), ev.Note)
	if released > 10*time.Second {
		t.Errorf("the siblings were released after %s; a deleted member must fail its gang at once", released)
	}
	env.expectStaysUnbound(staysUnboundWindow, members[0])
	env.createPods(replacement(members[1]))
	env.release(members[2].Name)
	env.waitForBound(retryBindTimeout, members...)
	ledger.expectNoHalfBound()
}

// The kill tests' gang: 96 members of 2 GPUs fill 24 8-GPU nodes. The
// process to be killed runs with its API client limited to killClientQPS
// calls a second (see processOptions), so its binds, one call each, take
// about 10 s; a watch kills it once it has seen killAfterBound members
// bound, which leaves about 7 s of binds to absorb a loaded machine's watch
// and kill latency. Its successor runs the shipped configuration.
const (
	killGangSize   = 96
	killGangGPUs   = 2
	killClientQPS  = 10
	killAfterBound = killGangSize / 4
	// killAttempts bounds the tries at landing a kill mid-placement. A
	// kill that finds the whole gang bound proves nothing, so the scenario
	// runs again with a fresh gang and processes; the test fails if no
	// attempt lands.
	killAttempts = 3
	// killQuiet is how long, with no scheduler running, the killed gang
	// must keep the members the API showed bound at the kill: that count
	// is what the kill left, not binds still on their way.
	killQuiet = time.Second
)

// killGangs names the gang of each attempt, for the ledger.
func killGangs() map[string]int {
	gangs := map[string]int{}
	for a := 1; a <= killAttempts; a++ {
		gangs[killGangName(a)] = killGangSize
	}
	return gangs
}

func killGangName(attempt int) string { return fmt.Sprintf("job-%d", attempt) }

// midGangKill is a kill that landed while a gang was being bound.
type midGangKill struct {
	attempt int
	pods    []*v1.Pod
	// bound is how many members the API showed bound once the killed
	// process had exited; at is when that was read.
	bound int
	at    time.Time
}

// killMidGang creates a gang of killGangSize members and, from a watch,
// kills the process that start returns once killAfterBound members are
// bound. Once the process has exited it reads from the API how many members
// are bound (see settledCount): the kill landed mid-placement if some but
// not all are. If it
// did not, abandon (from start) stops what start started, the gang goes,
// and the scenario runs again, up to killAttempts times.
func (env *testEnv) killMidGang(start func(attempt int) (victim *schedulerProcess, abandon func())) midGangKill {
	env.t.Helper()
	for attempt := 1; attempt <= killAttempts; attempt++ {
		victim, abandon := start(attempt)
		group := killGangName(attempt)
		env.createPodGroup(gangtest.MakePodGroup(group, env.ns).MinMember(killGangSize).Obj())
		pods := env.gangPods(group, killGangSize, killGangGPUs)
		env.killAfterBinds(group, pods, killAfterBound, victim.kill)
		k := midGangKill{attempt: attempt, pods: pods, bound: env.settledCount(pods), at: time.Now()}
		if k.bound > 0 && k.bound < len(pods) {
			return k
		}
		env.t.Logf("attempt %d: the kill of %s found %d of %d members bound, not mid-placement; trying again with a fresh gang",
			attempt, victim, k.bound, len(pods))
		abandon()
		env.deleteAndWait(pods...)
		if err := pgClient.SchedulingV1alpha1().PodGroups(env.ns).Delete(env.t.Context(), group, metav1.DeleteOptions{}); err != nil {
			env.t.Fatalf("deleting PodGroup %s: %v", group, err)
		}
	}
	env.t.Fatalf("none of %d kills landed mid-placement: each found the gang unbound or wholly bound", killAttempts)
	return midGangKill{}
}

// killAfterBinds creates a gang's pods and calls kill from a watch as soon as
// it has seen after of them bound; it returns once kill has.
func (env *testEnv) killAfterBinds(group string, pods []*v1.Pod, after int, kill func()) {
	env.t.Helper()
	fired := make(chan struct{})
	// Only the watch's goroutine touches these.
	bound := map[string]bool{}
	done := false
	env.watchPods(func(pod *v1.Pod, deleted bool) {
		if done || deleted || pod.Labels[scheduling.PodGroupLabel] != group || pod.Spec.NodeName == "" {
			return
		}
		bound[pod.Name] = true
		if len(bound) >= after {
			done = true
			kill()
			close(fired)
		}
	})
	env.createPods(pods...)
	select {
	case <-fired:
	case <-time.After(retryBindTimeout):
		env.t.Fatalf("%d members of gang %s were not bound within %s", after, group, retryBindTimeout)
	}
}

// countBound reads from the API how many of the pods are bound.
func (env *testEnv) countBound(pods []*v1.Pod) int {
	env.t.Helper()
	nodes, err := env.boundNodes(env.t.Context(), podNames(pods))
	if err != nil {
		env.t.Fatal(err)
	}
	n := 0
	for _, node := range nodes {
		if node != "" {
			n++
		}
	}
	return n
}

// settledCount reads from the API how many of the pods are bound, once two
// reads pollInterval apart agree: a bind the killed process sent just
// before it died may still be landing.
func (env *testEnv) settledCount(pods []*v1.Pod) int {
	env.t.Helper()
	n := env.countBound(pods)
	for {
		select {
		case <-env.t.Context().Done():
			env.t.Fatal(env.t.Context().Err())
		case <-time.After(pollInterval):
		}
		next := env.countBound(pods)
		if next == n {
			return n
		}
		n = next
	}
}

// expectNoBindsUntil checks that exactly bound of the pods stay bound until
// done reports true, for at most timeout. done is asked after each count,
// so every count judged was taken before done turned true.
func (env *testEnv) expectNoBindsUntil(pods []*v1.Pod, bound int, timeout time.Duration, done func() bool) {
	env.t.Helper()
	err := waitFor(env.t.Context(), timeout, func(context.Context) (bool, error) {
		n := env.countBound(pods)
		if done() {
			return true, nil
		}
		if n != bound {
			env.t.Fatalf("%d members are bound, %d at the kill: members bound while no scheduler ran", n, bound)
		}
		return false, nil
	})
	if err != nil {
		env.t.Fatalf("waiting %s for the successor: %v", timeout, err)
	}
}

// Fault 6: the scheduler process is killed with SIGKILL between two binds
// of one gang, and started again. The new process finishes the gang from
// what the API shows.
func TestFaultSchedulerKilledMidGang(t *testing.T) {
	pauseInProcessScheduler(t)
	env := newTestEnv(t)
	env.gpuNodes(24, 8)
	ledger := env.ledgerGangs(restartGrace, killGangs())
	k := env.killMidGang(func(attempt int) (*schedulerProcess, func()) {
		p := startSchedulerProcessWith(t, fmt.Sprintf("scheduler-%d", attempt), processOptions{clientQPS: killClientQPS})
		env.waitForCanary(p)
		return p, func() {}
	})
	t.Logf("attempt %d: killed the scheduler with %d of %d members bound", k.attempt, k.bound, killGangSize)
	env.expectNoBindsUntil(k.pods, k.bound, retryBindTimeout, func() bool { return time.Since(k.at) >= killQuiet })

	start := time.Now()
	startSchedulerProcess(t, "successor", false)
	env.waitForBound(retryBindTimeout, k.pods...)
	t.Logf("the new process bound the other %d members and finished the gang %s after it started",
		killGangSize-k.bound, time.Since(start).Round(time.Millisecond))
	ledger.expectNoHalfBound()
}

// Fault 7: two replicas with leader election; the leader is killed while a
// gang is being bound. The standby takes over when the lease runs out and
// finishes the gang.
func TestFaultLeaderKilledMidGang(t *testing.T) {
	pauseInProcessScheduler(t)
	env := newTestEnv(t)
	env.gpuNodes(24, 8)
	ledger := env.ledgerGangs(restartGrace, killGangs())
	var standby *schedulerProcess
	k := env.killMidGang(func(attempt int) (*schedulerProcess, func()) {
		// The replica started first takes the lease. The standby starts
		// once it has; it has synced its informers when it first tries
		// for the lease.
		leader := startSchedulerProcessWith(t, fmt.Sprintf("replica-a%d", attempt), processOptions{leaderElect: true, clientQPS: killClientQPS})
		leader.waitForLog(t, "Successfully acquired lease", retryBindTimeout)
		standby = startSchedulerProcess(t, fmt.Sprintf("replica-b%d", attempt), true)
		standby.waitForLog(t, "Attempting to acquire leader lease", retryBindTimeout)
		env.waitForCanary(leader)
		return leader, standby.stop
	})
	t.Logf("attempt %d: killed the leader with %d of %d members bound", k.attempt, k.bound, killGangSize)
	// Nothing binds until the standby holds the lease: it was standing by.
	env.expectNoBindsUntil(k.pods, k.bound, retryBindTimeout, standby.leads)
	t.Logf("%s took the lease %s after the leader died (lease %s)", standby, time.Since(k.at).Round(time.Millisecond), testLeaseDuration)
	env.waitForBound(retryBindTimeout, k.pods...)
	t.Logf("the standby bound the other %d members and finished the gang %s after the leader died",
		killGangSize-k.bound, time.Since(k.at).Round(time.Millisecond))
	ledger.expectNoHalfBound()
}

// waitForCanary waits until the scheduler process binds a plain pod, so it
// is synced and schedules.
func (env *testEnv) waitForCanary(p *schedulerProcess) {
	env.t.Helper()
	canary := env.pod("canary").Res(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj()
	env.createPods(canary)
	env.waitForBound(retryBindTimeout, canary)
	env.deleteAndWait(canary)
	env.t.Logf("%s schedules", p)
}

// Fault 8: the API server refuses one member's binding (an admission
// policy, here) after its gang was let go. The member is retried next to
// its gang, binds once the refusal ends, and the PodGroup says what
// happened.
func TestFaultBindingRejected(t *testing.T) {
	env := newTestEnv(t)
	env.gpuNodes(3, 8)
	policy := env.refuseBindings("job-2", "binding-probe")
	ledger := env.ledgerGangs(bindRetryGrace, map[string]int{"job": 3})
	env.createPodGroup(gangtest.MakePodGroup("job", env.ns).MinMember(3).Obj())
	pods := env.gangPods("job", 3, 8)
	env.createPods(pods...)
	ev := env.waitForEvent("PodGroup", "job", coscheduling.ReasonMemberNotBound)
	t.Logf("the PodGroup says: %s", ev.Note)
	env.waitForBoundCount(bindTimeout, 2, pods...)

	start := time.Now()
	policy.lift()
	env.waitForBound(retryBindTimeout, pods...)
	t.Logf("the refused member bound %s after the refusal ended", time.Since(start).Round(time.Millisecond))
	ledger.expectNoHalfBound()
}

// bindingRefusal is a ValidatingAdmissionPolicy that refuses the bindings of
// some pods of a namespace.
type bindingRefusal struct {
	env  *testEnv
	name string
}

// refuseBindings makes the API server refuse to bind the named pods of env's
// namespace, and waits until it does: policies take effect asynchronously.
// The last name is a probe pod the wait binds by hand.
func (env *testEnv) refuseBindings(names ...string) *bindingRefusal {
	env.t.Helper()
	t := env.t
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = fmt.Sprintf("%q", n)
	}
	r := &bindingRefusal{env: env, name: "refuse-bindings-" + env.ns}
	createAdmissionRefusal(t, r.name,
		admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/binding"}},
		},
		fmt.Sprintf("object.metadata.namespace != %q || !(object.metadata.name in [%s])", env.ns, strings.Join(quoted, ", ")),
		"binding refused by the fault suite's admission policy")

	probe := names[len(names)-1]
	env.createPods(probePod(env.ns, probe))
	err := waitFor(t.Context(), bindTimeout, func(ctx context.Context) (bool, error) {
		err := kubeClient.CoreV1().Pods(env.ns).Bind(ctx, &v1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: probe, Namespace: env.ns},
			Target:     v1.ObjectReference{Kind: "Node", Name: env.nodeName("n0")},
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "binding refused"), nil
	})
	if err != nil {
		t.Fatalf("the admission policy never took effect: %v", err)
	}
	return r
}

// st_pod is a pod no scheduler binds, for probing admission.
func probePod(ns, name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1.PodSpec{SchedulerName: "no-scheduler", TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
}

// lift ends the refusal.
func (r *bindingRefusal) lift() { liftAdmissionRefusal(r.name) }

// createAdmissionRefusal makes the API server deny, with message, the
// requests that match rule and fail expression (a ValidatingAdmissionPolicy
// and its binding, both named name), and lifts the refusal when the test
// ends. Policies take effect asynchronously: the caller probes.
func createAdmissionRefusal(t *testing.T, name string, rule admissionregistrationv1.RuleWithOperations, expression, message string) {
	t.Helper()
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
				{RuleWithOperations: rule},
			}},
			Validations: []admissionregistrationv1.Validation{{Expression: expression, Message: message}},
		},
	}
	vapb := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	api := kubeClient.AdmissionregistrationV1()
	if _, err := api.ValidatingAdmissionPolicies().Create(t.Context(), vap, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the admission policy: %v", err)
	}
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(t.Context(), vapb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("binding the admission policy: %v", err)
	}
	t.Cleanup(func() { liftAdmissionRefusal(name) })
}

// liftAdmissionRefusal ends what createAdmissionRefusal started.
func liftAdmissionRefusal(name string) {
	api := kubeClient.AdmissionregistrationV1()
	ctx := context.Background()
	_ = api.ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{})
	_ = api.ValidatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{})
}

// Fault 9: a node is deleted while a gang waits in Permit with a member
// reserved on it: the gang gives back its nodes at once and binds on nodes
// that exist. And a node is deleted while a gang runs: once its pods are
// cleaned up (the pod garbage collector's job) and the job's controller
// recreates the member, the replacement lands in the gang's leaf.
func TestFaultNodeDeleted(t *testing.T) {
	t.Run("while the gang waits in Permit", func(t *testing.T) {
		withHoldPlugin(t)
		env := newTestEnv(t)
		// One leaf of three nodes: the plan has nowhere else to go.
		f := env.createFabric(1, 1, 3, 3)
		ledger := env.ledgerGangs(bindGrace, map[string]int{"job": 3})
		members := env.holdInPermit("job")
		for node := range f.leafOf {
			if err := kubeClient.CoreV1().Nodes().Delete(t.Context(), node, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("deleting node %s: %v", node, err)
			}
		}
		ev := env.waitForEvent("PodGroup", "job", coscheduling.ReasonGangRejected)
		t.Logf("the PodGroup says: %s", ev.Note)
		var fresh []*v1.Node
		for n := range 3 {
			fresh = append(fresh, gpuNode(fmt.Sprintf("new-%d", n), 8).Label(spineLabel, "s0").Label(leafLabel, "s0-l1").
				Label(cliqueLabel, "s0-l1-c0").Obj())
		}
		created := env.createNodes(fresh...)
		env.release(members[2].Name)
		nodes := env.waitForBound(retryBindTimeout, members...)
		live := map[string]bool{}
		for _, n := range created {
			live[n.Name] = true
		}
		for pod, node := range nodes {
			if !live[node] {
				t.Errorf("member %s bound to %s, a node that was deleted", pod, node)
			}
		}
		ledger.expectNoHalfBound()
	})
	t.Run("while the gang runs", func(t *testing.T) {
		env := newTestEnv(t)
		f := env.createFabric(1, 2, 4, 2)
		ledger := env.ledgerGangs(bindGrace, map[string]int{"job": 3})
		env.createPodGroup(gangtest.MakePodGroup("job", env.ns).MinMember(3).Obj())
		pods := env.gangPods("job", 3, 8)
		env.createPods(pods...)
		nodes := env.waitForBound(bindTimeout, pods...)
		leaf := f.leafOf[nodes[pods[0].Name]]

		lost := env.getPod(pods[1].Name)
		if err := kubeClient.CoreV1().Nodes().Delete(t.Context(), lost.Spec.NodeName, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting node %s: %v", lost.Spec.NodeName, err)
		}
		env.deleteAndWait(lost) // what the pod garbage collector does
		env.createPods(replacement(lost))
		repair := ledger.waitRepaired("job", repairTimeout)
		got := env.waitForBound(bindTimeout, pods[1])[pods[1].Name]
		if f.leafOf[got] != leaf {
			t.Errorf("the replacement landed in leaf %s, not the gang's leaf %s, which has a free node", f.leafOf[got], leaf)
		}
		t.Logf("time to repair: %s; the replacement is on %s in leaf %s", repair, got, f.leafOf[got])
		ledger.expectNoHalfBound()
	})
}

// Fault 9b: a spot node under a running gang is reclaimed. The ledger sees
// the gang degraded, never half-bound; the PodGroup's BelowMinMember
// condition names the member and says it went with its spot node, for
// whoever repairs the job. Karpenter then brings a new spot node and the
// job's controller recreates the member: the gang is repaired.
func TestFaultSpotNodeReclaimed(t *testing.T) {
	env := newTestEnv(t)
	startPodGroupController(t, podgroup.DefaultMissingMembersGrace)
	spotNode := func(name string) *v1.Node {
		return gpuNode(name, 8).Label(scheduling.LabelKarpenterCapacityType, "spot").Obj()
	}
	env.createNodes(spotNode("n0"), spotNode("n1"), spotNode("n2"))
	ledger := env.ledgerGangs(bindGrace, map[string]int{"job": 3})
	env.createPodGroup(gangtest.MakePodGroup("job", env.ns).MinMember(3).Obj())
	pods := env.gangPods("job", 3, 8)
	env.createPods(pods...)
	env.waitForBound(bindTimeout, pods...)
	pg := env.waitForStatus("job", "the gang is scheduled", func(pg *v1alpha1.PodGroup) bool {
		return hasCondition(pg, podgroup.ConditionScheduled, metav1.ConditionTrue, podgroup.ReasonQuorumScheduled)
	})

	lost := env.getPod(pods[2].Name)
	if err := kubeClient.CoreV1().Nodes().Delete(t.Context(), lost.Spec.NodeName, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("reclaiming node %s: %v", lost.Spec.NodeName, err)
	}
	// What the pod garbage collector does after a reclaim: mark the pod,
	// then delete it.
	lost.Status.Conditions = append(lost.Status.Conditions, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue,
		Reason: "DeletionByPodGC", Message: "PodGC: node no longer exists", LastTransitionTime: metav1.Now()})
	if _, err := kubeClient.CoreV1().Pods(env.ns).UpdateStatus(t.Context(), lost, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("marking %s: %v", lost.Name, err)
	}
	env.deleteAndWait(lost)
	if st := ledger.waitDegraded("job", eventTimeout); st.placed != 2 {
		t.Errorf("after the reclaim the ledger has %d of the gang's %d members placed, want 2", st.placed, st.min)
	}
	pg = env.waitForStatus("job", "BelowMinMember names the spot reclaim", func(pg *v1alpha1.PodGroup) bool {
		return hasCondition(pg, podgroup.ConditionBelowMinMember, metav1.ConditionTrue, podgroup.ReasonMembersLost) &&
			strings.Contains(conditionMessage(pg, podgroup.ConditionBelowMinMember), lost.Name+" (reclaimed with spot node "+lost.Spec.NodeName+")")
	})
	t.Logf("the PodGroup says: %s", conditionMessage(pg, podgroup.ConditionBelowMinMember))

	env.createNodes(spotNode("n3"))
	env.createPods(replacement(lost))
	repair := ledger.waitRepaired("job", repairTimeout)
	t.Logf("time to repair, from the reclaim to the replacement bound on the new spot node: %s", repair)
	env.expectCondition(pg, podgroup.ConditionBelowMinMember, metav1.ConditionFalse, podgroup.ReasonAtLeastMinMember)
	if st := ledger.state("job"); st.degradations != 1 || len(st.repairs) != 1 || !st.running {
		t.Errorf("the ledger has the gang running=%t, degraded %d times, repaired %d times; want running, one degradation (the reclaim) and its repair",
			st.running, st.degradations, len(st.repairs))
	}
	ledger.expectNoHalfBound()
}

// Fault 10: a node is relabelled between two plans. A gang that needs one
// leaf of three nodes fits only by the new labels; it must be planned with
// them, not with a tree cached from the old ones.
func TestFaultNodeRelabelled(t *testing.T) {
	env := newTestEnv(t)
	f := env.createFabric(1, 2, 2, 2)
	ledger := env.ledgerGangs(bindGrace, map[string]int{"first": 2, "job": 5})
	// A first plan caches the tree of the old labels.
	env.createPodGroup(gangtest.MakePodGroup("first", env.ns).MinMember(2).Obj())
	first := env.gangPods("first", 2, 1)
	env.createPods(first...)
	env.waitForBound(bindTimeout, first...)

	moved := env.nodeName("s0-l1-n0")
	node, err := kubeClient.CoreV1().Nodes().Get(t.Context(), moved, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Labels[leafLabel] = "s0-l0"
	node.Labels[cliqueLabel] = "s0-l0-c1"
	if _, err := kubeClient.CoreV1().Nodes().Update(t.Context(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("relabelling %s: %v", moved, err)
	}
	f.leafOf[moved] = "s0-l0"
	env.createPodGroup(gangtest.MakePodGroup("job", env.ns).MinMember(5).
		Annotation(scheduling.AnnotationTopologyRequired, leafLabel).Obj())
	// 5 x 4 GPUs fit one leaf only by the new labels: the old leaves have
	// 14 and 16 GPUs free, the new s0-l0 22.
	pods := env.gangPods("job", 5, 4)
	env.createPods(pods...)
	nodes := env.waitForBound(retryBindTimeout, pods...)
	if n := spans(nodes, f.leafOf); n != 1 {
		t.Errorf("the gang spans %d leaves by the new labels: %v", n, nodes)
	}
	ledger.expectNoHalfBound()
}
