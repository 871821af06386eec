package dra

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	resourceclient "k8s.io/client-go/kubernetes/typed/resource/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// Allocations are the allocations this process writes, holds for a gang's
// attempt in flight, or still has to give back; and the owner of every API
// write they need. No write happens in the caller's goroutine: a
// scheduling cycle hands a computed allocation to Write and goes on, the
// tracker shows the allocation in flight meanwhile (so other cycles see its
// devices taken and DynamicResources tells the claim's pods to wait), and
// Options.Done hears when the write landed or failed.
//
// One entry per claim, in one of these phases:
//
//	writing ──landed──▶ held ──attempt failed (Abandon)──▶ releasing ──┬──▶ (gone)
//	   │                  ▲                                   ▲       └─failed─▶ stranded ─timer─▶ releasing
//	   └─failed───────────┼──────────────────────────────────┘                     │
//	adopting ──landed─────┘                                                        └─a later attempt adopts or rewrites
//
// An attempt that ends while its write is in flight (Abandon) gives the
// allocation back as soon as it lands; an attempt that succeeds (Used)
// hands its allocations to its pods, which reserve them, and the table
// forgets them. An entry is forgotten only once its release has an outcome
// (released, gone, not ours, in use): a release that fails keeps the
// entry, and the mark stays on the claim, so it is tried again, and a
// reconciler finds the claim if this process ends first.
//
// Safe for concurrent use.
type Allocations struct {
	opts     Options
	ctx      context.Context
	releaser *Releaser

	// mu guards byName and every entry in it. Never held while calling
	// out (the API, the tracker excepted, Options.Done, a failure
	// callback).
	mu     sync.Mutex
	byName map[types.NamespacedName]*entry
}

// Options configure Allocations.
type Options struct {
	// Client writes the claims.
	Client resourceclient.ResourceClaimsGetter
	// Tracker is the scheduler's claim assume cache; nil in tests
	// without a DRA manager.
	Tracker fwk.ResourceClaimTracker
	// Recorder records an Event on each claim given back; nil records
	// none.
	Recorder events.EventRecorder
	// Clock times the retries of releases that failed.
	Clock clock.WithDelayedExecution
	// Backoff paces the retries of conflicts and transient API errors
	// inside one write or release; DefaultBackoff when zero.
	Backoff wait.Backoff
	// RetryAfter is how long a release that failed waits before it is
	// tried again; it doubles with each failure, up to MaxRetryAfter.
	// 5 s and 5 min when zero.
	RetryAfter, MaxRetryAfter time.Duration
	// Done is called when a write, adoption or release for the gang
	// ended, either way: members that waited for it may schedule.
	Done func(gang.Key)
	// Run runs a write or a release; nil runs it in a goroutine of its
	// own. Tests run them in an order of their choosing.
	Run func(func())
	// NewToken makes the token of a write; nil makes a UUID.
	NewToken func() string
	// Logger logs what outlives a cycle.
	Logger klog.Logger
}

type phase int

const (
	// writing: the allocation is being written.
	writing phase = iota
	// adopting: the mark of an earlier write of the gang is being
	// replaced with this attempt's.
	adopting
	// held: written or adopted; the attempt in flight plans with it.
	held
	// releasing: being given back.
	releasing
	// stranded: a release failed; it is tried again when the timer
	// fires, unless a later attempt of the gang takes the claim first.
	stranded
)

// entry is one claim's allocation. Guarded by Allocations.mu.
type entry struct {
	name types.NamespacedName
	uid  types.UID
	// mark is the write's (writing, held, releasing, stranded) or the one
	// replacing old (adopting).
	mark  Mark
	old   Mark
	phase phase
	// allocation is what writing writes.
	allocation *resourceapi.AllocationResult
	// abandoned: the attempt ended while writing or adopting; the
	// allocation is given back once that lands.
	abandoned bool
	// why the allocation is given back, for the Event.
	why string
	// failed hears why a write or adoption failed.
	failed func(error)
	// failures counts releases that failed, for the retry's delay.
	failures int
	retry    clock.Timer
}

// NewAllocations returns an empty table whose writes run until ctx ends.
func NewAllocations(ctx context.Context, o Options) *Allocations {
	if o.Backoff.Steps == 0 {
		o.Backoff = DefaultBackoff
	}
	if o.RetryAfter == 0 {
		o.RetryAfter = 5 * time.Second
	}
	if o.MaxRetryAfter == 0 {
		o.MaxRetryAfter = 5 * time.Minute
	}
	if o.Run == nil {
		o.Run = func(f func()) { go f() }
	}
	if o.NewToken == nil {
		o.NewToken = func() string { return string(uuid.NewUUID()) }
	}
	if o.Done == nil {
		o.Done = func(gang.Key) {}
	}
	return &Allocations{
		opts:     o,
		ctx:      ctx,
		releaser: &Releaser{Client: o.Client, Tracker: o.Tracker, Backoff: o.Backoff},
		byName:   map[types.NamespacedName]*entry{},
	}
}

// ErrBusy: the claim's allocation is being written or given back; the
// caller tries again when Options.Done says so.
var ErrBusy = errors.New("its allocation is being written or given back")

// Write hands the writing of allocation on claim for gang's attempt in
// flight to the table, and shows it in flight in the tracker at once. The
// write marks the claim with a new token, with the finalizer, before it
// writes the allocation. failed hears, once, why the write failed (after
// its transient errors were retried); Options.Done hears when it ended.
// A claim whose entry is busy is refused with ErrBusy.
func (t *Allocations) Write(key gang.Key, claim *resourceapi.ResourceClaim, allocation *resourceapi.AllocationResult, failed func(error)) error {
	name := types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}
	t.mu.Lock()
	stale, err := t.takeLocked(name)
	if err != nil {
		t.mu.Unlock()
		return err
	}
	defer stopTimer(stale)
	e := &entry{name: name, uid: claim.UID, mark: Mark{Gang: key, Attempt: t.opts.NewToken()}, phase: writing,
		allocation: allocation.DeepCopy(), failed: failed}
	t.byName[name] = e
	if t.opts.Tracker != nil {
		pending := claim.DeepCopy()
		pending.Status.Allocation = allocation.DeepCopy()
		if err := t.opts.Tracker.SignalClaimPendingAllocation(claim.UID, pending); err != nil {
			delete(t.byName, name)
			t.mu.Unlock()
			return fmt.Errorf("showing the allocation in flight: %w", err)
		}
	}
	t.mu.Unlock()
	t.opts.Run(func() { t.write(e) })
	return nil
}

// Adoptable reports whether gang's attempt in flight must adopt claim
// before its pods use it: the claim holds an allocation that an earlier
// write for the gang made (an attempt that failed, or another process's),
// that no pod reserves and that this process no longer holds for a live
// attempt. Its release may be pending, here or in that other process; the
// adoption replaces the mark, so such a release finds NotOurs and never
// takes the allocation from under the new attempt's pods.
func (t *Allocations) Adoptable(key gang.Key, claim *resourceapi.ResourceClaim) (Mark, bool) {
	if claim.Status.Allocation == nil || len(claim.Status.ReservedFor) > 0 {
		return Mark{}, false
	}
	m, ok, err := MarkOf(claim)
	if !ok || err != nil || m.Gang != key {
		return Mark{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.byName[types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}]; ok && e.phase != stranded {
		return Mark{}, false // live, or being written or given back
	}
	return m, true
}

// Adopt hands the adoption of claim, allocated by the write marked old,
// to gang's attempt in flight: the table writes a new token on it (only
// while the claim still carries old and its allocation) and holds it for
// the attempt. failed hears why it could not.
func (t *Allocations) Adopt(key gang.Key, claim *resourceapi.ResourceClaim, old Mark, failed func(error)) error {
	name := types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}
	t.mu.Lock()
	stale, err := t.takeLocked(name)
	if err != nil {
		t.mu.Unlock()
		return err
	}
	defer stopTimer(stale)
	e := &entry{name: name, uid: claim.UID, mark: Mark{Gang: key, Attempt: t.opts.NewToken()}, old: old, phase: adopting, failed: failed}
	t.byName[name] = e
	t.mu.Unlock()
	t.opts.Run(func() { t.adopt(e) })
	return nil
}

// takeLocked frees name for a new entry: none, or a stranded one, whose
// retry timer it returns for the caller to stop once it let go of the lock
// (a fake clock runs timers under its own lock, and they take ours). The
// new write or adoption replaces the stranded mark; if the claim still
// holds the stranded allocation, the write fails and leaves that mark for
// a reconciler.
func (t *Allocations) takeLocked(name types.NamespacedName) (clock.Timer, error) {
	e, ok := t.byName[name]
	if !ok {
		return nil, nil
	}
	if e.phase != stranded {
		return nil, ErrBusy
	}
	delete(t.byName, name)
	return e.retry, nil
}

// stopTimer stops a retry that is no longer wanted; the retry would find
// its entry replaced and do nothing, but need not wait for that.
func stopTimer(timer clock.Timer) {
	if timer != nil {
		timer.Stop()
	}
}

// Busy reports whether a write, adoption or release of one of gang's
// claims is in flight: its members wait for it, so that none reserves
// with a claim that is about to change.
func (t *Allocations) Busy(key gang.Key) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.byName {
		if e.mark.Gang == key && e.phase != held && e.phase != stranded {
			return true
		}
	}
	return false
}

// Live reports whether an attempt of this process still plans to use, or
// is writing, the allocation marked m. A reconciler leaves such a claim
// alone.
func (t *Allocations) Live(m Mark) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.byName {
		if e.mark == m {
			return !e.abandoned && (e.phase == writing || e.phase == adopting || e.phase == held)
		}
	}
	return false
}

// Used hands gang's held allocations to the pods of its attempt, which
// succeeded: they reserve the claims, and the claim controller gives them
// back when the last one leaves. The table forgets them.
func (t *Allocations) Used(key gang.Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, e := range t.byName {
		if e.mark.Gang == key && e.phase == held {
			delete(t.byName, name)
		}
	}
}

// Abandon gives back what gang's attempt, which ended, holds: held
// allocations are released now, writes and adoptions in flight as soon as
// they land. Releases run off the caller's goroutine; why is said in the
// claim's Event.
func (t *Allocations) Abandon(key gang.Key, why string) {
	t.mu.Lock()
	var start []*entry
	for _, e := range t.sortedLocked() {
		if e.mark.Gang != key {
			continue
		}
		switch e.phase {
		case writing, adopting:
			e.abandoned, e.why = true, why
		case held:
			e.phase, e.why = releasing, why
			start = append(start, e)
		}
	}
	t.mu.Unlock()
	for _, e := range start {
		t.opts.Run(func() { t.release(e) })
	}
}

// Claims lists the claims the table knows of gang, in name order, for
// logs and tests.
func (t *Allocations) Claims(key gang.Key) []types.NamespacedName {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []types.NamespacedName
	for _, e := range t.sortedLocked() {
		if e.mark.Gang == key {
			out = append(out, e.name)
		}
	}
	return out
}

// sortedLocked returns the entries in claim name order: what reaches a
// decision or the API never comes from map order.
func (t *Allocations) sortedLocked() []*entry {
	out := make([]*entry, 0, len(t.byName))
	for _, e := range t.byName {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *entry) int {
		if c := strings.Compare(a.name.Namespace, b.name.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.name.Name, b.name.Name)
	})
	return out
}

// current reports whether e is still the table's entry for its claim: a
// later write may have replaced a stranded one.
func (t *Allocations) currentLocked(e *entry) bool {
	return t.byName[e.name] == e
}
