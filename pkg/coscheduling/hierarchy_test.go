package coscheduling

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// releaseWithin bounds how long a waiting member may take to hear that its
// attempt ended. The attempt's own deadline is 60 s, so a member that is
// only let go by the timeout fails the test.
const releaseWithin = 5 * time.Second

// Deleting or re-creating any level of a hierarchy while its members wait
// in Permit ends the unit's attempt at once: every waiting member is
// rejected and gives back its node, the ledger holds nothing for any of
// them, and a composite re-created with the same name counts no stale
// reservation: its tree plans and starts whole again.
func TestHierarchyChangedMidAttempt(t *testing.T) {
	job := gang.Key{API: gang.Composite, Namespace: testNS, Name: "job"}
	// job (gang, 2 children) > mid (gang, 1 child) > a (2 members); job > b
	// (2 members): the unit of every member is job.
	threeLevels := []*schedulingv1alpha3.CompositePodGroup{
		composite("job", 2).Obj(), composite("mid", 1).Parent("job").Obj()}
	// top (basic) > job (gang, 2 children) > a, b: the unit is job, below
	// the top of its hierarchy.
	basicTop := []*schedulingv1alpha3.CompositePodGroup{
		gangtest.MakeCompositePodGroup("top", testNS).Basic().Workload("train", "top").Obj(), composite("job", 2).Parent("top").Obj()}
	for _, tc := range []struct {
		name       string
		composites []*schedulingv1alpha3.CompositePodGroup
		parentOfA  string
		// changed names the object that changes: a composite, or the
		// native PodGroup a when native is set.
		changed string
		native  bool
		how     hierarchyChange
	}{
		{name: "the middle level deleted", composites: threeLevels, parentOfA: "mid", changed: "mid", how: deleted},
		{name: "the root deleted", composites: threeLevels, parentOfA: "mid", changed: "job", how: deleted},
		{name: "a basic top above the gang root deleted", composites: basicTop, parentOfA: "job", changed: "top", how: deleted},
		{name: "the middle level deleted and re-created", composites: threeLevels, parentOfA: "mid", changed: "mid", how: recreated},
		{name: "the middle level re-created, seen as an update", composites: threeLevels, parentOfA: "mid", changed: "mid", how: replaced},
		{name: "a child PodGroup deleted and re-created", composites: threeLevels, parentOfA: "mid", changed: "a", native: true, how: recreated},
		{name: "a child PodGroup re-created, seen as an update", composites: threeLevels, parentOfA: "mid", changed: "a", native: true, how: replaced},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := nativeMembers("a", 2, "8"), nativeMembers("b", 2, "8")
			all := append(a, b...)
			childA := child("a", tc.parentOfA, 2).Obj()
			env := newTestEnv(t, gpuNodes(4), all, nil, withComposites(tc.composites, childA, child("b", "job", 2).Obj()))
			env.SyncCompositeWatch()
			env.SyncNativeWatch()
			waiting := all[:3]
			statuses, waits, nodes := scheduleAll(t, env, waiting)
			for i, s := range statuses {
				require.True(t, s.IsWait(), "%s waits for b-1: %v", waiting[i].Name, s)
			}
			require.Len(t, env.ledger().Reservations.ReservedBy(job), 3)

			var obj hierarchyObject = findComposite(tc.composites, tc.changed)
			changedKey := gang.Key{API: gang.Composite, Namespace: testNS, Name: tc.changed}
			if tc.native {
				obj, changedKey = childA, gang.Key{API: gang.Native, Namespace: testNS, Name: tc.changed}
			}
			oldUID := obj.GetUID()
			env.changeObject(obj, tc.how)

			for i, w := range waits {
				select {
				case s := <-w:
					require.False(t, s.IsSuccess(), "%s is rejected with its unit", waiting[i].Name)
					require.Contains(t, s.Message(), testNS+"/"+tc.changed, "the rejection names the object that changed")
				case <-time.After(releaseWithin):
					t.Fatalf("%s still waits in Permit %s after %s changed", waiting[i].Name, releaseWithin, changedKey)
				}
				assumed := waiting[i].DeepCopy()
				assumed.Spec.NodeName = nodes[i]
				env.forget(assumed)
			}
			uids := make([]types.UID, len(all))
			for i, p := range all {
				uids[i] = p.UID
			}
			require.Empty(t, env.ledger().Holders(uids), "no unit holds a reservation, a slot or a head hold for any member")
			require.Empty(t, env.ledger().Reservations.ReservedBy(job))
			require.Empty(t, env.ledger().Held(), "no capacity is held")

			if tc.how == deleted {
				return
			}
			require.NoError(t, wait.PollUntilContextTimeout(env.ctx, 5*time.Millisecond, wait.ForeverTestTimeout, true, func(ctx context.Context) (bool, error) {
				if tc.native {
					s, err := env.Sources.Spec(changedKey)
					return err == nil && s.UID != oldUID, nil
				}
				c, err := env.Sources.Composite(changedKey)
				return err == nil && c.UID != oldUID, nil
			}), "the gang sources never saw the new %s", changedKey)
			u, err := env.pl.readUnit(job)
			require.NoError(t, err)
			require.Len(t, u.Members(), 4, "the new object brings a back into the tree")
			q := u.Quorum(env.pl.viewOf(job))
			require.Zero(t, q.Census.Reserved, "the census counts no reservation of the ended attempt")
			require.EqualValues(t, 4, q.Census.Waiting)

			statuses, waits, _ = scheduleAll(t, env, all)
			for i := range 3 {
				require.True(t, statuses[i].IsWait(), "%s waits for the whole tree again: %v", all[i].Name, statuses[i])
			}
			require.True(t, statuses[3].IsSuccess(), "the last member completes the tree: %v", statuses[3])
			for i := range 3 {
				require.True(t, outcome(t, waits[i]).IsSuccess(), all[i].Name)
			}
		})
	}
}

// hierarchyObject is a composite or a native PodGroup.
type hierarchyObject interface {
	metav1.Object
	runtime.Object
}

// hierarchyChange is how a test changes an object of a hierarchy.
type hierarchyChange int

const (
	// deleted deletes it.
	deleted hierarchyChange = iota
	// recreated deletes it and at once creates it again, with a new UID:
	// the informer may hold the new object by the time the plugin hears
	// of the deletion.
	recreated
	// replaced is the new object seen as an update of the old one, as an
	// informer that missed both events sees them when it lists again.
	replaced
)

// changeObject changes a composite or a native PodGroup as how says.
func (e *testEnv) changeObject(obj hierarchyObject, how hierarchyChange) {
	e.t.Helper()
	again := obj.DeepCopyObject().(hierarchyObject)
	again.SetUID(obj.GetUID() + "-again")
	again.SetResourceVersion("")
	var err error
	switch o := obj.(type) {
	case *schedulingv1alpha3.CompositePodGroup:
		api := e.client.SchedulingV1alpha3().CompositePodGroups(testNS)
		switch how {
		case replaced:
			_, err = api.Update(e.ctx, again.(*schedulingv1alpha3.CompositePodGroup), metav1.UpdateOptions{})
		default:
			if err = api.Delete(e.ctx, o.Name, metav1.DeleteOptions{}); err == nil && how == recreated {
				_, err = api.Create(e.ctx, again.(*schedulingv1alpha3.CompositePodGroup), metav1.CreateOptions{})
			}
		}
	case *schedulingv1beta1.PodGroup:
		api := e.client.SchedulingV1beta1().PodGroups(testNS)
		switch how {
		case replaced:
			_, err = api.Update(e.ctx, again.(*schedulingv1beta1.PodGroup), metav1.UpdateOptions{})
		default:
			if err = api.Delete(e.ctx, o.Name, metav1.DeleteOptions{}); err == nil && how == recreated {
				_, err = api.Create(e.ctx, again.(*schedulingv1beta1.PodGroup), metav1.CreateOptions{})
			}
		}
	}
	require.NoError(e.t, err)
}
func findComposite(cpgs []*schedulingv1alpha3.CompositePodGroup, name string) *schedulingv1alpha3.CompositePodGroup {
	for _, c := range cpgs {
		if c.Name == name {
			return c
		}
	}
	return nil
}
