package coscheduling

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		parentOfB  string
		deleted    string
		recreate   bool
	}{
		{name: "the middle level deleted", composites: threeLevels, parentOfA: "mid", parentOfB: "job", deleted: "mid"},
		{name: "the root deleted", composites: threeLevels, parentOfA: "mid", parentOfB: "job", deleted: "job"},
		{name: "a basic top above the gang root deleted", composites: basicTop, parentOfA: "job", parentOfB: "job", deleted: "top"},
		{name: "the middle level deleted and re-created", composites: threeLevels, parentOfA: "mid", parentOfB: "job", deleted: "mid", recreate: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := nativeMembers("a", 2, "8"), nativeMembers("b", 2, "8")
			all := append(a, b...)
			env := newTestEnv(t, gpuNodes(4), all, nil, withComposites(tc.composites,
				child("a", tc.parentOfA, 2).Obj(), child("b", tc.parentOfB, 2).Obj()))
			env.SyncCompositeWatch()
			waiting := all[:3]
			statuses, waits, nodes := scheduleAll(t, env, waiting)
			for i, s := range statuses {
				require.True(t, s.IsWait(), "%s waits for b-1: %v", waiting[i].Name, s)
			}
			require.Len(t, env.pl.ledger.Claims.Reservations(job), 3)

			old := findComposite(tc.composites, tc.deleted)
			composites := env.client.SchedulingV1alpha3().CompositePodGroups(testNS)
			require.NoError(t, composites.Delete(env.ctx, tc.deleted, metav1.DeleteOptions{}))
			if tc.recreate {
				// At once: the informer may hold the new object by the
				// time the plugin hears of the deletion.
				again := old.DeepCopy()
				again.UID, again.ResourceVersion = types.UID(string(old.UID)+"-again"), ""
				_, err := composites.Create(env.ctx, again, metav1.CreateOptions{})
				require.NoError(t, err)
			}

			for i, w := range waits {
				select {
				case s := <-w:
					require.False(t, s.IsSuccess(), "%s is rejected with its unit", waiting[i].Name)
					require.Contains(t, s.Message(), tc.deleted, "the rejection names the composite that changed")
				case <-time.After(releaseWithin):
					t.Fatalf("%s still waits in Permit %s after CompositePodGroup %s was deleted", waiting[i].Name, releaseWithin, tc.deleted)
				}
				assumed := waiting[i].DeepCopy()
				assumed.Spec.NodeName = nodes[i]
				env.forget(assumed)
			}
			uids := make([]types.UID, len(all))
			for i, p := range all {
				uids[i] = p.UID
			}
			require.Empty(t, env.pl.ledger.Holders(uids), "no unit holds a reservation, a slot or a head hold for any member")
			require.Empty(t, env.pl.ledger.Claims.Reservations(job))
			require.Empty(t, env.pl.ledger.Held(), "no capacity is held")

			if !tc.recreate {
				return
			}
			require.NoError(t, wait.PollUntilContextTimeout(env.ctx, 5*time.Millisecond, wait.ForeverTestTimeout, true, func(ctx context.Context) (bool, error) {
				c, err := env.Sources.Composite(gang.Key{API: gang.Composite, Namespace: testNS, Name: tc.deleted})
				return err == nil && c.UID != old.UID, nil
			}), "the gang sources never saw the re-created composite")
			spec, ok := env.pl.lookup(job)
			require.True(t, ok)
			members, err := env.pl.members(job)
			require.NoError(t, err)
			require.Len(t, members, 4, "the re-created composite brings a back into the tree")
			q := env.pl.quorum(spec, members)
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

func findComposite(cpgs []*schedulingv1alpha3.CompositePodGroup, name string) *schedulingv1alpha3.CompositePodGroup {
	for _, c := range cpgs {
		if c.Name == name {
			return c
		}
	}
	return nil
}
