package dra

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	resourceclient "k8s.io/client-go/kubernetes/typed/resource/v1"
	"k8s.io/client-go/util/retry"
	fwk "k8s.io/kube-scheduler/framework"
)

// Outcome is what a release found and did.
type Outcome int

const (
	// Released: the claim carried the mark; its allocation, finalizer and
	// mark are gone.
	Released Outcome = iota
	// Gone: the claim no longer exists.
	Gone
	// NotOurs: the claim carries no mark, or another write's: a later
	// attempt, or the claim controller, owns what it holds now.
	NotOurs
	// InUse: a pod reserves the claim; the claim controller gives it back
	// when the last one leaves.
	InUse
)

func (o Outcome) String() string {
	switch o {
	case Released:
		return "released"
	case Gone:
		return "gone"
	case NotOurs:
		return "not ours"
	case InUse:
		return "in use"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Releaser gives back allocations gpu-gang wrote. It is the one place that
// decides whether an allocation on a claim may be taken away: only when the
// claim still carries the mark of the write being given back and no pod
// reserves it.
type Releaser struct {
	// Client writes the claims.
	Client resourceclient.ResourceClaimsGetter
	// Tracker is the scheduler's claim assume cache; a release tells it,
	// so that no cycle reads the given-back allocation as still held.
	// Nil in tests that have no DRA manager.
	Tracker fwk.ResourceClaimTracker
	// Backoff paces the retries of conflicts and transient API errors.
	Backoff wait.Backoff
}

// DefaultBackoff retries for about 10 s.
var DefaultBackoff = wait.Backoff{Steps: 8, Duration: 50 * time.Millisecond, Factor: 2, Jitter: 0.1}

// Release gives back the allocation that the write marked m made on the
// claim. A conflict re-reads the claim and decides again; a transient API
// error (a timeout, throttling, a server error) is retried with the
// backoff. An error returned means the claim may still carry the
// allocation and its mark, for the reconciler to find.
func (r *Releaser) Release(ctx context.Context, name types.NamespacedName, m Mark) (Outcome, error) {
	claims := r.Client.ResourceClaims(name.Namespace)
	var outcome Outcome
	err := retry.OnError(r.Backoff, retriable, func() error {
		c, err := claims.Get(ctx, name.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			outcome = Gone
			return nil
		}
		if err != nil {
			return err
		}
		have, ok, _ := MarkOf(c)
		switch {
		case !ok || have != m:
			outcome = NotOurs
			return nil
		case len(c.Status.ReservedFor) > 0:
			outcome = InUse
			return nil
		}
		if c.Status.Allocation != nil {
			c = c.DeepCopy()
			c.Status.Allocation = nil
			if c, err = claims.UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
				return err
			}
			r.assume(c)
		}
		// The mark and the finalizer go in one write once the allocation
		// is gone: a claim left with the mark and no allocation is
		// harmless, and the next try clears it.
		c = c.DeepCopy()
		Clear(c)
		if i := slices.Index(c.Finalizers, resourceapi.Finalizer); i >= 0 {
			c.Finalizers = slices.Delete(c.Finalizers, i, i+1)
		}
		if c, err = claims.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
			return err
		}
		r.assume(c)
		outcome = Released
		return nil
	})
	return outcome, err
}

func (r *Releaser) assume(c *resourceapi.ResourceClaim) {
	if r.Tracker != nil {
		// An error means the informer already has a newer copy.
		_ = r.Tracker.AssumeClaimAfterAPICall(c)
	}
}

// retriable reports whether an API error may pass if the call is made
// again: a conflict (read again and decide again) or a transient failure.
func retriable(err error) bool {
	return apierrors.IsConflict(err) || Transient(err)
}

// Transient reports whether err is a failure that says nothing about the
// request itself: an API timeout, throttling, an internal or unavailable
// server, a connection that broke, or the allocator's read of allocated
// devices that kept racing changes.
func Transient(err error) bool {
	var t *transientError
	return errors.As(err, &t) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsUnexpectedServerError(err) ||
		net.IsConnectionReset(err) || net.IsProbableEOF(err) || net.IsConnectionRefused(err)
}
