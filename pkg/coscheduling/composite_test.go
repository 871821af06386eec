package coscheduling

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// withComposites has the gang sources watch native PodGroups and
// CompositePodGroups, as where the API server serves both, starting with
// objs.
func withComposites(cpgs []*schedulingv1alpha3.CompositePodGroup, pgs ...*schedulingv1beta1.PodGroup) envOption {
	return func(c *envConfig) {
		for _, o := range cpgs {
			c.objects = append(c.objects, o)
		}
		for _, pg := range pgs {
			c.objects = append(c.objects, pg)
		}
		c.watchNative, c.watchComposites = true, true
	}
}

// child is a native PodGroup of minCount n under the composite parent.
func child(name, parent string, n int32) *gangtest.NativePodGroupWrapper {
	return gangtest.MakeNativePodGroup(name, testNS).MinCount(n).Parent(parent).Workload("train", name)
}

// composite is a gang CompositePodGroup needing minGroupCount children.
func composite(name string, minGroupCount int32) *gangtest.CompositePodGroupWrapper {
	return gangtest.MakeCompositePodGroup(name, testNS).MinGroupCount(minGroupCount).Workload("train", name)
}

// scheduleAll runs one scheduling cycle per pod, in order, and returns the
// status each ended with; a member told to wait waits on the returned
// channel, as in the binding cycle.
func scheduleAll(t *testing.T, env *testEnv, pods []*v1.Pod) ([]*fwk.Status, []<-chan *fwk.Status, []string) {
	t.Helper()
	statuses := make([]*fwk.Status, len(pods))
	waits := make([]<-chan *fwk.Status, len(pods))
	nodes := make([]string, len(pods))
	for i, p := range pods {
		nodes[i], statuses[i] = env.schedule(p)
		if statuses[i].IsWait() {
			waits[i] = env.waitAsync(p, nodes[i])
		}
	}
	return statuses, waits, nodes
}

func outcome(t *testing.T, ch <-chan *fwk.Status) *fwk.Status {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("a waiting member never heard back")
		return nil
	}
}

// A gang composite is one unit: its members wait in PreEnqueue until
// minGroupCount children each have their own quorum, and in Permit until
// every child of the plan is placed; the last member lets all go.
func TestCompositeStartsWhole(t *testing.T) {
	a, b := nativeMembers("a", 2, "8"), nativeMembers("b", 2, "8")
	env := newTestEnv(t, gpuNodes(4), append(a, b[0]), nil, withComposites(
		[]*schedulingv1alpha3.CompositePodGroup{composite("job", 2).Obj()},
		child("a", "job", 2).Obj(), child("b", "job", 2).Obj()))

	status := env.preEnqueue(a[0])
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "child a is whole, b is not: %v", status)
	require.Contains(t, status.Message(), "1 of minGroupCount 2")

	env.create(b[1])
	all := append(a, b...)
	for _, p := range all {
		require.True(t, env.preEnqueue(p).IsSuccess(), p.Name)
	}
	statuses, waits, _ := scheduleAll(t, env, all)
	for i := range 3 {
		require.True(t, statuses[i].IsWait(), "%s waits for the whole tree: %v", all[i].Name, statuses[i])
	}
	require.True(t, statuses[3].IsSuccess(), "the last member completes the tree: %v", statuses[3])
	for i := range 3 {
		require.True(t, outcome(t, waits[i]).IsSuccess(), all[i].Name)
	}
	require.True(t, hasEvent(env.recorded(), ReasonGangScheduled, "child groups placed whole"))
}

// A composite whose minGroupCount is smaller than its number of children
// starts once that many children are whole; a child that has not gathered
// does not hold the others back, and waits itself until it has.
func TestCompositeMinGroupCountBelowChildren(t *testing.T) {
	a, b := nativeMembers("a", 2, "8"), nativeMembers("b", 2, "8")
	env := newTestEnv(t, gpuNodes(4), append(a, b[0]), nil, withComposites(
		[]*schedulingv1alpha3.CompositePodGroup{composite("job", 1).Obj()},
		child("a", "job", 2).Obj(), child("b", "job", 2).Obj()))

	require.True(t, env.preEnqueue(a[0]).IsSuccess())
	bound := env.runGang(a)
	require.Len(t, bound, 2)
	require.True(t, hasEvent(env.recorded(), ReasonGangScheduled, "child groups placed whole, at least minGroupCount 1"))

	status := preFilterStatus(env, b[0])
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "b has 1 of its 2 members: %v", status)
	require.Contains(t, status.Message(), "waiting for members of PodGroup")

	env.create(b[1])
	statuses, waits, _ := scheduleAll(t, env, b)
	require.True(t, statuses[0].IsWait(), "b-0 waits for its sibling: %v", statuses[0])
	require.True(t, statuses[1].IsSuccess(), "b joins the running composite whole: %v", statuses[1])
	require.True(t, outcome(t, waits[0]).IsSuccess())

	// A running composite that loses a member says what it has left, in
	// child groups.
	env.delete(bound[0])
	require.Eventually(t, func() bool {
		return hasEvent(env.recorded(), ReasonMemberLost, "1 of minGroupCount 1 child groups still have their quorum placed")
	}, wait.ForeverTestTimeout, 10*time.Millisecond)
}

// waitingTree is composite job of children a and b, 2 members each, whose
// first three members wait in Permit for the fourth.
func waitingTree(t *testing.T) (*testEnv, []*v1.Pod, []<-chan *fwk.Status) {
	all := append(nativeMembers("a", 2, "8"), nativeMembers("b", 2, "8")...)
	env := newTestEnv(t, gpuNodes(4), all, nil, withComposites(
		[]*schedulingv1alpha3.CompositePodGroup{composite("job", 2).Obj()},
		child("a", "job", 2).Obj(), child("b", "job", 2).Obj()))
	statuses, waits, _ := scheduleAll(t, env, all[:3])
	for i, s := range statuses {
		require.True(t, s.IsWait(), "%s: %v", all[i].Name, s)
	}
	return env, all, waits
}

// A failure anywhere in the tree rejects every waiting member of every
// child: a member of b deleted while it waits gives a's reservations back.
func TestCompositeRejectedWhole(t *testing.T) {
	env, all, waits := waitingTree(t)
	env.delete(all[2])
	for i := range 2 {
		s := outcome(t, waits[i])
		require.False(t, s.IsSuccess(), "%s of child a is rejected with the tree", all[i].Name)
		require.Contains(t, s.Message(), "job")
	}
	require.True(t, hasEvent(env.recorded(), ReasonMemberDeleted, "member b-0 was deleted"))
}

// A basic composite lets its children go independently, as kube-scheduler
// does: a whole child starts while its sibling still gathers.
func TestBasicCompositeChildrenIndependent(t *testing.T) {
	a, b := nativeMembers("a", 2, "8"), nativeMembers("b", 2, "8")
	env := newTestEnv(t, gpuNodes(4), append(a, b[0]), nil, withComposites(
		[]*schedulingv1alpha3.CompositePodGroup{gangtest.MakeCompositePodGroup("job", testNS).Basic().Obj()},
		child("a", "job", 2).Obj(), child("b", "job", 2).Obj()))

	require.True(t, env.preEnqueue(a[0]).IsSuccess())
	require.Len(t, env.runGang(a), 2)
	status := env.preEnqueue(b[0])
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "%v", status)
	require.Contains(t, status.Message(), "1/2 present", "b is a gang of its own")
}

// One plan for the whole tree: the composite's level holds for the whole,
// each child's for itself. Spine s0 has one busy node, so the four members
// only fit s1 as a whole, each child in a leaf of it.
func TestCompositeOnePlan(t *testing.T) {
	a, b := nativeMembers("a", 2, "8"), nativeMembers("b", 2, "8")
	all := append(a, b...)
	env := newTestEnv(t, fabric(), append([]*v1.Pod{busy("s0-l0-n0")}, all...), nil, withTopology(t), withComposites(
		[]*schedulingv1alpha3.CompositePodGroup{composite("job", 2).Topology(spineLabel).Obj()},
		child("a", "job", 2).Topology(leafLabel).Obj(), child("b", "job", 2).Topology(leafLabel).Obj()))
	got := plannedNodes(t, env, all)
	for i, n := range got {
		require.Equal(t, "s1", n[:2], "%s in spine s1: %v", all[i].Name, got)
	}
	require.Equal(t, got[0][:5], got[1][:5], "a in one leaf: %v", got)
	require.Equal(t, got[2][:5], got[3][:5], "b in one leaf: %v", got)
}

// Bad input holds the members back with an Event on the object to fix.
func TestCompositeBadInput(t *testing.T) {
	t.Run("a parent that does not exist", func(t *testing.T) {
		a := nativeMembers("a", 2, "8")
		env := newTestEnv(t, gpuNodes(2), a, nil, withComposites(nil, child("a", "missing", 2).Obj()))
		status := env.preEnqueue(a[0])
		require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "%v", status)
		require.True(t, hasEvent(env.recorded(), ReasonPodGroupNotFound, "/missing as its parent, which does not exist: create it"))
	})
	t.Run("a cycle of parents", func(t *testing.T) {
		a := nativeMembers("a", 2, "8")
		env := newTestEnv(t, gpuNodes(2), a, nil, withComposites([]*schedulingv1alpha3.CompositePodGroup{
			composite("x", 1).Parent("y").Obj(), composite("y", 1).Parent("x").Obj()}, child("a", "x", 2).Obj()))
		status := env.preEnqueue(a[0])
		require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "%v", status)
		require.True(t, hasEvent(env.recorded(), ReasonInvalidPodGroup, "form a cycle"))
	})
	t.Run("minGroupCount above the number of children", func(t *testing.T) {
		a := nativeMembers("a", 2, "8")
		env := newTestEnv(t, gpuNodes(2), a, nil, withComposites(
			[]*schedulingv1alpha3.CompositePodGroup{composite("job", 3).Obj()}, child("a", "job", 2).Obj()))
		status := env.preEnqueue(a[0])
		require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "%v", status)
		require.True(t, hasEvent(env.recorded(), ReasonInvalidPodGroup, "minGroupCount 3: create the missing children"))
	})
}

// runningChild is a child PodGroup's members bound to nodes, one 8-GPU
// member per node, at priority 0.
func runningChild(group string, nodes ...string) []*v1.Pod {
	pods := make([]*v1.Pod, len(nodes))
	for i, n := range nodes {
		p := nativeMember(group, fmt.Sprintf("%s-%d", group, i), "8")
		p.Spec.NodeName = n
		p.Spec.Priority = ptr.To[int32](0)
		p.Status.Phase = v1.PodRunning
		p.Status.StartTime = ptr.To(metav1.NewTime(t0))
		pods[i] = p
	}
	return pods
}

// A running composite is a victim as its disruptionMode and minGroupCount
// say: whole when no child is above minGroupCount or its mode is all;
// otherwise its children above minGroupCount may go, each whole, and the
// rest stays.
func TestCompositeVictim(t *testing.T) {
	for _, tc := range []struct {
		name          string
		minGroupCount int32
		all           bool
		units         []string // name:pods
		evicted       int
	}{
		{"no child above minGroupCount: whole", 2, false, []string{"job:4"}, 4},
		{"disruptionMode all: whole", 1, true, []string{"job:4"}, 4},
		{"a child above minGroupCount goes alone", 1, false, []string{"b:2", "job:2"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := gpuNodes(4)
			running := append(runningChild("a", nodes[0].Name, nodes[1].Name), runningChild("b", nodes[2].Name, nodes[3].Name)...)
			plain := st.MakePod().Namespace("other").Name("urgent").UID("other/urgent").SchedulerName(testScheduler).
				Priority(100).Req(map[v1.ResourceName]string{gpu: "8"}).Obj()
			c := composite("job", tc.minGroupCount)
			if tc.all {
				c.DisruptAll()
			}
			env := newTestEnv(t, nodes, append(running, plain), nil, withTopology(t), withComposites(
				[]*schedulingv1alpha3.CompositePodGroup{c.Obj()},
				child("a", "job", 2).Created(t0).Obj(), child("b", "job", 2).Created(t0.Add(time.Minute)).Obj()))
			rec := env.record()
			env.syncWatch()

			_, status := env.attempt(plain)
			require.True(t, status.IsSuccess(), "%v", status)
			var units []string
			for _, u := range rec.last().Units {
				name := u.Name[len(testNS)+1:]
				units = append(units, fmt.Sprintf("%s:%d", name[:strings.IndexByte(name, ' ')], len(u.Pods)))
			}
			require.Equal(t, tc.units, units)
			require.Len(t, env.deleted(), tc.evicted)
		})
	}
}

// A child PodGroup deleted while the tree waits in Permit ends the tree's
// attempt: its sibling's members give back their nodes.
func TestCompositeChildDeleted(t *testing.T) {
	env, all, waits := waitingTree(t)
	env.SyncNativeWatch()
	require.NoError(t, env.client.SchedulingV1beta1().PodGroups(testNS).Delete(env.ctx, "b", metav1.DeleteOptions{}))
	for i := range 2 {
		s := outcome(t, waits[i])
		require.False(t, s.IsSuccess(), "%s of child a is rejected with the tree", all[i].Name)
		require.Contains(t, s.Message(), "under it was deleted")
	}
}

// A composite preemptor frees room for its whole plan: one request with
// every child's members, in one hierarchy, and the room held for the tree.
func TestCompositePreemptor(t *testing.T) {
	nodes := gpuNodes(4)
	running := runningGang("low", 0, t0, nodes[0].Name, nodes[1].Name, nodes[2].Name, nodes[3].Name)
	a, b := nativeMembers("a", 2, "8"), nativeMembers("b", 2, "8")
	all := append(a, b...)
	for _, p := range all {
		p.Spec.Priority = ptr.To[int32](100)
	}
	env := newTestEnv(t, nodes, append(running, all...), []*v1alpha1.PodGroup{gangtest.MakePodGroup("low", testNS).MinMember(4).Obj()},
		withTopology(t), withComposites([]*schedulingv1alpha3.CompositePodGroup{composite("job", 2).Obj()},
			child("a", "job", 2).Obj(), child("b", "job", 2).Obj()))
	rec := env.record()
	env.syncWatch()

	_, status := env.attempt(a[0])
	require.True(t, status.IsSuccess(), "%v", status)
	req := rec.last()
	require.Contains(t, req.Gang, "job (CompositePodGroup")
	require.Len(t, req.Members, 4, "the whole tree")
	require.NotNil(t, req.Hierarchy)
	require.Len(t, req.Hierarchy.Children, 2, "one subgroup per child")
	require.Len(t, env.deleted(), 4, "the low gang goes whole")
}

// A composite whose children all gather at once, with minGroupCount below
// their number: the children Admit chose start whole, and a member of a
// child left out of the plan waits without replanning or failing the
// attempt in flight; it joins once the composite runs.
func TestCompositeChildOutsideThePlanWaits(t *testing.T) {
	a, b := nativeMembers("a", 2, "8"), nativeMembers("b", 2, "8")
	env := newTestEnv(t, gpuNodes(4), append(slices.Clone(a), b...), nil, withComposites(
		[]*schedulingv1alpha3.CompositePodGroup{composite("job", 1).Obj()},
		child("a", "job", 2).Obj(), child("b", "job", 2).Obj()))

	statuses, waits, _ := scheduleAll(t, env, []*v1.Pod{a[0], b[0], a[1]})
	require.True(t, statuses[0].IsWait(), "a-0 waits for its sibling: %v", statuses[0])
	require.Equal(t, fwk.Unschedulable, statuses[1].Code(), "b-0 is outside the plan: %v", statuses[1])
	require.Contains(t, statuses[1].Message(), "joins once the composite runs")
	require.True(t, statuses[2].IsSuccess(), "a-1 completes the plan's child: %v", statuses[2])
	require.True(t, outcome(t, waits[0]).IsSuccess(), "a starts whole")

	statuses, waits, _ = scheduleAll(t, env, b)
	require.True(t, statuses[0].IsWait(), "b-0 joins the running composite and waits for its sibling: %v", statuses[0])
	require.True(t, statuses[1].IsSuccess(), "b joins whole: %v", statuses[1])
	require.True(t, outcome(t, waits[0]).IsSuccess())
}
