package podgroup

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// nativeMember starts a pod of the native PodGroup "train" for gpu-gang,
// created at t0.
func nativeMember(name string) *st.PodWrapper {
	w := st.MakePod().Namespace(testNS).Name(name).SchedulerName(DefaultSchedulerName).CreationTimestamp(metav1.NewTime(t0))
	gangtest.InNativeGroup(&w.Pod, "train")
	return w
}

func nativeRepeat(n int, prefix string, set func(*st.PodWrapper) *st.PodWrapper) []*st.PodWrapper {
	out := make([]*st.PodWrapper, n)
	for i := range out {
		out[i] = set(nativeMember(prefix + "-" + string(rune('0'+i))))
	}
	return out
}

func unschedulableMember(p *st.PodWrapper) *st.PodWrapper {
	p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{
		Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable,
		Message: "waiting for gang ns/train: 1/3 members placed",
	})
	return p.Phase(v1.PodPending)
}

// nativeConditionsAt computes pg's conditions from pods at now.
func nativeConditionsAt(pg *schedulingv1beta1.PodGroup, ps []v1.Pod, lost []lostMember, now time.Time) ([]metav1.Condition, time.Duration) {
	return computeNativeConditions(pg, observe(gang.FromNativePodGroup(pg), ps, lost, now, grace))
}

func TestComputeNativeConditions(t *testing.T) {
	pg := func(min int32) *gangtest.NativePodGroupWrapper {
		return gangtest.MakeNativePodGroup("train", testNS).MinCount(min).Generation(2)
	}
	scheduled := metav1.Condition{Type: ConditionInitiallyScheduled, Status: metav1.ConditionTrue, Reason: ReasonScheduled,
		Message: "3/3 members bound to nodes", LastTransitionTime: metav1.NewTime(t0)}
	tests := []struct {
		name    string
		pg      *gangtest.NativePodGroupWrapper
		pods    []*st.PodWrapper
		now     time.Time
		conds   map[string]cond
		notes   map[string]string
		recheck time.Duration
	}{
		{
			name: "fewer members than minCount",
			pg:   pg(3), pods: nativeRepeat(2, "w", pending), now: t0.Add(time.Minute),
			conds: map[string]cond{
				ConditionInitiallyScheduled: {metav1.ConditionFalse, ReasonWaitingForMembers},
				ConditionMembersCreated:     {metav1.ConditionFalse, ReasonWaitingForMembers},
			},
			notes:   map[string]string{ConditionMembersCreated: "2/3 present"},
			recheck: grace - time.Minute,
		},
		{
			name: "a member the scheduler could not place: reason Unschedulable, with its message",
			pg:   pg(3), pods: concat(nativeRepeat(2, "w", bound), []*st.PodWrapper{unschedulableMember(nativeMember("w-2"))}), now: t0,
			conds: map[string]cond{
				ConditionInitiallyScheduled: {metav1.ConditionFalse, schedulingv1beta1.PodGroupReasonUnschedulable},
				ConditionMembersCreated:     {metav1.ConditionTrue, ReasonEnoughMembers},
			},
			notes: map[string]string{ConditionInitiallyScheduled: "pod w-2: waiting for gang ns/train"},
		},
		{
			name: "minCount members bound",
			pg:   pg(3), pods: nativeRepeat(3, "w", running), now: t0,
			conds: map[string]cond{
				ConditionInitiallyScheduled: {metav1.ConditionTrue, ReasonScheduled},
				ConditionBelowMinMember:     {metav1.ConditionFalse, ReasonAtLeastMinMember},
			},
		},
		{
			name: "a gang that ran and lost a member stays initially scheduled, below minCount",
			pg:   pg(3).Condition(scheduled), pods: nativeRepeat(2, "w", running), now: t0.Add(time.Hour),
			conds: map[string]cond{
				ConditionInitiallyScheduled: {metav1.ConditionTrue, ReasonScheduled},
				ConditionMembersCreated:     {metav1.ConditionTrue, ReasonEnoughMembers},
				ConditionBelowMinMember:     {metav1.ConditionTrue, ReasonMembersLost},
			},
			notes: map[string]string{ConditionBelowMinMember: "2 of minMember 3 placed"},
		},
		{
			name: "members missing past the grace period name the Workload they come from",
			pg:   pg(3).Workload("train", "workers"), pods: nativeRepeat(2, "w", pending), now: t0.Add(grace),
			conds: map[string]cond{ConditionMembersCreated: {metav1.ConditionFalse, ReasonMembersMissing}},
			notes: map[string]string{ConditionMembersCreated: "Workload train (template workers)"},
		},
		{
			name: "conditions of other types are kept",
			pg: pg(1).Condition(metav1.Condition{Type: schedulingv1beta1.DisruptionTarget, Status: metav1.ConditionFalse, Reason: "None",
				LastTransitionTime: metav1.NewTime(t0)}),
			pods: nativeRepeat(1, "w", running), now: t0,
			conds: map[string]cond{
				schedulingv1beta1.DisruptionTarget: {metav1.ConditionFalse, "None"},
				ConditionInitiallyScheduled:        {metav1.ConditionTrue, ReasonScheduled},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pg := tt.pg.Obj()
			before := pg.DeepCopy()
			conds, recheck := nativeConditionsAt(pg, pods(tt.pods...), nil, tt.now)
			require.Equal(t, before, pg, "the PodGroup itself is not changed")
			for typ, want := range tt.conds {
				c := meta.FindStatusCondition(conds, typ)
				require.NotNil(t, c, "condition %s is missing: %+v", typ, conds)
				require.Equal(t, want, cond{c.Status, c.Reason}, "condition %s: %s", typ, c.Message)
				if typ != schedulingv1beta1.DisruptionTarget {
					require.EqualValues(t, 2, c.ObservedGeneration, "condition %s", typ)
				}
			}
			for typ, note := range tt.notes {
				require.Contains(t, meta.FindStatusCondition(conds, typ).Message, note)
			}
			require.Equal(t, tt.recheck, recheck)
		})
	}
}

// A native gang's conditions follow its members, read through the index:
// a scheduler-plugins gang of the same name does not count, and a gang that
// drops below minCount gets an Event, once.
func TestNativeReconcileFollowsMembers(t *testing.T) {
	pg := gangtest.MakeNativePodGroup("train", testNS).MinCount(2).Generation(1).Obj()
	members := pods(running(nativeMember("w-0")), running(nativeMember("w-1")))
	labelled := pods(running(member("x-0")), running(member("x-1")), running(member("x-2")))
	tc := newTestNativeController(t, append(append([]client.Object{pg}, objs(members)...), objs(labelled)...)...)

	tc.reconcile(t, "train")
	got := tc.get(t, "train")
	require.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, ConditionInitiallyScheduled))
	require.Contains(t, meta.FindStatusCondition(got.Status.Conditions, ConditionInitiallyScheduled).Message, "2/2 members bound")
	require.Equal(t, 1, tc.patches)
	tc.reconcile(t, "train")
	require.Equal(t, 1, tc.patches, "nothing changed, nothing patched")

	require.NoError(t, tc.client.Delete(t.Context(), &members[1]))
	tc.r.lost.record(&members[1], gang.Native, false, t0)
	tc.reconcile(t, "train")
	got = tc.get(t, "train")
	require.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, ConditionInitiallyScheduled), "initially scheduled is terminal")
	below := meta.FindStatusCondition(got.Status.Conditions, ConditionBelowMinMember)
	require.Equal(t, metav1.ConditionTrue, below.Status)
	require.Contains(t, below.Message, "w-1 (deleted from node n)")
	evs := tc.drainEvents()
	require.Len(t, evs, 1)
	require.True(t, strings.HasPrefix(evs[0], "Warning BelowMinMember 1 of minMember 2 placed"), evs[0])
}

// The reconciler never touches a PodGroup's metadata: the API server's
// protection finalizer stays for kube-controller-manager to lift, while the
// status of a PodGroup being deleted is kept true.
func TestNativeReconcileLeavesTheFinalizer(t *testing.T) {
	pg := gangtest.MakeNativePodGroup("train", testNS).MinCount(1).Deleting(t0).Obj()
	tc := newTestNativeController(t, pg, &pods(running(nativeMember("w-0")))[0])
	tc.reconcile(t, "train")
	got := tc.get(t, "train")
	require.Equal(t, []string{"scheduling.k8s.io/podgroup-protection"}, got.Finalizers)
	require.NotNil(t, got.DeletionTimestamp)
	require.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, ConditionInitiallyScheduled))
}

// Native PodGroups whose members name another scheduler are that
// scheduler's to report on; a PodGroup that is gone needs nothing.
func TestNativeReconcileLeavesOtherSchedulers(t *testing.T) {
	pg := gangtest.MakeNativePodGroup("train", testNS).MinCount(1).Obj()
	theirs := nativeMember("w-0").SchedulerName("default-scheduler")
	tc := newTestNativeController(t, pg, &pods(running(theirs))[0])
	require.Equal(t, reconcile.Result{}, tc.reconcile(t, "train"))
	require.Equal(t, reconcile.Result{}, tc.reconcile(t, "gone"))
	require.Zero(t, tc.patches)
	require.Empty(t, tc.get(t, "train").Status.Conditions)

	tc.r.api = nativePodGroups{schedulerNames: []string{"default-scheduler"}}
	tc.reconcile(t, "train")
	require.Equal(t, 1, tc.patches, "a scheduler name the controller is told of is gpu-gang's")
}

// Each API's index holds only its own members: a pod that names a native
// PodGroup and carries a label belongs to the native one alone.
func TestIndexesKeepTheAPIsApart(t *testing.T) {
	both := nativeMember("both").Label(scheduling.PodGroupLabel, "other").Obj()
	labelled := member("labelled").Obj()
	plain := st.MakePod().Namespace(testNS).Name("plain").Obj()
	byPodGroup, byNative := indexMembers(gang.XK8s), indexMembers(gang.Native)
	require.Equal(t, []string{"train"}, byNative(both))
	require.Empty(t, byPodGroup(both))
	require.Equal(t, []string{"train"}, byPodGroup(labelled))
	require.Empty(t, byNative(labelled))
	require.Empty(t, byPodGroup(plain))
	require.Empty(t, byNative(plain))
}

// With native PodGroups the cache holds every pod; one outside every gang is
// kept as a stub, a member whole.
func TestSlimNonMember(t *testing.T) {
	plain := st.MakePod().Namespace(testNS).Name("plain").Node("n").Label("app", "web").Obj()
	plain.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	got, err := slimNonMember(plain)
	require.NoError(t, err)
	stub := got.(*v1.Pod)
	require.Equal(t, "plain", stub.Name)
	require.Equal(t, map[string]string{"app": "web"}, stub.Labels)
	require.Empty(t, stub.Spec.NodeName)
	require.Empty(t, stub.ManagedFields)

	native := running(nativeMember("w-0")).Obj()
	got, err = slimNonMember(native)
	require.NoError(t, err)
	require.Equal(t, "n", got.(*v1.Pod).Spec.NodeName)
}

// A pod belongs to one gang, as gang.Of says: one that names a native
// PodGroup and carries a label requeues the native PodGroup alone.
func TestMembersRequeueTheirOwnPodGroup(t *testing.T) {
	both := nativeMember("both").Label(scheduling.PodGroupLabel, "other").Obj()
	labelled := member("labelled").Obj()
	train := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: testNS, Name: "train"}}}
	require.Empty(t, requestsFor(gang.XK8s)(t.Context(), both))
	require.Equal(t, train, requestsFor(gang.Native)(t.Context(), both))
	require.Equal(t, train, requestsFor(gang.XK8s)(t.Context(), labelled))
	require.Empty(t, requestsFor(gang.Native)(t.Context(), labelled))
}
