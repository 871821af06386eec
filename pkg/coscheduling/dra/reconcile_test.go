package dra

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

const testGrace = time.Minute

// liveSet is LiveAttempts over a fixed set of marks.
type liveSet map[Mark]bool

func (l liveSet) Live(m Mark) bool { return l[m] }

func claimNamed(ns, name string, m *Mark, reservedBy ...string) *resourceapi.ResourceClaim {
	c := allocatedClaim(m, reservedBy...)
	c.Namespace, c.Name = ns, name
	return c
}

func markFor(gangName, attempt string) *Mark {
	return &Mark{Gang: gang.Key{Namespace: "ns", Name: gangName}, Attempt: attempt}
}

// newClaimEnv is a fake clientset holding objs, with a synced claim
// informer.
func newClaimEnv(t *testing.T, ctx context.Context, objs ...runtime.Object) (*fake.Clientset, informers.SharedInformerFactory) {
	t.Helper()
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	factory.Resource().V1().ResourceClaims().Informer()
	ctx, cancel := context.WithCancel(ctx)
	factory.Start(ctx.Done())
	// Shutdown waits for the informers, which stop with ctx.
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("informer of %v did not sync", typ)
		}
	}
	return client, factory
}

// TestReconcilerPass runs passes at given times after the first and checks
// which claims the API server has deallocated after each, and the Events.
func TestReconcilerPass(t *testing.T) {
	type pass struct {
		// at is the time of the pass, from the first.
		at time.Duration
		// allocated are the claims still allocated after it.
		allocated []string
	}
	for _, tc := range []struct {
		name   string
		claims []*resourceapi.ResourceClaim
		live   liveSet
		passes []pass
		events []string
	}{
		{
			name:   "released once the grace has passed, not a second before",
			claims: []*resourceapi.ResourceClaim{claimNamed("ns", "shared", markFor("train", "t1"))},
			passes: []pass{{0, []string{"shared"}}, {testGrace - time.Second, []string{"shared"}}, {testGrace, nil}},
			events: []string{"Normal ClaimReleased gave back the allocation gpu-gang wrote for gang train: no pod of gang train reserved it for 1m0s and no attempt plans it; the gang's next attempt allocates it again"},
		},
		{
			name:   "a reserved claim is never released",
			claims: []*resourceapi.ResourceClaim{claimNamed("ns", "shared", markFor("train", "t1"), "pod-0")},
			passes: []pass{{0, []string{"shared"}}, {testGrace, []string{"shared"}}, {10 * testGrace, []string{"shared"}}},
		},
		{
			name:   "a claim a live attempt plans is never released",
			claims: []*resourceapi.ResourceClaim{claimNamed("ns", "shared", markFor("train", "t1"))},
			live:   liveSet{*markFor("train", "t1"): true},
			passes: []pass{{0, []string{"shared"}}, {testGrace, []string{"shared"}}, {10 * testGrace, []string{"shared"}}},
		},
		{
			name: "another attempt of the gang being live does not keep an older allocation",
			claims: []*resourceapi.ResourceClaim{
				claimNamed("ns", "kept", markFor("train", "t2")),
				claimNamed("ns", "old", markFor("train", "t1")),
			},
			live:   liveSet{*markFor("train", "t2"): true},
			passes: []pass{{0, []string{"kept", "old"}}, {testGrace, []string{"kept"}}},
			events: []string{"Normal ClaimReleased gave back the allocation gpu-gang wrote for gang train: no pod of gang train reserved it for 1m0s and no attempt plans it; the gang's next attempt allocates it again"},
		},
		{
			name: "the mark left on a claim given back is cleared without an Event",
			claims: []*resourceapi.ResourceClaim{func() *resourceapi.ResourceClaim {
				c := claimNamed("ns", "given-back", markFor("train", "t1"))
				c.Status.Allocation = nil
				return c
			}()},
			passes: []pass{{0, nil}, {testGrace, nil}},
		},
		{
			name:   "an unmarked claim is never touched",
			claims: []*resourceapi.ResourceClaim{claimNamed("ns", "users", nil)},
			passes: []pass{{0, []string{"users"}}, {testGrace, []string{"users"}}, {10 * testGrace, []string{"users"}}},
		},
		{
			name: "a mark that cannot be read is reported once and left",
			claims: []*resourceapi.ResourceClaim{func() *resourceapi.ResourceClaim {
				c := claimNamed("ns", "odd", nil)
				c.Annotations = map[string]string{scheduling.AnnotationClaimAllocatedFor: "jobs.batch/train", scheduling.AnnotationClaimAllocationAttempt: "t1"}
				return c
			}()},
			passes: []pass{{0, []string{"odd"}}, {testGrace, []string{"odd"}}},
			events: []string{`Warning InvalidClaimMark ResourceClaim ns/odd: annotation gpu-gang.x-k8s.io/allocated-for="jobs.batch/train" names no PodGroup resource (podgroups.scheduling.x-k8s.io, podgroups.scheduling.k8s.io or compositepodgroups.scheduling.k8s.io); gpu-gang leaves the claim as it is: remove both annotations (kubectl annotate resourceclaim -n ns odd gpu-gang.x-k8s.io/allocated-for- gpu-gang.x-k8s.io/allocation-attempt-), and deallocate the claim if no pod uses it`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			objs := make([]runtime.Object, len(tc.claims))
			for i, c := range tc.claims {
				objs[i] = c
			}
			client, factory := newClaimEnv(t, ctx, objs...)
			clock := clocktesting.NewFakeClock(time.Now())
			recorder := events.NewFakeRecorder(10)
			r := NewReconciler(factory.Resource().V1().ResourceClaims().Lister(),
				&Releaser{Client: client.ResourceV1(), Backoff: wait.Backoff{Steps: 1}}, recorder, clock, testGrace)
			if tc.live != nil {
				r.Track(tc.live)
			}
			start := clock.Now()
			for _, p := range tc.passes {
				clock.SetTime(start.Add(p.at))
				r.Pass(ctx)
				var allocated []string
				list, err := client.ResourceV1().ResourceClaims("ns").List(ctx, metav1.ListOptions{})
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range list.Items {
					if c.Status.Allocation != nil {
						allocated = append(allocated, c.Name)
					}
				}
				if diff := cmp.Diff(p.allocated, allocated); diff != "" {
					t.Errorf("allocated after the pass at %s (-want,+got):\n%s", p.at, diff)
				}
			}
			close(recorder.Events)
			var got []string
			for e := range recorder.Events {
				got = append(got, e)
			}
			if diff := cmp.Diff(tc.events, got); diff != "" {
				t.Errorf("events (-want,+got):\n%s", diff)
			}
		})
	}
}

// recordingReleaser records the claims it is asked to release.
type recordingReleaser struct {
	mu    sync.Mutex
	names []string
}

func (r *recordingReleaser) Release(_ context.Context, name types.NamespacedName, _ Mark) (Outcome, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.names = append(r.names, name.String())
	return Released, nil
}

func (r *recordingReleaser) released() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.names...)
}

// Claims are released in namespace/name order, whatever order the
// informer lists them in.
func TestReconcilerOrder(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	var objs []runtime.Object
	for _, n := range []types.NamespacedName{{Namespace: "b", Name: "a"}, {Namespace: "a", Name: "z"}, {Namespace: "a", Name: "b"}, {Namespace: "c", Name: "a"}, {Namespace: "a", Name: "a"}} {
		m := &Mark{Gang: gang.Key{Namespace: n.Namespace, Name: "g"}, Attempt: "t"}
		objs = append(objs, claimNamed(n.Namespace, n.Name, m))
	}
	_, factory := newClaimEnv(t, ctx, objs...)
	rel := &recordingReleaser{}
	r := newReconciler(factory.Resource().V1().ResourceClaims().Lister(), rel, events.NewFakeRecorder(10), clocktesting.NewFakeClock(time.Now()), 0)
	r.Pass(ctx)
	want := []string{"a/a", "a/b", "a/z", "b/a", "c/a"}
	if diff := cmp.Diff(want, rel.released()); diff != "" {
		t.Errorf("release order (-want,+got):\n%s", diff)
	}
}

// A claim seen reserved, or marked by a new attempt, between two passes is
// timed again from the pass that sees it unreserved with that mark.
func TestReconcilerRestartsTheGrace(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	claim := claimNamed("ns", "shared", markFor("train", "t1"))
	client, factory := newClaimEnv(t, ctx, claim)
	lister := factory.Resource().V1().ResourceClaims().Lister()
	clock := clocktesting.NewFakeClock(time.Now())
	rel := &recordingReleaser{}
	r := newReconciler(lister, rel, events.NewFakeRecorder(10), clock, testGrace)
	update := func(c *resourceapi.ResourceClaim) {
		t.Helper()
		if _, err := client.ResourceV1().ResourceClaims("ns").Update(ctx, c, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			got, err := lister.ResourceClaims("ns").Get("shared")
			return err == nil && cmp.Equal(got.Status.ReservedFor, c.Status.ReservedFor) && cmp.Equal(got.Annotations, c.Annotations), nil
		})
		if err != nil {
			t.Fatalf("the informer never saw the update: %v", err)
		}
	}
	start := clock.Now()
	r.Pass(ctx) // first seen at start

	clock.SetTime(start.Add(testGrace / 2))
	update(claimNamed("ns", "shared", markFor("train", "t1"), "pod-0"))
	r.Pass(ctx) // reserved: forgotten

	clock.SetTime(start.Add(testGrace * 3 / 4))
	update(claimNamed("ns", "shared", markFor("train", "t1")))
	r.Pass(ctx) // seen again

	clock.SetTime(start.Add(testGrace + time.Second))
	update(claimNamed("ns", "shared", markFor("train", "t2")))
	r.Pass(ctx) // a new write's mark: timed again
	if got := rel.released(); len(got) > 0 {
		t.Fatalf("released %v before the claim was unreserved with one mark for the grace", got)
	}
	clock.SetTime(start.Add(2*testGrace + time.Second))
	r.Pass(ctx)
	if diff := cmp.Diff([]string{"ns/shared"}, rel.released()); diff != "" {
		t.Errorf("released (-want,+got):\n%s", diff)
	}
}

// Run writes nothing until Lead: a standby's attempts are not the
// leader's.
func TestReconcilerWaitsForLead(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, factory := newClaimEnv(t, ctx, claimNamed("ns", "shared", markFor("train", "t1")))
	rel := &recordingReleaser{}
	r := newReconciler(factory.Resource().V1().ResourceClaims().Lister(), rel, events.NewFakeRecorder(10), clocktesting.NewFakeClock(time.Now()), 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx, func() bool { return true })
	}()
	// Not leading: over a window, nothing is released.
	deadline := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(deadline) {
		if got := rel.released(); len(got) > 0 {
			t.Fatalf("released %v before leading", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.Lead()
	r.Lead() // a second call is harmless
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(rel.released()) > 0, nil
	})
	if err != nil {
		t.Fatalf("nothing released after Lead: %v", err)
	}
	cancel()
	<-done
}

func TestReconcilerPeriod(t *testing.T) {
	for grace, want := range map[time.Duration]time.Duration{0: 5 * time.Second, 8 * time.Second: 5 * time.Second, time.Minute: 15 * time.Second, 10 * time.Minute: 150 * time.Second} {
		r := newReconciler(nil, nil, nil, nil, grace)
		if got := r.Period(); got != want {
			t.Errorf("grace %s: period %s, want %s", grace, got, want)
		}
	}
}

// failingReleaser fails its first fails calls, then records the releases.
type failingReleaser struct {
	recordingReleaser
	fails int
}

func (r *failingReleaser) Release(ctx context.Context, name types.NamespacedName, m Mark) (Outcome, error) {
	r.mu.Lock()
	if r.fails > 0 {
		r.fails--
		r.mu.Unlock()
		return Released, errors.New("the API server refused it")
	}
	r.mu.Unlock()
	return r.recordingReleaser.Release(ctx, name, m)
}

// A release that failed is tried again at the next pass, not a whole grace
// later: the allocation has been unused for the grace already.
func TestReconcilerRetriesAFailedReleaseAtTheNextPass(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	_, factory := newClaimEnv(t, ctx, claimNamed("ns", "shared", markFor("train", "t1")))
	clock := clocktesting.NewFakeClock(time.Now())
	rel := &failingReleaser{fails: 1}
	r := newReconciler(factory.Resource().V1().ResourceClaims().Lister(), rel, events.NewFakeRecorder(10), clock, testGrace)
	start := clock.Now()
	r.Pass(ctx)
	clock.SetTime(start.Add(testGrace))
	r.Pass(ctx) // the release fails
	clock.SetTime(start.Add(testGrace + time.Second))
	r.Pass(ctx)
	if diff := cmp.Diff([]string{"ns/shared"}, rel.released()); diff != "" {
		t.Errorf("released at the pass after the failure (-want,+got):\n%s", diff)
	}
}
