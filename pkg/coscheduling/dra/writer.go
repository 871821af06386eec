package dra

import (
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// The API writes of Allocations, each run by Options.Run off the
// scheduling cycle, and what the table does when each ends.

// ErrClaimChanged says the claim is no longer what the write or adoption was
// decided on (deleted, re-created, allocated or re-marked by someone
// else). Planning again reads it as it is now.
var ErrClaimChanged = errors.New("the claim changed since the plan read it")

// write writes e's mark and finalizer, then its allocation. A retry after
// a timeout that landed finds its own mark on an allocated claim and is
// done.
func (t *Allocations) write(e *entry) {
	claims := t.opts.Client.ResourceClaims(e.name.Namespace)
	var written *resourceapi.ResourceClaim
	err := retry.OnError(t.opts.Backoff, retriable, func() error {
		c, err := claims.Get(t.ctx, e.name.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c.UID != e.uid || c.DeletionTimestamp != nil {
			return fmt.Errorf("%w: it was deleted", ErrClaimChanged)
		}
		have, _, _ := MarkOf(c)
		if c.Status.Allocation != nil {
			if have == e.mark {
				written = c
				return nil
			}
			return fmt.Errorf("%w: it was allocated in the meantime", ErrClaimChanged)
		}
		if have != e.mark || !slices.Contains(c.Finalizers, resourceapi.Finalizer) {
			// The mark goes first: an allocation is never on the claim
			// without the mark that says whose it is.
			c = c.DeepCopy()
			e.mark.Annotate(c)
			if !slices.Contains(c.Finalizers, resourceapi.Finalizer) {
				c.Finalizers = append(c.Finalizers, resourceapi.Finalizer)
			}
			if c, err = claims.Update(t.ctx, c, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		c = c.DeepCopy()
		c.Status.Allocation = e.allocation.DeepCopy()
		written, err = claims.UpdateStatus(t.ctx, c, metav1.UpdateOptions{})
		return err
	})
	t.mu.Lock()
	if t.opts.Tracker != nil {
		// The allocation goes into the assume cache before it leaves the
		// in-flight set: no cycle in between may read its devices free.
		if written != nil {
			_ = t.opts.Tracker.AssumeClaimAfterAPICall(written) // an error means the informer has a newer copy
		}
		t.opts.Tracker.MaybeRemoveClaimPendingAllocation(e.uid, true)
	}
	var failed func(error)
	var release bool
	switch {
	case !t.currentLocked(e):
	case err == nil && e.abandoned:
		e.phase, release = releasing, true
	case err == nil:
		e.phase = held
	default:
		// The mark may be on the claim without the allocation, or the
		// allocation may have landed after a timeout that was given up:
		// give back whatever carries this write's mark.
		failed = e.failed
		e.phase, e.abandoned, release = releasing, true, true
		e.why = fmt.Sprintf("writing it failed: %v", err)
	}
	t.mu.Unlock()
	if err != nil {
		t.opts.Logger.V(2).Info("Could not write a claim's allocation", "claim", e.name, "podGroup", e.mark.Gang, "err", err)
	} else {
		t.opts.Logger.V(3).Info("Wrote a claim's allocation", "claim", e.name, "podGroup", e.mark.Gang, "attempt", e.mark.Attempt)
	}
	t.settle(e, failed, err, release)
}

// settle ends a write or an adoption once the table's lock is let go: it
// tells the caller's failed why it failed, then gives back e when release
// is set (the release tells Options.Done), or else tells Options.Done now.
func (t *Allocations) settle(e *entry, failed func(error), err error, release bool) {
	if failed != nil {
		failed(err)
	}
	if release {
		t.release(e)
		return
	}
	t.opts.Done(e.mark.Gang)
}

// adopt replaces e.old with e.mark on a claim that still holds the
// allocation e.old's write made. A conflict re-reads and decides again.
func (t *Allocations) adopt(e *entry) {
	claims := t.opts.Client.ResourceClaims(e.name.Namespace)
	var adopted *resourceapi.ResourceClaim
	err := retry.OnError(t.opts.Backoff, retriable, func() error {
		c, err := claims.Get(t.ctx, e.name.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		have, _, _ := MarkOf(c)
		switch {
		case c.UID != e.uid || c.DeletionTimestamp != nil:
			return fmt.Errorf("%w: it was deleted", ErrClaimChanged)
		case c.Status.Allocation != nil && have == e.mark:
			adopted = c // an update that timed out landed
			return nil
		case c.Status.Allocation == nil || have != e.old:
			return fmt.Errorf("%w: the allocation of the earlier attempt is no longer on it", ErrClaimChanged)
		}
		c = c.DeepCopy()
		e.mark.Annotate(c)
		adopted, err = claims.Update(t.ctx, c, metav1.UpdateOptions{})
		return err
	})
	t.mu.Lock()
	if adopted != nil && t.opts.Tracker != nil {
		_ = t.opts.Tracker.AssumeClaimAfterAPICall(adopted)
	}
	var failed func(error)
	var release bool
	switch {
	case !t.currentLocked(e):
	case err == nil && e.abandoned:
		e.phase, release = releasing, true
	case err == nil:
		e.phase = held
	case errors.Is(err, ErrClaimChanged) || apierrors.IsNotFound(err):
		// Nothing of the earlier write is left to adopt or give back.
		failed = e.failed
		delete(t.byName, e.name)
	default:
		// The claim may still carry the earlier mark, or (an update
		// that timed out and landed) ours: give back ours, and leave the
		// earlier one to a reconciler, as before.
		failed = e.failed
		e.phase, e.abandoned, release = releasing, true, true
		e.why = fmt.Sprintf("adopting it failed: %v", err)
	}
	t.mu.Unlock()
	t.settle(e, failed, err, release)
}

// release gives back e's allocation through the Releaser, the one place
// that decides whether it may be taken away. The entry is forgotten only
// once the release has an outcome; a release that fails leaves it
// stranded, tried again after a delay that doubles.
func (t *Allocations) release(e *entry) {
	outcome, err := t.releaser.Release(t.ctx, e.name, e.mark)
	t.mu.Lock()
	if !t.currentLocked(e) {
		t.mu.Unlock()
		t.opts.Done(e.mark.Gang)
		return
	}
	if err != nil && t.ctx.Err() != nil {
		// The scheduler is stopping: the mark stays on the claim for the
		// next leader's reconciler, and no timer outlives the plugin.
		e.phase = stranded
		t.mu.Unlock()
		t.opts.Done(e.mark.Gang)
		return
	}
	if err != nil {
		e.failures++
		delay := t.opts.RetryAfter
		for i := 1; i < e.failures && delay < t.opts.MaxRetryAfter; i++ {
			delay *= 2
		}
		delay = min(delay, t.opts.MaxRetryAfter)
		e.phase = stranded
		t.mu.Unlock()
		// The timer is set without the lock: a fake clock runs the
		// callback, which takes it, under its own.
		timer := t.opts.Clock.AfterFunc(delay, func() { t.retry(e) })
		t.mu.Lock()
		if t.currentLocked(e) && e.phase == stranded {
			e.retry = timer
			timer = nil
		}
		t.mu.Unlock()
		stopTimer(timer) // adopted or rewritten meanwhile
		t.opts.Logger.Error(err, "Could not give back a claim's allocation; trying again later", "claim", e.name, "podGroup", e.mark.Gang, "retryIn", delay)
		t.event(e, v1.EventTypeWarning, ReasonClaimReleaseFailed, "could not give back the allocation gpu-gang wrote for %s (%s): %v; trying again in %s",
			e.mark.Gang, e.why, err, delay)
		t.opts.Done(e.mark.Gang)
		return
	}
	delete(t.byName, e.name)
	t.mu.Unlock()
	t.opts.Logger.V(3).Info("Gave back a claim's allocation", "claim", e.name, "podGroup", e.mark.Gang, "outcome", outcome, "reason", e.why)
	if outcome == Released {
		t.event(e, v1.EventTypeNormal, ReasonClaimReleased, "gave back the allocation gpu-gang wrote for %s: %s", e.mark.Gang, e.why)
	}
	t.opts.Done(e.mark.Gang)
}

// retry tries a stranded release again, unless a later attempt took the
// claim meanwhile.
func (t *Allocations) retry(e *entry) {
	t.mu.Lock()
	if !t.currentLocked(e) || e.phase != stranded {
		t.mu.Unlock()
		return
	}
	e.phase = releasing
	t.mu.Unlock()
	t.opts.Run(func() { t.release(e) })
}

func (t *Allocations) event(e *entry, eventType, reason, note string, args ...any) {
	if t.opts.Recorder == nil {
		return
	}
	regarding := &resourceapi.ResourceClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{Namespace: e.name.Namespace, Name: e.name.Name, UID: e.uid},
	}
	t.opts.Recorder.Eventf(regarding, nil, eventType, reason, "Release", note, args...)
}
