package dra

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	testclock "k8s.io/utils/clock/testing"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

var (
	claimsGR    = schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}
	errTimeout  = apierrors.NewServerTimeout(claimsGR, "update", 1)
	errRefused  = apierrors.NewForbidden(claimsGR, "shared", errors.New("a webhook refuses"))
	errConflict = apierrors.NewConflict(claimsGR, "shared", errors.New("changed"))
)

// fakeTracker records what the table tells the assume cache. Only the
// calls the table makes are implemented.
type fakeTracker struct {
	fwk.ResourceClaimTracker
	mu      sync.Mutex
	pending map[types.UID]*resourceapi.ResourceClaim
	assumed []*resourceapi.ResourceClaim
}

func (f *fakeTracker) SignalClaimPendingAllocation(uid types.UID, c *resourceapi.ResourceClaim) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.Status.Allocation == nil {
		return errors.New("a pending allocation must have an allocation")
	}
	f.pending[uid] = c
	return nil
}

func (f *fakeTracker) MaybeRemoveClaimPendingAllocation(uid types.UID, force bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.pending[uid]
	delete(f.pending, uid)
	return ok
}

func (f *fakeTracker) AssumeClaimAfterAPICall(c *resourceapi.ResourceClaim) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.assumed = append(f.assumed, c)
	return nil
}

// queue runs the table's writes and releases when the test says so.
type queue struct {
	mu  sync.Mutex
	ops []func()
}

func (q *queue) run(f func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ops = append(q.ops, f)
}

// take removes and returns op i, or nil.
func (q *queue) take(i int) func() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if i >= len(q.ops) {
		return nil
	}
	f := q.ops[i]
	q.ops = slices.Delete(q.ops, i, i+1)
	return f
}

func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.ops)
}

// drain runs ops, and those they queue, until none is left.
func (q *queue) drain() {
	for f := q.take(0); f != nil; f = q.take(0) {
		f()
	}
}

var train = gang.Key{API: gang.XK8s, Namespace: "ns", Name: "train"}

func unallocated(name string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
}

func result(node string) *resourceapi.AllocationResult {
	return &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: "gpu.nvidia.com", Pool: node, Device: "gpu-0"}}}}
}

type fixture struct {
	client   *fake.Clientset
	tracker  *fakeTracker
	queue    *queue
	clock    *testclock.FakeClock
	recorder *events.FakeRecorder
	done     []gang.Key
	table    *Allocations
	tokens   int
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	logger, ctx := ktesting.NewTestContext(t)
	f := &fixture{
		client:   fake.NewClientset(objs...),
		tracker:  &fakeTracker{pending: map[types.UID]*resourceapi.ResourceClaim{}},
		queue:    &queue{},
		clock:    testclock.NewFakeClock(time.Unix(0, 0)),
		recorder: events.NewFakeRecorder(100),
	}
	f.table = f.newTable(ctx, logger)
	return f
}

func (f *fixture) newTable(ctx context.Context, logger klog.Logger) *Allocations {
	return NewAllocations(ctx, Options{
		Client: f.client.ResourceV1(), Tracker: f.tracker, Recorder: f.recorder, Clock: f.clock,
		Backoff: wait.Backoff{Steps: 3, Duration: time.Microsecond},
		Done:    func(k gang.Key) { f.done = append(f.done, k) },
		Logger:  logger,
		Run:     f.queue.run,
		NewToken: func() string {
			f.tokens++
			return "t" + strconv.Itoa(f.tokens)
		},
	})
}

func (f *fixture) get(t *testing.T, name string) *resourceapi.ResourceClaim {
	t.Helper()
	c, err := f.client.ResourceV1().ResourceClaims("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// failWrites makes the next n writes of verb (update, or update of the
// status) fail with err.
func (f *fixture) failWrites(status bool, n int, err error) {
	f.client.PrependReactor("update", "resourceclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if (a.GetSubresource() == "status") != status || n == 0 {
			return false, nil, nil
		}
		n--
		return true, nil, err
	})
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// TestWriteMarksThenAllocatesOffTheCycle checks that Write makes no API
// call itself, shows the allocation in flight at once, writes the mark
// and the finalizer before the allocation, and, once landed, moves the
// allocation from in flight to assumed and says so.
func TestWriteMarksThenAllocatesOffTheCycle(t *testing.T) {
	f := newFixture(t, unallocated("shared"))
	var order []string
	f.client.PrependReactor("update", "resourceclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		c := a.(k8stesting.UpdateAction).GetObject().(*resourceapi.ResourceClaim)
		_, marked, _ := MarkOf(c)
		order = append(order, a.GetSubresource()+map[bool]string{true: "(marked)", false: "(unmarked)"}[marked])
		return false, nil, nil
	})
	f.client.ClearActions()
	if err := f.table.Write(train, unallocated("shared"), result("node-a"), func(err error) { t.Errorf("write failed: %v", err) }); err != nil {
		t.Fatal(err)
	}
	if n := len(f.client.Actions()); n != 0 {
		t.Fatalf("Write made %d API calls in the caller's goroutine", n)
	}
	if f.tracker.pending["uid-shared"] == nil {
		t.Fatal("the allocation is not shown in flight")
	}
	if !f.table.Busy(train) {
		t.Error("the gang is not busy while its write is in flight")
	}
	f.queue.drain()
	c := f.get(t, "shared")
	m, ok, err := MarkOf(c)
	if !ok || err != nil || m.Gang != train || m.Attempt != "t1" {
		t.Errorf("mark = %+v, %v, %v", m, ok, err)
	}
	if c.Status.Allocation == nil || !slices.Contains(c.Finalizers, resourceapi.Finalizer) {
		t.Errorf("claim not allocated with the finalizer: %+v", c)
	}
	if want := []string{"(marked)", "status(marked)"}; !slices.Equal(order, want) {
		t.Errorf("writes %v, want %v", order, want)
	}
	if len(f.tracker.pending) != 0 || len(f.tracker.assumed) != 1 || f.tracker.assumed[0].Status.Allocation == nil {
		t.Errorf("tracker: pending %v, assumed %d", f.tracker.pending, len(f.tracker.assumed))
	}
	if !f.table.Live(m) || f.table.Busy(train) || !slices.Equal(f.done, []gang.Key{train}) {
		t.Errorf("live %v, busy %v, done %v", f.table.Live(m), f.table.Busy(train), f.done)
	}
}

// TestWriteOutcomes checks how a write ends under API faults and
// concurrent changes.
func TestWriteOutcomes(t *testing.T) {
	other := Mark{Gang: train, Attempt: "other"}
	for _, tc := range []struct {
		name  string
		claim *resourceapi.ResourceClaim
		// fail the next n status updates with err
		n   int
		err error
		// abandon the attempt while the write is in flight
		abandon bool
		// want
		failed, transient, allocated, marked bool
		event                                string
	}{
		{name: "transient errors are retried", n: 2, err: errTimeout, allocated: true, marked: true},
		{name: "conflicts are retried", n: 2, err: errConflict, allocated: true, marked: true},
		{name: "a refusal fails and takes the mark back", n: 100, err: errRefused, failed: true},
		{name: "timeouts past the backoff fail as transient", n: 100, err: errTimeout, failed: true, transient: true},
		{name: "abandoned in flight: given back when landed", abandon: true, event: ReasonClaimReleased},
		{name: "allocated meanwhile: left alone", claim: allocatedClaim(&other), failed: true, allocated: true, marked: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := tc.claim
			if claim == nil {
				claim = unallocated("shared")
			}
			claim.UID = "uid-shared"
			f := newFixture(t, claim)
			f.failWrites(true, tc.n, tc.err)
			var failed error
			if err := f.table.Write(train, unallocated("shared"), result("node-a"), func(err error) { failed = err }); err != nil {
				t.Fatal(err)
			}
			if tc.abandon {
				f.table.Abandon(train, "the test ended the attempt")
			}
			f.queue.drain()
			if (failed != nil) != tc.failed || (failed != nil && Transient(failed) != tc.transient) {
				t.Errorf("failed = %v, want failed %v transient %v", failed, tc.failed, tc.transient)
			}
			c := f.get(t, "shared")
			_, marked, _ := MarkOf(c)
			if (c.Status.Allocation != nil) != tc.allocated || marked != tc.marked {
				t.Errorf("allocated %v marked %v, want %v %v", c.Status.Allocation != nil, marked, tc.allocated, tc.marked)
			}
			if !tc.allocated && slices.Contains(c.Finalizers, resourceapi.Finalizer) {
				t.Errorf("finalizer left on an unallocated claim")
			}
			if tc.failed || tc.abandon {
				if got := f.table.Claims(train); len(got) != 0 {
					t.Errorf("table still holds %v", got)
				}
			}
			if len(f.tracker.pending) != 0 {
				t.Errorf("allocation left in flight")
			}
			evs := strings.Join(f.events(), "\n")
			if tc.event != "" && !strings.Contains(evs, tc.event) {
				t.Errorf("events %q, want %s", evs, tc.event)
			}
		})
	}
}

// TestFailedReleaseIsKeptAndRetried checks that a release refused by the
// API server keeps the claim in the table, marked and allocated, says so
// in an Event, and is tried again later until it succeeds.
func TestFailedReleaseIsKeptAndRetried(t *testing.T) {
	f := newFixture(t, unallocated("shared"))
	if err := f.table.Write(train, unallocated("shared"), result("node-a"), nil); err != nil {
		t.Fatal(err)
	}
	f.queue.drain()
	m, _, _ := MarkOf(f.get(t, "shared"))
	f.failWrites(true, 1, errRefused)
	f.table.Abandon(train, "the gang timed out")
	if f.table.Live(m) {
		t.Error("an abandoned allocation is live")
	}
	f.queue.drain()
	c := f.get(t, "shared")
	if have, _, _ := MarkOf(c); c.Status.Allocation == nil || have != m {
		t.Fatalf("after a refused release: allocated %v, mark %v", c.Status.Allocation != nil, have)
	}
	if got := f.table.Claims(train); len(got) != 1 {
		t.Fatalf("the table forgot a claim it could not give back: %v", got)
	}
	if evs := strings.Join(f.events(), "\n"); !strings.Contains(evs, ReasonClaimReleaseFailed) {
		t.Errorf("events %q, want %s", evs, ReasonClaimReleaseFailed)
	}
	f.clock.Step(5 * time.Second)
	f.queue.drain()
	c = f.get(t, "shared")
	if _, marked, _ := MarkOf(c); c.Status.Allocation != nil || marked {
		t.Errorf("after the retry: allocated %v, marked %v", c.Status.Allocation != nil, marked)
	}
	if got := f.table.Claims(train); len(got) != 0 {
		t.Errorf("table still holds %v", got)
	}
	evs := strings.Join(f.events(), "\n")
	if !strings.Contains(evs, ReasonClaimReleased) || !strings.Contains(evs, "the gang timed out") || !strings.Contains(evs, train.String()) {
		t.Errorf("events %q, want %s naming the gang and why", evs, ReasonClaimReleased)
	}
}

// TestAdoptionOutranksAnEarlierRelease checks that a claim an earlier
// write of the gang allocated is re-marked for the new attempt, and that
// the earlier write's release, running after, leaves it alone; and that
// an adoption that comes after the release fails without touching the
// claim.
func TestAdoptionOutranksAnEarlierRelease(t *testing.T) {
	earlier := Mark{Gang: train, Attempt: "earlier"}
	releaser := &Releaser{Backoff: wait.Backoff{Steps: 2, Duration: time.Microsecond}}

	t.Run("adopted first", func(t *testing.T) {
		claim := allocatedClaim(&earlier)
		claim.UID = "uid-shared"
		f := newFixture(t, claim)
		old, ok := f.table.Adoptable(train, claim)
		if !ok || old != earlier {
			t.Fatalf("Adoptable = %v, %v", old, ok)
		}
		if err := f.table.Adopt(train, claim, old, func(err error) { t.Errorf("adoption failed: %v", err) }); err != nil {
			t.Fatal(err)
		}
		f.queue.drain()
		releaser.Client = f.client.ResourceV1()
		if out, err := releaser.Release(context.Background(), types.NamespacedName{Namespace: "ns", Name: "shared"}, earlier); err != nil || out != NotOurs {
			t.Errorf("earlier release = %v, %v; want not ours", out, err)
		}
		c := f.get(t, "shared")
		m, _, _ := MarkOf(c)
		if c.Status.Allocation == nil || m.Attempt != "t1" || !f.table.Live(m) {
			t.Errorf("adopted claim: allocated %v, mark %v, live %v", c.Status.Allocation != nil, m, f.table.Live(m))
		}
	})

	t.Run("released first", func(t *testing.T) {
		claim := allocatedClaim(&earlier)
		claim.UID = "uid-shared"
		f := newFixture(t, claim)
		var failed error
		if err := f.table.Adopt(train, claim, earlier, func(err error) { failed = err }); err != nil {
			t.Fatal(err)
		}
		releaser.Client = f.client.ResourceV1()
		if out, err := releaser.Release(context.Background(), types.NamespacedName{Namespace: "ns", Name: "shared"}, earlier); err != nil || out != Released {
			t.Fatalf("earlier release = %v, %v", out, err)
		}
		f.queue.drain()
		if !errors.Is(failed, ErrClaimChanged) {
			t.Errorf("adoption failed with %v, want ErrClaimChanged", failed)
		}
		if c := f.get(t, "shared"); c.Status.Allocation != nil {
			t.Error("the claim got an allocation back")
		}
		if got := f.table.Claims(train); len(got) != 0 {
			t.Errorf("table still holds %v", got)
		}
	})
}

// TestLiveAndUsed checks which marks the table reports live to a
// reconciler.
func TestLiveAndUsed(t *testing.T) {
	f := newFixture(t, unallocated("a"), unallocated("b"))
	for _, n := range []string{"a", "b"} {
		if err := f.table.Write(train, unallocated(n), result("node-a"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.table.Write(train, unallocated("a"), result("node-a"), nil); !errors.Is(err, ErrBusy) {
		t.Errorf("a second write of a claim in flight: %v, want ErrBusy", err)
	}
	inFlight := Mark{Gang: train, Attempt: "t1"}
	if !f.table.Live(inFlight) {
		t.Error("a write in flight is not live")
	}
	f.queue.drain()
	if !f.table.Live(inFlight) || f.table.Live(Mark{Gang: train, Attempt: "unknown"}) {
		t.Error("Live is wrong for a held and an unknown mark")
	}
	f.table.Used(train)
	if f.table.Live(inFlight) || len(f.table.Claims(train)) != 0 {
		t.Error("allocations handed to the gang's pods are still held")
	}
}
