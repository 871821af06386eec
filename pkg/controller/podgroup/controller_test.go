package podgroup

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	upstream "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling/v1alpha1"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// testController is a Reconciler of T on a fake client with the API's
// member index, a fake clock and a fake Event recorder, counting status
// patches.
type testController[T client.Object] struct {
	r       *Reconciler[T]
	client  client.Client
	clock   *clocktesting.FakePassiveClock
	events  *events.FakeRecorder
	patches int
}

// newTestController is a testController of scheduler-plugins PodGroups.
func newTestController(t *testing.T, funcs *interceptor.Funcs, objs ...client.Object) *testController[*v1alpha1.PodGroup] {
	t.Helper()
	return newHarness(t, podGroups{}, funcs, objs...)
}

// newTestNativeController is a testController of native PodGroups, of
// gpu-gang's default scheduler name.
func newTestNativeController(t *testing.T, objs ...client.Object) *testController[*schedulingv1beta1.PodGroup] {
	t.Helper()
	return newHarness(t, nativePodGroups{}, nil, objs...)
}

func newHarness[T client.Object](t *testing.T, api adapter[T], funcs *interceptor.Funcs, objs ...client.Object) *testController[T] {
	t.Helper()
	tc := &testController[T]{clock: clocktesting.NewFakePassiveClock(t0), events: events.NewFakeRecorder(100)}
	f := interceptor.Funcs{}
	if funcs != nil {
		f = *funcs
	}
	next := f.SubResourcePatch
	f.SubResourcePatch = func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
		tc.patches++
		if next != nil {
			return next(ctx, c, sub, obj, patch, opts...)
		}
		return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
	}
	b := fake.NewClientBuilder().
		WithScheme(Scheme()).
		WithObjects(objs...).
		WithStatusSubresource(api.newObject()).
		WithInterceptorFuncs(f)
	indexes := api.indexes()
	if api.api() == gang.Composite {
		// The native reconciler registers the member index composites
		// list with.
		indexes = append(indexes, nativePodGroups{}.indexes()...)
	}
	for _, idx := range indexes {
		b = b.WithIndex(idx.obj, idx.field, idx.extract)
	}
	tc.client = b.Build()
	tc.r = &Reconciler[T]{Config: Config{Client: tc.client, Recorder: tc.events, Clock: tc.clock, MissingMembersGrace: grace}, api: api}
	return tc
}

func (tc *testController[T]) reconcile(t *testing.T, name string) reconcile.Result {
	t.Helper()
	res, err := tc.r.Reconcile(t.Context(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: testNS, Name: name}})
	require.NoError(t, err)
	return res
}

func (tc *testController[T]) get(t *testing.T, name string) T {
	t.Helper()
	pg := tc.r.api.newObject()
	require.NoError(t, tc.client.Get(t.Context(), types.NamespacedName{Namespace: testNS, Name: name}, pg))
	return pg
}

// setPods gives existing pods the node and phase of ws.
func (tc *testController[T]) setPods(t *testing.T, ws ...*v1.Pod) {
	t.Helper()
	for _, w := range ws {
		p := &v1.Pod{}
		require.NoError(t, tc.client.Get(t.Context(), types.NamespacedName{Namespace: w.Namespace, Name: w.Name}, p))
		p.Spec.NodeName = w.Spec.NodeName
		require.NoError(t, tc.client.Update(t.Context(), p))
		p.Status.Phase = w.Status.Phase
		require.NoError(t, tc.client.Status().Update(t.Context(), p))
	}
}

// drainEvents returns the Events recorded so far, as "Type Reason note".
func (tc *testController[T]) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-tc.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func objs(ps []v1.Pod) []client.Object {
	out := make([]client.Object, len(ps))
	for i := range ps {
		out[i] = &ps[i]
	}
	return out
}

// A gang's status follows its members through the phases, read through the
// index and the namespace only, with one Event per phase change and no
// patch when nothing changed.
func TestReconcileFollowsMembers(t *testing.T) {
	pg := extended(gangtest.MakePodGroup("train", testNS).MinMember(2).Generation(1).Obj())
	members := pods(pending(member("w-0")), pending(member("w-1")))
	// Neither of these is a member of ns/train: one is in another group,
	// the other in another namespace with the same group name.
	strangers := pods(running(member("other").Label(scheduling.PodGroupLabel, "other")), running(member("elsewhere").Namespace("other-ns")))
	all := append(append([]client.Object{pg}, objs(members)...), objs(strangers)...)
	tc := newTestController(t, nil, all...)

	tc.reconcile(t, "train")
	got := tc.get(t, "train")
	want := counts{Phase: upstream.PodGroupScheduling}
	if diff := cmp.Diff(want, counts{got.Status.Phase, got.Status.Running, got.Status.Succeeded, got.Status.Failed}); diff != "" {
		t.Fatalf("after the members were created (-want,+got):\n%s", diff)
	}
	if got.Status.ObservedGeneration != 1 {
		t.Errorf("observedGeneration = %d, want 1", got.Status.ObservedGeneration)
	}
	require.Equal(t, []string{"Normal GangScheduling phase (none) -> Scheduling: minMember (2) members exist; the scheduler places them together"}, tc.drainEvents())

	patches := tc.patches
	tc.reconcile(t, "train")
	require.Equal(t, patches, tc.patches, "a reconcile with nothing new patched the status")
	require.Empty(t, tc.drainEvents())

	tc.setPods(t, running(member("w-0")).Obj(), running(member("w-1")).Obj())
	tc.reconcile(t, "train")
	got = tc.get(t, "train")
	require.Equal(t, upstream.PodGroupRunning, got.Status.Phase)
	require.Equal(t, int32(2), got.Status.Running, "running counts the group's members only")
	require.Equal(t, []string{"Normal GangRunning phase Scheduling -> Running: 2 running, 0 succeeded, 0 failed; minMember 2"}, tc.drainEvents())

	tc.setPods(t, succeeded(member("w-0")).Obj(), succeeded(member("w-1")).Obj())
	tc.reconcile(t, "train")
	require.Equal(t, upstream.PodGroupFinished, tc.get(t, "train").Status.Phase)
	require.Equal(t, []string{"Normal GangFinished phase Running -> Finished: every member finished: 0 running, 2 succeeded, 0 failed"}, tc.drainEvents())
}

// Members waiting for the rest of their gang are rechecked when the grace
// period ends, and then reported missing, with one warning.
func TestReconcileReportsMissingMembers(t *testing.T) {
	pg := extended(gangtest.MakePodGroup("pi", testNS).MinMember(3).Owner("kubeflow.org/v2beta1", "MPIJob", "pi").Obj())
	workers := pods(
		pending(member("pi-worker-0").Label(scheduling.PodGroupLabel, "pi").Label(scheduling.KubeflowReplicaTypeLabel, "worker")),
		pending(member("pi-worker-1").Label(scheduling.PodGroupLabel, "pi").Label(scheduling.KubeflowReplicaTypeLabel, "worker")))
	tc := newTestController(t, nil, append([]client.Object{pg}, objs(workers)...)...)

	tc.clock.SetTime(t0.Add(time.Minute))
	res := tc.reconcile(t, "pi")
	require.Equal(t, reconcile.Result{RequeueAfter: grace - time.Minute}, res)
	require.Empty(t, tc.drainEvents(), "a new group waiting for members needs no Event from the controller")

	tc.clock.SetTime(t0.Add(grace))
	res = tc.reconcile(t, "pi")
	require.Zero(t, res.RequeueAfter, "nothing is left to wait for")
	evs := tc.drainEvents()
	require.Len(t, evs, 1)
	require.True(t, strings.HasPrefix(evs[0], "Warning MembersMissing 2/3 members exist"), evs[0])
	require.Contains(t, evs[0], "launcherCreationPolicy")

	tc.clock.SetTime(t0.Add(2 * grace))
	tc.reconcile(t, "pi")
	require.Empty(t, tc.drainEvents(), "the warning is recorded once")
}

// A PodGroup that is gone needs nothing.
func TestReconcileIgnoresMissingPodGroup(t *testing.T) {
	tc := newTestController(t, nil)
	require.Equal(t, reconcile.Result{}, tc.reconcile(t, "gone"))
	require.Zero(t, tc.patches)
}

// A conflict means another write changed the PodGroup; that write requeues
// it, so the reconcile neither fails nor records Events.
func TestReconcileConflictIsNotAnError(t *testing.T) {
	pg := extended(gangtest.MakePodGroup("train", testNS).MinMember(1).Obj())
	conflict := &interceptor.Funcs{SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
		return apierrors.NewConflict(v1alpha1.Resource("podgroups"), "train", nil)
	}}
	tc := newTestController(t, conflict, pg, &[]v1.Pod{*running(member("w")).Obj()}[0])
	require.Equal(t, reconcile.Result{}, tc.reconcile(t, "train"))
	require.Equal(t, 1, tc.patches)
	require.Empty(t, tc.drainEvents())
}
