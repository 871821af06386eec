package coscheduling

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// withNativePodGroups has the gang sources watch native PodGroups, as where
// the scheduler schedules them, starting with pgs.
func withNativePodGroups(pgs ...*schedulingv1beta1.PodGroup) envOption {
	return func(c *envConfig) {
		for _, pg := range pgs {
			c.objects = append(c.objects, pg)
		}
		c.watchNative = true
	}
}

// withNativeIgnored leaves native PodGroups unwatched, as where the
// scheduler may not schedule them, for the reason note.
func withNativeIgnored(note string) envOption {
	return func(c *envConfig) { c.nativeNote = note }
}

// nativeMember is a member of a native PodGroup asking for gpus GPUs and one
// CPU; it carries no gang label.
func nativeMember(group, name, gpus string) *v1.Pod {
	req := map[v1.ResourceName]string{v1.ResourceCPU: "1"}
	if gpus != "" && gpus != "0" {
		req[gpu] = gpus
	}
	return gangtest.InNativeGroup(st.MakePod().Namespace(testNS).Name(name).UID(testNS+"/"+name).
		SchedulerName(testScheduler).Req(req).Obj(), group)
}

func nativeMembers(group string, n int, gpus string) []*v1.Pod {
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = nativeMember(group, fmt.Sprintf("%s-%d", group, i), gpus)
	}
	return pods
}

// A native gang is held until minCount members exist, and then reserves and
// binds as one, like a scheduler-plugins gang.
func TestNativeGangRunsAsOneGang(t *testing.T) {
	job := nativeMembers("job", 3, "8")
	env := newTestEnv(t, gpuNodes(3), job[:2], nil,
		withNativePodGroups(gangtest.MakeNativePodGroup("job", testNS).MinCount(3).Obj()))

	status := env.preEnqueue(job[0])
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "%v", status)
	require.Contains(t, status.Message(), "2/3 present")
	require.True(t, hasEvent(env.recorded(), ReasonWaitingForMembers, "waiting for members: 2/3 present"))

	env.create(job[2])
	require.Eventually(t, func() bool { return sets.New(env.activator.Get()...).Has(testNS + "/job-0") },
		wait.ForeverTestTimeout, 10*time.Millisecond, "the third member releases the held ones")
	for _, p := range job {
		require.True(t, env.preEnqueue(p).IsSuccess())
	}
	bound := env.runGang(job)
	nodes := sets.New[string]()
	for _, p := range bound {
		nodes.Insert(p.Spec.NodeName)
	}
	require.Equal(t, 3, nodes.Len(), "one 8-GPU member per node")
	require.True(t, hasEvent(env.recorded(), ReasonGangScheduled, "3/3 members reserved"))
}

// A native topology constraint is a required level: the gang starts inside
// one domain of it, waits with an Event while none has room, and a key that
// is no configured level is an invalid PodGroup.
func TestNativeTopologyConstraint(t *testing.T) {
	t.Run("the gang lands inside one leaf", func(t *testing.T) {
		pair := nativeMembers("pair", 2, "8")
		// One node of the first leaf is busy: the pair goes to a whole leaf.
		env := newTestEnv(t, fabric(), append([]*v1.Pod{busy("s0-l0-n0")}, pair...), nil, withTopology(t),
			withNativePodGroups(gangtest.MakeNativePodGroup("pair", testNS).MinCount(2).Topology(leafLabel).Obj()))
		got := plannedNodes(t, env, pair)
		require.Equal(t, got[0][:len("s0-l0")], got[1][:len("s0-l0")], "both members in one leaf: %v", got)
	})
	t.Run("no leaf has room: the gang waits with an Event", func(t *testing.T) {
		var existing []*v1.Pod
		for _, n := range []string{"s0-l0-n0", "s0-l1-n0", "s1-l0-n0", "s1-l1-n0"} {
			existing = append(existing, busy(n))
		}
		pair := nativeMembers("pair", 2, "8")
		env := newTestEnv(t, fabric(), append(existing, pair...), nil, withTopology(t),
			withNativePodGroups(gangtest.MakeNativePodGroup("pair", testNS).MinCount(2).Topology(leafLabel).Obj()))
		_, status, _ := env.fh.RunPreFilterPlugins(env.ctx, framework.NewCycleState(), pair[0])
		require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
		require.True(t, hasEvent(env.recorded(), ReasonTopologyUnsatisfied, "no single domain of level "+leafLabel))
	})
	t.Run("a key that is no configured level", func(t *testing.T) {
		pair := nativeMembers("pair", 2, "8")
		env := newTestEnv(t, fabric(), pair, nil, withTopology(t),
			withNativePodGroups(gangtest.MakeNativePodGroup("pair", testNS).MinCount(2).Topology("example.com/rack").Obj()))
		_, status, _ := env.fh.RunPreFilterPlugins(env.ctx, framework.NewCycleState(), pair[0])
		require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "%v", status)
		require.True(t, hasEvent(env.recorded(), ReasonInvalidPodGroup, `"example.com/rack"`))
	})
}

// A pod that names a native PodGroup and carries the label of a
// scheduler-plugins PodGroup belongs to the native one alone, with an Event
// that says so; the other gang does not count it. Two gangs of the same
// name in one namespace, one per API, never share members.
func TestPodInBothKindsOfGang(t *testing.T) {
	both := nativeMember("job", "both", "8")
	both.Labels = map[string]string{scheduling.PodGroupLabel: "job"}
	labelled := member("job", "labelled", "8")
	env := newTestEnv(t, gpuNodes(2), []*v1.Pod{both, labelled},
		[]*v1alpha1.PodGroup{gangtest.MakePodGroup("job", testNS).MinMember(2).Obj()},
		withNativePodGroups(gangtest.MakeNativePodGroup("job", testNS).MinCount(1).Obj()))

	key, _ := gang.Of(both)
	require.Equal(t, gang.Native, key.API)
	require.True(t, env.preEnqueue(both).IsSuccess(), "the native gang of one is complete")
	require.True(t, hasEvent(env.recorded(), ReasonTwoPodGroups, "it belongs to team-a/job (scheduling.k8s.io/v1beta1) alone, and team-a/job does not count it"))

	status := env.preEnqueue(labelled)
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "the labelled gang has 1 of its 2 members: %v", status)
	require.Contains(t, status.Message(), "1/2 present")

	xk8s, err := env.pl.members(gang.Key{Namespace: testNS, Name: "job"})
	require.NoError(t, err)
	native, err := env.pl.members(key)
	require.NoError(t, err)
	require.Equal(t, []string{"labelled"}, podNamesOf(xk8s))
	require.Equal(t, []string{"both"}, podNamesOf(native))
}

func podNamesOf(pods []*v1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

// Where gpu-gang ignores native PodGroups, a pod that names one is held with
// an Event that says why, and gangs of scheduler-plugins PodGroups schedule
// as before.
func TestNativePodGroupsIgnored(t *testing.T) {
	nativePod := nativeMember("job", "native", "8")
	labelled := member("other", "labelled", "8")
	env := newTestEnv(t, gpuNodes(1), []*v1.Pod{nativePod, labelled},
		[]*v1alpha1.PodGroup{gangtest.MakePodGroup("other", testNS).MinMember(1).Obj()},
		withNativeIgnored("the API server does not serve them"))

	status := env.preEnqueue(nativePod)
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "%v", status)
	require.True(t, hasEvent(env.recorded(), ReasonNativePodGroupsIgnored, "gpu-gang ignores native PodGroups: not watched: the API server does not serve them"))
	require.True(t, env.preEnqueue(labelled).IsSuccess())
	node, status := env.schedule(labelled)
	require.True(t, status.IsSuccess(), "%v", status)
	require.NotEmpty(t, node)
}

// A native PodGroup deleted while members wait in Permit fails the attempt
// at once: the waiting members give back their nodes instead of holding
// them until the timeout. Its members are then held, each with an Event
// saying the PodGroup does not exist, and schedule when it comes back.
func TestNativePodGroupDeletedMidFlight(t *testing.T) {
	job := nativeMembers("job", 2, "8")
	pg := gangtest.MakeNativePodGroup("job", testNS).MinCount(2).Obj()
	env := newTestEnv(t, gpuNodes(2), job, nil, withNativePodGroups(pg))

	node, status := env.schedule(job[0])
	require.Equal(t, fwk.Wait, status.Code(), "%v", status)
	waiting := env.waitAsync(job[0], node)
	env.SyncNativeWatch()
	require.NoError(t, env.client.SchedulingV1beta1().PodGroups(testNS).Delete(env.ctx, "job", metav1.DeleteOptions{}))
	select {
	case s := <-waiting:
		require.False(t, s.IsSuccess(), "the waiting member is rejected")
		require.Contains(t, s.Message(), "its PodGroup was deleted")
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("the waiting member still holds its node after its PodGroup was deleted")
	}
	env.forget(job[0])
	env.recorded()

	status = env.preEnqueue(job[1])
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "%v", status)
	require.True(t, hasEvent(env.recorded(), ReasonPodGroupNotFound,
		"PodGroup team-a/job (scheduling.k8s.io/v1beta1) does not exist: create it in namespace team-a, or recreate the pod without spec.schedulingGroup"))

	env.activator.Reset()
	recreated := pg.DeepCopy()
	recreated.ResourceVersion = ""
	created, err := env.client.SchedulingV1beta1().PodGroups(testNS).Create(env.ctx, recreated, metav1.CreateOptions{})
	require.NoError(t, err)
	// An activation left over from the deletion may land after the Reset
	// above, so wait for the plugin to see the new PodGroup itself.
	require.Eventually(t, func() bool {
		s, ok := env.pl.lookup(gang.Key{API: gang.Native, Namespace: testNS, Name: "job"})
		return ok && s.UID == created.UID
	}, wait.ForeverTestTimeout, 10*time.Millisecond, "the plugin sees the recreated PodGroup")
	require.Eventually(t, func() bool { return sets.New(env.activator.Get()...).HasAll(testNS+"/job-0", testNS+"/job-1") },
		wait.ForeverTestTimeout, 10*time.Millisecond, "a recreated PodGroup brings its members back")
	bound := env.runGang(job)
	require.Len(t, bound, 2)
}

// A native PodGroup being deleted (held by the API server's protection
// finalizer while pods name it) still defines its gang, and an Event on it
// says so.
func TestNativePodGroupBeingDeletedStillSchedules(t *testing.T) {
	job := nativeMembers("job", 2, "8")
	pg := gangtest.MakeNativePodGroup("job", testNS).MinCount(2).Obj()
	env := newTestEnv(t, gpuNodes(2), job, nil, withNativePodGroups(pg))

	deleting := pg.DeepCopy()
	now := metav1.NewTime(env.clock.Now())
	deleting.DeletionTimestamp = &now
	deleting.Finalizers = []string{"scheduling.k8s.io/podgroup-protection"}
	env.SyncNativeWatch()
	_, err := env.client.SchedulingV1beta1().PodGroups(testNS).Update(env.ctx, deleting, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		s, ok := env.pl.lookup(gang.Key{API: gang.Native, Namespace: testNS, Name: "job"})
		return ok && s.Deleting
	}, wait.ForeverTestTimeout, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		return hasEvent(env.recorded(), ReasonPodGroupDeleting, "while 2 of its members wait for a node")
	}, wait.ForeverTestTimeout, 10*time.Millisecond)
	require.True(t, env.preEnqueue(job[0]).IsSuccess())
	require.Len(t, env.runGang(job), 2)
}

// native makes pods members of the native PodGroup group instead of the
// scheduler-plugins one their label names.
func native(group string, pods []*v1.Pod) []*v1.Pod {
	for _, p := range pods {
		delete(p.Labels, scheduling.PodGroupLabel)
		gangtest.InNativeGroup(p, group)
	}
	return pods
}

// A running native gang with disruptionMode all offers no member above
// minCount to preemption: a plain pod of higher priority that needs one node
// evicts the whole gang, not one member.
func TestNativeDisruptionModeAllIsEvictedWhole(t *testing.T) {
	nodes := gpuNodes(4)
	running := native("elastic", runningGang("elastic", 0, t0, nodes[0].Name, nodes[1].Name, nodes[2].Name, nodes[3].Name))
	plain := st.MakePod().Namespace("other").Name("urgent").UID("other/urgent").SchedulerName(testScheduler).
		Priority(100).Req(map[v1.ResourceName]string{gpu: "8"}).Obj()
	env := newTestEnv(t, nodes, append(running, plain), nil, withTopology(t),
		withNativePodGroups(gangtest.MakeNativePodGroup("elastic", testNS).MinCount(3).DisruptAll().Obj()))
	rec := env.record()
	env.syncWatch()

	_, status := env.attempt(plain)
	require.True(t, status.IsSuccess(), "%v", status)
	req := rec.last()
	require.Len(t, req.Units, 1)
	require.Zero(t, req.Units[0].Surplus, "no member may go alone")
	require.Len(t, env.deleted(), 4, "the gang goes whole")
	require.True(t, hasEvent(env.recorded(), ReasonPreempted, "all 4 of its running pods evicted"))
}

// A native gang preempts with its PodGroup's priority and preemption
// policy: preemptionPolicy Never on the PodGroup keeps its members, whose
// own policy says otherwise, from evicting anything.
func TestNativePreemptionPolicyNever(t *testing.T) {
	nodes, running, pgs := fullFabric()
	job := native("urgent", urgent("urgent", 2, 100))
	env := newTestEnv(t, nodes, append(running, job...), pgs, withTopology(t),
		withNativePodGroups(gangtest.MakeNativePodGroup("urgent", testNS).MinCount(2).Priority("urgent", 100).
			PreemptionPolicy(schedulingv1beta1.PreemptNever).Created(t0.Add(time.Hour)).Obj()))
	env.syncWatch()
	res, status := env.attempt(job[0])
	require.Nil(t, res)
	require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
	require.Contains(t, status.Message(), "has preemptionPolicy Never")
	require.Empty(t, env.deleted())
}
