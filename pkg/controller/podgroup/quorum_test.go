package podgroup

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	st "k8s.io/kubernetes/pkg/scheduler/testing"

	upstream "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// The tests in this file pin what the controller says where it once counted
// members its own way; each failed before counts and quorum came from
// gang.Census and gang.QuorumOf, membership from gang.Of, and minMember from
// a validated gang.Spec.

// conditionOf returns the condition of a type, failing the test if absent.
func conditionOf(t *testing.T, conds []metav1.Condition, condType string) *metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(conds, condType)
	require.NotNil(t, c, "no %s condition in %+v", condType, conds)
	return c
}

// A failed member held a node but holds none now: a running gang that lost
// one to a failure, with its replacement waiting, is not scheduled, and
// Scheduled agrees with BelowMinMember.
func TestFailedMemberIsNotBound(t *testing.T) {
	pg := extended(gangtest.MakePodGroup("train", testNS).MinMember(4).Phase(upstream.PodGroupRunning).Obj())
	pg.Status.Conditions = []metav1.Condition{{Type: ConditionScheduled, Status: metav1.ConditionTrue, Reason: ReasonQuorumScheduled,
		Message: "4/4 members bound to nodes", LastTransitionTime: metav1.NewTime(t0)}}
	ps := pods(concat(repeat(3, "w", running), []*st.PodWrapper{failed(member("f-0")), pending(member("f-0b"))})...)
	tc := newTestController(t, nil, append([]client.Object{pg}, objs(ps)...)...)

	tc.reconcile(t, "train")
	got := tc.get(t, "train")
	s := conditionOf(t, got.Status.Conditions, ConditionScheduled)
	require.Equal(t, metav1.ConditionFalse, s.Status, "Scheduled: %s", s.Message)
	require.Contains(t, s.Message, "3/4 members bound")
	require.Equal(t, upstream.PodGroupRunning, got.Status.Phase, "the gang runs on below minMember")
	require.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, ConditionBelowMinMember))
}

// A native gang whose members hold minCount nodes only by counting a failed
// one was never scheduled; the condition is terminal, so saying so wrongly
// would last.
func TestNativeFailedMemberIsNotBound(t *testing.T) {
	pg := gangtest.MakeNativePodGroup("train", testNS).MinCount(2).Obj()
	ps := pods(bound(nativeMember("w-0")), failed(nativeMember("w-1")))
	tc := newTestNativeController(t, append([]client.Object{pg}, objs(ps)...)...)

	tc.reconcile(t, "train")
	c := conditionOf(t, tc.get(t, "train").Status.Conditions, ConditionInitiallyScheduled)
	require.Equal(t, metav1.ConditionFalse, c.Status, "PodGroupInitiallyScheduled: %s", c.Message)
	require.Equal(t, ReasonWaitingForMembers, c.Reason)
}

// Failed members do not count as created: a gang with one waiting member and
// one that failed before the gang started waits for members, as the
// scheduler does.
func TestFailedMemberIsNotCreated(t *testing.T) {
	pg := extended(gangtest.MakePodGroup("train", testNS).MinMember(2).Obj())
	ps := pods(pending(member("w-0")), failed(member("w-1")))
	tc := newTestController(t, nil, append([]client.Object{pg}, objs(ps)...)...)

	tc.reconcile(t, "train")
	got := tc.get(t, "train")
	require.Equal(t, upstream.PodGroupPending, got.Status.Phase)
	c := conditionOf(t, got.Status.Conditions, ConditionMembersCreated)
	require.Equal(t, metav1.ConditionFalse, c.Status, "MembersCreated: %s", c.Message)
	require.Contains(t, c.Message, "1/2 present")
	require.Equal(t, int32(1), got.Status.Failed, "the failed pod is still counted by phase")
}

// Members of a finished run do not count for the next (gang.QuorumOf): a
// job restarted under the same PodGroup is Scheduling, not Running, until
// its new members run.
func TestRestartedRunIsNotRunningYet(t *testing.T) {
	pg := extended(gangtest.MakePodGroup("train", testNS).MinMember(2).Phase(upstream.PodGroupFinished).Obj())
	ps := pods(concat(repeat(2, "old", succeeded), repeat(2, "new", pending))...)
	tc := newTestController(t, nil, append([]client.Object{pg}, objs(ps)...)...)

	tc.reconcile(t, "train")
	got := tc.get(t, "train")
	require.Equal(t, upstream.PodGroupScheduling, got.Status.Phase)
	s := conditionOf(t, got.Status.Conditions, ConditionScheduled)
	require.Equal(t, metav1.ConditionFalse, s.Status, "Scheduled: %s", s.Message)
	evs := tc.drainEvents()
	require.Len(t, evs, 1)
	require.True(t, strings.HasPrefix(evs[0], "Normal GangScheduling phase Finished -> Scheduling"), evs[0])
}

// A minMember below 1 is not mended: Scheduled says what to fix, once, with
// a warning, and no quorum is judged.
func TestInvalidMinMemberIsReported(t *testing.T) {
	pg := extended(gangtest.MakePodGroup("train", testNS).MinMember(0).Generation(2).Obj())
	ps := pods(pending(member("w-0")))
	tc := newTestController(t, nil, append([]client.Object{pg}, objs(ps)...)...)

	tc.reconcile(t, "train")
	got := tc.get(t, "train")
	require.Equal(t, upstream.PodGroupPending, got.Status.Phase)
	require.EqualValues(t, 2, got.Status.ObservedGeneration)
	c := conditionOf(t, got.Status.Conditions, ConditionScheduled)
	require.Equal(t, metav1.ConditionFalse, c.Status)
	require.Equal(t, ReasonInvalidPodGroup, c.Reason)
	require.Contains(t, c.Message, "spec.minMember is 0: set it to")
	require.Nil(t, meta.FindStatusCondition(got.Status.Conditions, ConditionMembersCreated), "no quorum, no MembersCreated")
	require.Equal(t, []string{"Warning InvalidPodGroup " + c.Message}, tc.drainEvents())

	tc.reconcile(t, "train")
	require.Empty(t, tc.drainEvents(), "the warning is recorded once")
}

// The same for a native PodGroup (the API server refuses such a spec; a
// client that skips validation does not).
func TestNativeInvalidMinCountIsReported(t *testing.T) {
	pg := gangtest.MakeNativePodGroup("train", testNS).MinCount(0).Obj()
	tc := newTestNativeController(t, pg, &pods(pending(nativeMember("w-0")))[0])

	tc.reconcile(t, "train")
	c := conditionOf(t, tc.get(t, "train").Status.Conditions, ConditionInitiallyScheduled)
	require.Equal(t, ReasonInvalidPodGroup, c.Reason)
	require.Contains(t, c.Message, "spec.schedulingPolicy.gang.minCount is 0")
	require.Equal(t, []string{"Warning InvalidPodGroup " + c.Message}, tc.drainEvents())
}

// A change of membership is a change the status reads, whatever API the
// membership is of.
func TestMemberChangedSeesEveryAPI(t *testing.T) {
	plain := pending(member("w-0")).Obj()
	delete(plain.Labels, scheduling.PodGroupLabel)
	native := plain.DeepCopy()
	gangtest.InNativeGroup(native, "train")
	labelled := pending(member("w-0")).Obj()
	for _, tt := range []struct {
		name     string
		old, cur *v1.Pod
		want     bool
	}{
		{name: "joins a native PodGroup", old: plain, cur: native, want: true},
		{name: "joins a scheduler-plugins PodGroup", old: plain, cur: labelled, want: true},
		{name: "nothing the status reads", old: plain, cur: plain.DeepCopy(), want: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, memberChanged.Update(event.UpdateEvent{ObjectOld: tt.old, ObjectNew: tt.cur}))
		})
	}
}
