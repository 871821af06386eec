package dra

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// DefaultGrace is how long a marked allocation may sit with no pod
// reserving it and no attempt planning it before the reconciler gives it
// back.
const DefaultGrace = 60 * time.Second

// minPeriod bounds how often the reconciler lists claims, however short
// the grace.
const minPeriod = 5 * time.Second

// LiveAttempts says whether an attempt of this process still plans to use,
// or is writing, the allocation a mark names. The claim write path's
// *Allocations implements it.
type LiveAttempts interface {
	Live(Mark) bool
}

// releaser is Releaser.Release, the one owner of "may this allocation be
// taken away".
type releaser interface {
	Release(ctx context.Context, name types.NamespacedName, m Mark) (Outcome, error)
}

// Reconciler gives back allocations gpu-gang wrote and then lost track of:
// its process restarted or lost leadership between allocating a claim and
// binding the gang, a release met an error it could not retry past, or the
// gang's members went away while no attempt was in flight. The claim
// controller deallocates a claim only when the last pod in reservedFor
// leaves, and such a claim never had one, so without the reconciler it
// would pin its node's devices for good.
//
// A claim is given back once it has carried the same mark, with no pod in
// reservedFor and no live attempt planning it, for the whole grace period,
// measured from when this process first saw it so. It is safe even while
// the gang waits for its members: no pod can be using devices a claim does
// not reserve for it (the kubelet prepares only reserved claims), the
// release is conditional on the mark and the claim's resourceVersion (a
// member that reserves the claim meanwhile makes the write conflict, and
// the release finds it in use), and the gang's next attempt plans the
// claim again and allocates it anew.
//
// Only the process that schedules may write: a standby's attempts are not
// the leader's, so it cannot know what the leader plans. Run waits for
// Lead, which the scheduler calls when its scheduling loop starts.
type Reconciler struct {
	claims   resourcelisters.ResourceClaimLister
	release  releaser
	recorder events.EventRecorder
	clock    clock.WithTicker
	grace    time.Duration

	// lead is closed by Lead.
	lead     chan struct{}
	leadOnce sync.Once

	// mu guards what follows, which only passes use.
	mu sync.Mutex
	// live are the attempts of every plugin that shares the reconciler;
	// a mark is live if any says so.
	live []LiveAttempts
	// since is when each claim was first seen unreserved and unplanned
	// with its mark; an entry goes when the claim is seen otherwise.
	since map[types.NamespacedName]sighting
	// warned holds the mark of each claim whose bad mark has been
	// reported, so that it is reported once per value.
	warned map[types.NamespacedName]string
}

type sighting struct {
	mark Mark
	at   time.Time
}

// NewReconciler builds a reconciler over the claims claims lists, releasing
// through release and recording Events with recorder. grace is the
// ClaimReleaseGraceSeconds argument.
func NewReconciler(claims resourcelisters.ResourceClaimLister, release *Releaser, recorder events.EventRecorder,
	c clock.WithTicker, grace time.Duration) *Reconciler {
	return newReconciler(claims, release, recorder, c, grace)
}

func newReconciler(claims resourcelisters.ResourceClaimLister, release releaser, recorder events.EventRecorder,
	c clock.WithTicker, grace time.Duration) *Reconciler {
	return &Reconciler{
		claims:   claims,
		release:  release,
		recorder: recorder,
		clock:    c,
		grace:    grace,
		lead:     make(chan struct{}),
		since:    map[types.NamespacedName]sighting{},
		warned:   map[types.NamespacedName]string{},
	}
}

// Track adds a plugin's live attempts: the reconciler leaves alone any
// allocation one of them plans.
func (r *Reconciler) Track(live LiveAttempts) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.live = append(r.live, live)
}

// Lead tells the reconciler that its process now schedules, and may write.
// Calls after the first do nothing.
func (r *Reconciler) Lead() {
	r.leadOnce.Do(func() { close(r.lead) })
}

// Period is how often Run reconciles: a quarter of the grace, at least
// every 5 s. A leaked claim is given back within the grace and one period
// of the process starting to lead.
func (r *Reconciler) Period() time.Duration {
	return max(r.grace/4, minPeriod)
}

// Run reconciles once the process leads, then every Period, until ctx
// ends. synced reports whether the claim informer has listed the claims;
// the scheduler starts its loop only after its informers synced, so it
// is a guard against a lister that never was.
func (r *Reconciler) Run(ctx context.Context, synced func() bool) {
	logger := klog.FromContext(ctx)
	select {
	case <-ctx.Done():
		return
	case <-r.lead:
	}
	ticker := r.clock.NewTicker(r.Period())
	defer ticker.Stop()
	logger.V(2).Info("Reconciling the ResourceClaims gpu-gang allocated", "grace", r.grace, "period", r.Period())
	for {
		if synced() {
			r.Pass(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

// Pass reconciles every claim once, in namespace/name order.
func (r *Reconciler) Pass(ctx context.Context) {
	logger := klog.FromContext(ctx)
	claims, err := r.claims.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Listing ResourceClaims to reconcile")
		return
	}
	// The lister hands out its shared copies: sort a slice of our own.
	claims = append([]*resourceapi.ResourceClaim(nil), claims...)
	sortClaims(claims)
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	seen := make(map[types.NamespacedName]bool, len(r.since))
	marked := make(map[types.NamespacedName]bool, len(r.warned))
	for _, c := range claims {
		name := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
		m, ok, err := MarkOf(c)
		if !ok {
			continue
		}
		marked[name] = true
		if err != nil {
			r.warn(ctx, c, name, err)
			continue
		}
		delete(r.warned, name)
		if len(c.Status.ReservedFor) > 0 || r.liveLocked(m) {
			continue
		}
		seen[name] = true
		s, ok := r.since[name]
		if !ok || s.mark != m {
			s = sighting{mark: m, at: now}
			r.since[name] = s
		}
		if now.Sub(s.at) < r.grace {
			continue
		}
		if r.releaseOne(ctx, c, name, m) {
			delete(r.since, name)
		}
		// A release that failed keeps its sighting: the next pass tries
		// again, not a whole grace later.
	}
	for name := range r.since {
		if !seen[name] {
			delete(r.since, name)
		}
	}
	for name := range r.warned {
		if !marked[name] {
			delete(r.warned, name)
		}
	}
}

// releaseOne gives back the allocation marked m on c.
func (r *Reconciler) releaseOne(ctx context.Context, c *resourceapi.ResourceClaim, name types.NamespacedName, m Mark) (done bool) {
	logger := klog.FromContext(ctx)
	outcome, err := r.release.Release(ctx, name, m)
	if err != nil {
		// The claim keeps its mark; the next pass finds it again.
		logger.Error(err, "Could not give back an allocation no pod of its gang reserved", "claim", name, "podGroup", m.Gang)
		return false
	}
	if outcome != Released {
		logger.V(4).Info("Left an allocation gpu-gang wrote", "claim", name, "podGroup", m.Gang, "outcome", outcome)
		return true
	}
	if c.Status.Allocation == nil {
		// Only the mark of an allocation given back earlier was left.
		logger.V(4).Info("Cleared the mark of an allocation already given back", "claim", name, "podGroup", m.Gang)
		return true
	}
	logger.V(2).Info("Gave back an allocation no pod of its gang reserved", "claim", name, "podGroup", m.Gang, "grace", r.grace)
	r.recorder.Eventf(c, nil, v1.EventTypeNormal, ReasonClaimReleased, "Release",
		"gave back the allocation gpu-gang wrote for gang %s: no pod of gang %s reserved it for %s and no attempt plans it; the gang's next attempt allocates it again",
		m.Gang.Name, m.Gang.Name, r.grace)
	return true
}

// warn reports a mark that cannot be read, once per value.
func (r *Reconciler) warn(ctx context.Context, c *resourceapi.ResourceClaim, name types.NamespacedName, err error) {
	value := c.Annotations[scheduling.AnnotationClaimAllocatedFor] + "\x00" + c.Annotations[scheduling.AnnotationClaimAllocationAttempt]
	if r.warned[name] == value {
		return
	}
	r.warned[name] = value
	klog.FromContext(ctx).V(2).Info("ResourceClaim carries a mark gpu-gang cannot read", "claim", name, "err", err)
	r.recorder.Eventf(c, nil, v1.EventTypeWarning, ReasonInvalidClaimMark, "Reconcile",
		"%v; gpu-gang leaves the claim as it is: remove both annotations (kubectl annotate resourceclaim -n %s %s %s- %s-), and deallocate the claim if no pod uses it",
		err, c.Namespace, c.Name, scheduling.AnnotationClaimAllocatedFor, scheduling.AnnotationClaimAllocationAttempt)
}

func (r *Reconciler) liveLocked(m Mark) bool {
	for _, l := range r.live {
		if l.Live(m) {
			return true
		}
	}
	return false
}

func sortClaims(claims []*resourceapi.ResourceClaim) {
	slices.SortFunc(claims, func(a, b *resourceapi.ResourceClaim) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
}

// reconcilers holds the reconciler of each scheduler, keyed by its DRA
// manager, so that the Coscheduling plugins of all its profiles share one:
// a plugin's attempts are live for the others' reconciler too.
var reconcilers = struct {
	mu    sync.Mutex
	byKey map[any]*Reconciler
}{byKey: map[any]*Reconciler{}}

// ReconcilerFor returns the reconciler of the scheduler key names (a
// plugin handle's SharedDRAManager), the same to every plugin that asks
// with the same key. The first call builds it with build and runs it until
// ctx ends; it is then forgotten.
func ReconcilerFor(ctx context.Context, key any, build func() *Reconciler, synced func() bool) *Reconciler {
	reconcilers.mu.Lock()
	defer reconcilers.mu.Unlock()
	if r, ok := reconcilers.byKey[key]; ok {
		return r
	}
	r := build()
	reconcilers.byKey[key] = r
	go func() {
		r.Run(ctx, synced)
		reconcilers.mu.Lock()
		defer reconcilers.mu.Unlock()
		if reconcilers.byKey[key] == r {
			delete(reconcilers.byKey, key)
		}
	}()
	return r
}
