package podgroup

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// groupPods builds n members of native PodGroup group, named <group>-<i>,
// for gpu-gang, created at t0.
func groupPods(group string, n int, set func(*st.PodWrapper) *st.PodWrapper) []*st.PodWrapper {
	out := make([]*st.PodWrapper, n)
	for i := range out {
		w := st.MakePod().Namespace(testNS).Name(fmt.Sprintf("%s-%d", group, i)).SchedulerName(DefaultSchedulerName).CreationTimestamp(metav1.NewTime(t0))
		gangtest.InNativeGroup(&w.Pod, group)
		out[i] = set(w)
	}
	return out
}

// job is a composite of minGroupCount 2 over PodGroups a, b and c of
// minCount 2 each.
func job() []client.Object {
	return []client.Object{
		gangtest.MakeCompositePodGroup("job", testNS).MinGroupCount(2).Generation(3).Created(t0).Obj(),
		gangtest.MakeNativePodGroup("a", testNS).Parent("job").MinCount(2).Created(t0).Obj(),
		gangtest.MakeNativePodGroup("b", testNS).Parent("job").MinCount(2).Created(t0).Obj(),
		gangtest.MakeNativePodGroup("c", testNS).Parent("job").MinCount(2).Created(t0).Obj(),
	}
}

func newTestCompositeController(t *testing.T, objs ...client.Object) *testController[*schedulingv1alpha3.CompositePodGroup] {
	t.Helper()
	return newHarness(t, compositePodGroups{}, nil, objs...)
}

func TestCompositeConditions(t *testing.T) {
	initially := metav1.Condition{Type: ConditionCompositeInitiallyScheduled, Status: metav1.ConditionTrue, Reason: ReasonScheduled,
		Message: "2 of minGroupCount 2 child groups at quorum on nodes", LastTransitionTime: metav1.NewTime(t0)}
	unschedulableNow := func(p *st.PodWrapper) *st.PodWrapper { return unschedulableMember(p) }
	tests := []struct {
		name   string
		extra  []client.Object
		ran    bool
		pods   []*st.PodWrapper
		conds  map[string]cond
		notes  map[string]string
		events []string
	}{
		{
			name:  "too few children have their members",
			pods:  concat(groupPods("a", 2, pending), groupPods("b", 1, pending)),
			conds: map[string]cond{ConditionCompositeInitiallyScheduled: {metav1.ConditionFalse, ReasonWaitingForMembers}},
			notes: map[string]string{ConditionCompositeInitiallyScheduled: "1 of minGroupCount 2 child groups have their members; the scheduler places the composite once 2 do; " +
				"waiting for: PodGroup b (1/2 members exist), PodGroup c (0/2 members exist)"},
		},
		{
			name:  "gathered, a member the scheduler could not place",
			pods:  concat(groupPods("a", 2, pending), groupPods("b", 2, unschedulableNow)),
			conds: map[string]cond{ConditionCompositeInitiallyScheduled: {metav1.ConditionFalse, ReasonUnschedulable}},
			notes: map[string]string{ConditionCompositeInitiallyScheduled: "0 of minGroupCount 2 child groups at quorum on nodes; pod b-0: waiting for gang"},
		},
		{
			name:  "gathered, nothing said yet",
			pods:  concat(groupPods("a", 2, pending), groupPods("b", 2, pending)),
			conds: map[string]cond{ConditionCompositeInitiallyScheduled: {metav1.ConditionFalse, ReasonNotScheduled}},
		},
		{
			name: "minGroupCount children at quorum on nodes",
			pods: concat(groupPods("a", 2, running), groupPods("b", 2, bound), groupPods("c", 1, pending)),
			conds: map[string]cond{
				ConditionCompositeInitiallyScheduled: {metav1.ConditionTrue, ReasonScheduled},
				ConditionBelowMinMember:              {metav1.ConditionFalse, ReasonAtLeastMinMember},
			},
			notes: map[string]string{ConditionCompositeInitiallyScheduled: "2 of minGroupCount 2 child groups at quorum on nodes"},
		},
		{
			name: "a composite that ran and lost a child's quorum stays initially scheduled, below it",
			ran:  true,
			pods: concat(groupPods("a", 2, running), groupPods("b", 1, running), []*st.PodWrapper{pending(groupPods("b", 2, pending)[1])}),
			conds: map[string]cond{
				ConditionCompositeInitiallyScheduled: {metav1.ConditionTrue, ReasonScheduled},
				ConditionBelowMinMember:              {metav1.ConditionTrue, ReasonReplacementsPending},
			},
			notes: map[string]string{ConditionBelowMinMember: "1 of minGroupCount 2 child groups at quorum on nodes; 1 replacement(s) waiting for a node; " +
				"below quorum: PodGroup b (1 of minCount 2 placed), PodGroup c (0 of minCount 2 placed)"},
			events: []string{"Warning BelowMinMember 1 of minGroupCount 2 child groups at quorum on nodes"},
		},
		{
			name: "a child composite counts by its own children",
			extra: []client.Object{
				gangtest.MakeCompositePodGroup("stage", testNS).Parent("job").MinGroupCount(1).Created(t0).Obj(),
				gangtest.MakeNativePodGroup("s", testNS).Parent("stage").MinCount(1).Created(t0).Obj(),
			},
			pods: concat(groupPods("a", 2, running), groupPods("s", 1, running)),
			conds: map[string]cond{
				ConditionCompositeInitiallyScheduled: {metav1.ConditionTrue, ReasonScheduled},
				ConditionBelowMinMember:              {metav1.ConditionFalse, ReasonAtLeastMinMember},
			},
		},
		{
			name:   "an invalid child: the layout is invalid, with the fix",
			extra:  []client.Object{gangtest.MakeNativePodGroup("d", testNS).Parent("job").MinCount(0).Created(t0).Obj()},
			pods:   groupPods("a", 2, running),
			conds:  map[string]cond{ConditionCompositeInitiallyScheduled: {metav1.ConditionFalse, ReasonInvalid}},
			notes:  map[string]string{ConditionCompositeInitiallyScheduled: "ns/d (scheduling.k8s.io/v1beta1): spec.schedulingPolicy.gang.minCount is 0: set it"},
			events: []string{"Warning InvalidPodGroup invalid PodGroup hierarchy"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objects := append(job(), tt.extra...)
			if tt.ran {
				objects[0] = gangtest.MakeCompositePodGroup("job", testNS).MinGroupCount(2).Generation(3).Created(t0).Condition(initially).Obj()
			}
			tc := newTestCompositeController(t, append(objects, objs(pods(tt.pods...))...)...)
			tc.reconcile(t, "job")
			got := tc.get(t, "job").Status.Conditions
			for typ, want := range tt.conds {
				c := meta.FindStatusCondition(got, typ)
				require.NotNil(t, c, "condition %s is missing: %+v", typ, got)
				require.Equal(t, want, cond{c.Status, c.Reason}, "condition %s: %s", typ, c.Message)
				require.EqualValues(t, 3, c.ObservedGeneration, "condition %s", typ)
			}
			require.Len(t, got, len(tt.conds), "no other condition: %+v", got)
			for typ, note := range tt.notes {
				require.Contains(t, meta.FindStatusCondition(got, typ).Message, note)
			}
			evs := tc.drainEvents()
			require.Len(t, evs, len(tt.events), "%v", evs)
			for i, want := range tt.events {
				require.True(t, strings.HasPrefix(evs[i], want), "event %q, want prefix %q", evs[i], want)
			}
		})
	}
}

// A composite keeps what it said once it was scheduled, and other
// conditions; a parent that does not exist is said, and a composite whose
// members name another scheduler is left alone.
func TestCompositeReconcile(t *testing.T) {
	disrupted := metav1.Condition{Type: schedulingv1alpha3.DisruptionTarget, Status: metav1.ConditionFalse, Reason: "None", LastTransitionTime: metav1.NewTime(t0)}
	objects := job()
	objects[0] = gangtest.MakeCompositePodGroup("job", testNS).MinGroupCount(2).Condition(disrupted).Obj()
	tc := newTestCompositeController(t, append(objects, objs(pods(concat(groupPods("a", 2, running), groupPods("b", 2, running))...))...)...)
	tc.reconcile(t, "job")
	got := tc.get(t, "job").Status.Conditions
	require.True(t, meta.IsStatusConditionTrue(got, ConditionCompositeInitiallyScheduled))
	require.NotNil(t, meta.FindStatusCondition(got, schedulingv1alpha3.DisruptionTarget), "other conditions are kept")
	require.Equal(t, 1, tc.patches)
	tc.reconcile(t, "job")
	require.Equal(t, 1, tc.patches, "nothing changed, nothing patched")
	// A member of b goes: the composite stays initially scheduled, below
	// its quorum.
	require.NoError(t, tc.client.Delete(t.Context(), &pods(groupPods("b", 2, running)...)[1]))
	tc.reconcile(t, "job")
	got = tc.get(t, "job").Status.Conditions
	require.True(t, meta.IsStatusConditionTrue(got, ConditionCompositeInitiallyScheduled), "initially scheduled is terminal")
	below := meta.FindStatusCondition(got, ConditionBelowMinMember)
	require.Equal(t, cond{metav1.ConditionTrue, ReasonMembersLost}, cond{below.Status, below.Reason})
	require.Contains(t, below.Message, "below quorum: PodGroup b (1 of minCount 2 placed), PodGroup c (0 of minCount 2 placed)")
	require.Equal(t, []string{"Warning BelowMinMember " + below.Message}, tc.drainEvents())

	orphan := newTestCompositeController(t,
		gangtest.MakeCompositePodGroup("stage", testNS).Parent("ghost").Obj(),
		gangtest.MakeNativePodGroup("s", testNS).Parent("stage").Obj(),
		&pods(groupPods("s", 1, pending)...)[0])
	orphan.reconcile(t, "stage")
	c := meta.FindStatusCondition(orphan.get(t, "stage").Status.Conditions, ConditionCompositeInitiallyScheduled)
	require.NotNil(t, c)
	require.Equal(t, ReasonParentMissing, c.Reason)
	require.Contains(t, c.Message, "names CompositePodGroup ns/ghost as its parent, which does not exist: create it")

	theirs := newTestCompositeController(t, append(job(), objs(pods(groupPods("a", 2, func(p *st.PodWrapper) *st.PodWrapper {
		return running(p).SchedulerName("default-scheduler")
	})...))...)...)
	require.Equal(t, reconcile.Result{}, theirs.reconcile(t, "job"))
	require.Equal(t, reconcile.Result{}, theirs.reconcile(t, "gone"))
	require.Zero(t, theirs.patches)
}

// A change under a composite requeues every composite above it, and a
// member pod its PodGroup's composites; a hierarchy that cannot be walked
// requeues the nearest parent.
func TestCompositeAncestors(t *testing.T) {
	tc := newTestCompositeController(t,
		gangtest.MakeCompositePodGroup("top", testNS).Obj(),
		gangtest.MakeCompositePodGroup("mid", testNS).Parent("top").Obj(),
		gangtest.MakeNativePodGroup("leaf", testNS).Parent("mid").Obj(),
		gangtest.MakeNativePodGroup("orphan", testNS).Parent("ghost").Obj(),
		gangtest.MakeNativePodGroup("plain", testNS).Obj(),
	)
	req := func(names ...string) []reconcile.Request {
		var out []reconcile.Request
		for _, n := range names {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: testNS, Name: n}})
		}
		return out
	}
	native := func(name string) gang.Key { return gang.Key{API: gang.Native, Namespace: testNS, Name: name} }
	require.Equal(t, req("mid", "top"), ancestors(t.Context(), tc.client, native("leaf")))
	require.Equal(t, req("top"), ancestors(t.Context(), tc.client, gang.Key{API: gang.Composite, Namespace: testNS, Name: "mid"}))
	require.Equal(t, req("ghost"), ancestors(t.Context(), tc.client, native("orphan")))
	require.Empty(t, ancestors(t.Context(), tc.client, native("plain")))
	require.Empty(t, ancestors(t.Context(), tc.client, native("gone")))
}
