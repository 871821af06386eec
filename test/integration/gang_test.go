package integration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/gpu-gang/gpu-gang/pkg/coscheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// The pods of a gang that fits bind together, one per 8-GPU node.
func TestGangBindsTogether(t *testing.T) {
	env := newTestEnv(t)
	env.gpuNodes(4, 8)
	watch := env.watchGangs(map[string]int{"train": 4})

	env.createPodGroup(gangtest.MakePodGroup("train", env.ns).MinMember(4).Obj())
	pods := env.gangPods("train", 4, 8)
	env.createPods(pods...)

	nodes := env.waitForBound(bindTimeout, pods...)
	if used := sets.New(mapValues(nodes)...); used.Len() != 4 {
		t.Errorf("members share nodes: %v", nodes)
	}
	env.waitForEvent("PodGroup", "train", coscheduling.ReasonGangScheduled)
	watch.expectNeverPartial()
}

// A gang that does not fit in the free capacity binds no member, and binds
// all of them once room frees up.
func TestGangWaitsForRoomThenBindsAll(t *testing.T) {
	env := newTestEnv(t)
	env.gpuNodes(5, 8)
	// A pod outside any gang takes one node's GPUs, so 4 of the 5 nodes
	// are free: room for 4 members of a 5-member gang.
	blocker := env.pod("blocker").Res(gpuRequest(8)).Obj()
	env.createPods(blocker)
	env.waitForBound(bindTimeout, blocker)

	watch := env.watchGangs(map[string]int{"train": 5})
	env.createPodGroup(gangtest.MakePodGroup("train", env.ns).MinMember(5).Obj())
	pods := env.gangPods("train", 5, 8)
	env.createPods(pods...)

	env.expectStaysUnbound(staysUnboundWindow, pods...)

	env.deletePods(blocker)
	env.waitForBound(bindTimeout, pods...)
	watch.expectNeverPartial()
}

// Six gangs that each need 60% of the cluster, submitted together, bind one
// after another as the test deletes each bound gang; no gang is ever
// part-bound.
func TestContendingGangsBindOneAtATime(t *testing.T) {
	const (
		gangs   = 6
		members = 3 // 3 members × 8 GPUs = 24 of the cluster's 40 GPUs
	)
	env := newTestEnv(t)
	env.gpuNodes(5, 8)
	var names []string
	minMembers := map[string]int{}
	for i := range gangs {
		name := fmt.Sprintf("job%d", i)
		names = append(names, name)
		minMembers[name] = members
	}
	watch := env.watchGangs(minMembers)

	pending := map[string][]*v1.Pod{}
	for _, name := range names {
		env.createPodGroup(gangtest.MakePodGroup(name, env.ns).MinMember(members).Obj())
	}
	for _, name := range names {
		pending[name] = env.gangPods(name, members, 8)
		env.createPods(pending[name]...)
	}

	// Each round, exactly one gang can be bound; delete it to make room.
	// A round gets bindTimeout: freed room should start the next gang
	// promptly, not after some gang's schedule timeout runs out.
	var order []string
	for len(pending) > 0 {
		var done string
		err := waitFor(t.Context(), bindTimeout, func(ctx context.Context) (bool, error) {
			for _, name := range sortedKeys(pending) {
				nodes, err := env.boundNodes(ctx, podNames(pending[name]))
				if err != nil {
					return false, err
				}
				if countBound(nodes) == members {
					done = name
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("waiting %s for one of gangs %v to bind (bound so far, in order: %v): %v", bindTimeout, sortedKeys(pending), order, err)
		}
		order = append(order, done)
		env.deletePods(pending[done]...)
		delete(pending, done)
	}
	t.Logf("gangs bound in order %v", order)
	watch.expectNeverPartial()
}

// A gang whose last member cannot be scheduled in time gives back its
// reservations when its schedule timeout passes, with an Event on the
// PodGroup, and binds when it retries after the member can be scheduled.
//
// The member is held back before its scheduling cycle by the test's
// HoldForTest plugin: it counts as a member (so the gang is planned, and
// the others reserve and wait in Permit) but gets no scheduling cycle until
// it is released. A capacity or port conflict would not do: the gang's plan
// checks both before any member reserves, and a member that fails Filter
// ends the attempt at once, which is a rejection, not a timeout.
func TestGangTimesOutThenRetries(t *testing.T) {
	withHoldPlugin(t)
	env := newTestEnv(t)
	env.gpuNodes(3, 8)
	watch := env.watchGangs(map[string]int{"train": 3})

	env.createPodGroup(gangtest.MakePodGroup("train", env.ns).MinMember(3).ScheduleTimeoutSeconds(2).Obj())
	pods := env.gangPods("train", 3, 8)
	held := pods[2]
	held.Labels[holdLabel] = "true"
	env.createPods(pods...)

	env.waitForEvent("PodGroup", "train", coscheduling.ReasonGangTimedOut)
	env.expectStaysUnbound(staysUnboundWindow, pods...)

	env.release(held.Name)
	env.waitForBound(retryBindTimeout, pods...)
	watch.expectNeverPartial()
}

// A member held by a scheduling gate (a queueing system such as Kueue holds
// it) is not planned: its siblings reserve nothing and hold no node while it
// is gated, and the gang binds once the gate is lifted.
func TestGatedMemberIsNotPlanned(t *testing.T) {
	const gate = "integration.gpu-gang.x-k8s.io/queue"
	env := newTestEnv(t)
	env.gpuNodes(3, 8)
	watch := env.watchGangs(map[string]int{"train": 3})
	env.createPodGroup(gangtest.MakePodGroup("train", env.ns).MinMember(3).Obj())
	pods := env.gangPods("train", 3, 8)
	held := pods[2]
	held.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: gate}}
	env.createPods(pods...)

	err := staysTrue(t.Context(), staysUnboundWindow, func(context.Context) error {
		if n := gauge(t, "gpu_gang_members_waiting_in_permit"); n != 0 {
			return fmt.Errorf("%v members wait in Permit for a gated sibling", n)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("within %s: %v", staysUnboundWindow, err)
	}
	env.expectStaysUnbound(time.Second, pods...)

	patch := []byte(`{"spec":{"schedulingGates":null}}`)
	if _, err := kubeClient.CoreV1().Pods(env.ns).Patch(t.Context(), held.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("removing the scheduling gate of %s: %v", held.Name, err)
	}
	env.waitForBound(retryBindTimeout, pods...)
	watch.expectNeverPartial()
}

// Members whose PodGroup does not exist wait, with an Event on each pod, and
// bind once the PodGroup is created.
func TestPodGroupCreatedLate(t *testing.T) {
	env := newTestEnv(t)
	env.gpuNodes(2, 8)
	watch := env.watchGangs(map[string]int{"late": 2})

	pods := env.gangPods("late", 2, 8)
	env.createPods(pods...)
	env.waitForEvent("Pod", pods[0].Name, coscheduling.ReasonPodGroupNotFound)
	env.expectStaysUnbound(staysUnboundWindow, pods...)

	env.createPodGroup(gangtest.MakePodGroup("late", env.ns).MinMember(2).Obj())
	env.waitForBound(bindTimeout, pods...)
	watch.expectNeverPartial()
}

// An MPI-shaped gang, a CPU-only launcher and three GPU workers with
// scheduleTimeoutSeconds 0 as MPI Operator writes it, binds whole: 0 means
// "use the default wait", not "do not wait".
func TestMPIGangWithZeroTimeout(t *testing.T) {
	const replicaType = "training.kubeflow.org/replica-type"
	env := newTestEnv(t)
	env.gpuNodes(3, 8)
	env.createNodes(gpuNode("cpu0", 0).Obj())
	watch := env.watchGangs(map[string]int{"mpi": 4})

	env.createPodGroup(gangtest.MakePodGroup("mpi", env.ns).MinMember(4).ScheduleTimeoutSeconds(0).Obj())
	launcher := env.gangPod("mpi-launcher", "mpi").Label(replicaType, "launcher").
		Res(map[v1.ResourceName]string{v1.ResourceCPU: "2", v1.ResourceMemory: "2Gi"}).Obj()
	pods := []*v1.Pod{launcher}
	for i := range 3 {
		pods = append(pods, env.gangPod(fmt.Sprintf("mpi-worker-%d", i), "mpi").Label(replicaType, "worker").
			Label("training.kubeflow.org/replica-index", fmt.Sprint(i)).Res(gpuRequest(8)).Obj())
	}
	env.createPods(pods...)

	nodes := env.waitForBound(bindTimeout, pods...)
	workerNodes := sets.New[string]()
	for _, p := range pods[1:] {
		workerNodes.Insert(nodes[p.Name])
	}
	if workerNodes.Len() != 3 || workerNodes.Has(env.nodeName("cpu0")) {
		t.Errorf("workers should be on the three GPU nodes, one each: %v", nodes)
	}
	watch.expectNeverPartial()
}

// An elastic gang (minMember 2 of 4 replicas) in room for 3 binds 3: quorum
// first, then extras, and the fourth stays pending.
func TestElasticGangBindsWhatFits(t *testing.T) {
	env := newTestEnv(t)
	env.gpuNodes(3, 8)
	watch := env.watchGangs(map[string]int{"elastic": 2})

	env.createPodGroup(gangtest.MakePodGroup("elastic", env.ns).MinMember(2).Obj())
	pods := env.gangPods("elastic", 4, 8)
	env.createPods(pods...)

	env.waitForBoundCount(bindTimeout, 3, pods...)
	err := staysTrue(t.Context(), staysUnboundWindow, func(ctx context.Context) error {
		nodes, err := env.boundNodes(ctx, podNames(pods))
		if err != nil {
			return err
		}
		if n := countBound(nodes); n != 3 {
			return fmt.Errorf("%d members bound, want 3: %v", n, nodes)
		}
		return nil
	})
	if err != nil {
		t.Errorf("within %s: %v", staysUnboundWindow, err)
	}
	watch.expectNeverPartial()
}

// A pod outside any gang that names gpu-gang's scheduler binds like under
// the default scheduler.
func TestPlainPodBinds(t *testing.T) {
	env := newTestEnv(t)
	env.gpuNodes(1, 8)
	pod := env.pod("plain").Res(gpuRequest(4)).Obj()
	env.createPods(pod)
	env.waitForBound(bindTimeout, pod)
}

// Pods for another scheduler are left alone, while gpu-gang binds its own
// pods next to them.
func TestOtherSchedulersPodsLeftAlone(t *testing.T) {
	env := newTestEnv(t)
	env.gpuNodes(1, 8)
	other := env.pod("other").SchedulerName("other").Res(gpuRequest(1)).Obj()
	otherMember := env.gangPod("other-member", "other-gang").SchedulerName("other").Res(gpuRequest(1)).Obj()
	env.createPods(other, otherMember)

	ours := env.pod("ours").Res(gpuRequest(1)).Obj()
	env.createPods(ours)
	env.waitForBound(bindTimeout, ours)
	env.expectStaysUnbound(staysUnboundWindow, other, otherMember)
}

// Gangs the scheduler can never start are held with an Event that says why.
func TestBadGangsAreExplained(t *testing.T) {
	tests := []struct {
		name    string
		nodes   int
		group   *gangtest.PodGroupWrapper
		members func(env *testEnv) []*v1.Pod
		reason  string
		// noteHas are substrings the Event's note must contain.
		noteHas []string
	}{
		{
			name:    "minMember 0",
			nodes:   1,
			group:   gangtest.MakePodGroup("bad", "").MinMember(0),
			members: func(env *testEnv) []*v1.Pod { return env.gangPods("bad", 1, 1) },
			reason:  coscheduling.ReasonInvalidPodGroup,
			noteHas: []string{"minMember"},
		},
		{
			name:    "larger than the cluster",
			nodes:   4,
			group:   gangtest.MakePodGroup("bad", "").MinMember(5),
			members: func(env *testEnv) []*v1.Pod { return env.gangPods("bad", 5, 8) },
			reason:  coscheduling.ReasonGangTooLarge,
			// The numbers: 4 nodes, 4 of 5 members fit when empty.
			noteHas: []string{"4 nodes", "4 of its 5"},
		},
		{
			name:  "mixed scheduler names",
			nodes: 2,
			group: gangtest.MakePodGroup("bad", "").MinMember(2),
			// The member for the other scheduler comes first: gpu-gang's
			// queue gets no events for pods it is not responsible for,
			// so it notices the mix when its own member arrives.
			members: func(env *testEnv) []*v1.Pod {
				pods := env.gangPods("bad", 2, 1)
				pods[0].Spec.SchedulerName = "other"
				return pods
			},
			reason:  coscheduling.ReasonMixedSchedulerNames,
			noteHas: []string{"other", schedulerName},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			env.gpuNodes(tc.nodes, 8)
			pg := tc.group.Obj().DeepCopy()
			pg.Namespace = env.ns
			env.createPodGroup(pg)
			pods := tc.members(env)
			env.createPods(pods...)

			event := env.waitForEvent("PodGroup", pg.Name, tc.reason)
			for _, s := range tc.noteHas {
				if !strings.Contains(event.Note, s) {
					t.Errorf("%s Event note %q does not contain %q", tc.reason, event.Note, s)
				}
			}
			env.expectStaysUnbound(staysUnboundWindow, pods...)
		})
	}
}

func countBound(nodes map[string]string) int {
	n := 0
	for _, node := range nodes {
		if node != "" {
			n++
		}
	}
	return n
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
