package coscheduling

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
)

// Reserve counts the member and takes its place in the gang's plan.
func (pl *Plugin) Reserve(_ context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	key, ok := pl.unitOf(pod)
	if !ok {
		return nil
	}
	s, err := readState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	pl.ledger.Reservations.Reserve(key, pod.UID, nodeName, s.request)
	// DynamicResources reserved before: it holds the devices its fence
	// steered it to.
	pl.fences.Done(pod.UID)
	return nil
}

// abandon gives back what gang's attempt, which ended, wrote or fenced.
func (pl *Plugin) abandon(key gang.Key, why string) {
	pl.claims.Abandon(key, why)
	pl.fences.Forget(key)
}

// Unreserve forgets the member. A member of the attempt in flight that gives
// back its node (its Permit wait timed out, it failed to bind, it was
// deleted) fails the whole attempt. The ledger finds the reservation by the
// pod's UID, under the unit it was made under: the pod's hierarchy may no
// longer say which that was (a composite above its PodGroup was deleted).
func (pl *Plugin) Unreserve(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) {
	key, inFlight, released := pl.ledger.Reservations.Unreserve(pod.UID)
	if released {
		// Binding is one API call per member: the API server refused this
		// one, or the pod went away, after its siblings were let go. The
		// member is retried next to its running gang.
		if spec, ok := pl.lookup(key); ok {
			pl.events.gang(spec, pod, v1.EventTypeWarning, ReasonMemberNotBound,
				"member %s was let go with its gang but did not bind to node %s (see its FailedScheduling Event); it is tried again next to the gang", pod.Name, nodeName)
		}
		return
	}
	if !inFlight {
		return
	}
	if pl.podGone(pod) {
		// The scheduler rejects a deleted pod's Permit wait; say so, and
		// retry at once: nothing is wrong with the plan.
		pl.failGang(ctx, key, ReasonMemberDeleted, fmt.Sprintf("member %s was deleted while it waited for its gang", pod.Name), false)
		return
	}
	if pl.ledger.Reservations.Expired(key) {
		pl.failGang(ctx, key, ReasonGangTimedOut, "the gang did not reach quorum within its schedule timeout", true)
		return
	}
	pl.failGang(ctx, key, ReasonGangRejected, fmt.Sprintf("member %s gave back its reservation on node %s", pod.Name, nodeName), true)
}

// Permit lets a member bind once quorum is reserved, and then all its waiting
// siblings too. A running gang's member binds at once. Until then the member
// waits, at most until its gang's attempt times out.
func (pl *Plugin) Permit(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) (*fwk.Status, time.Duration) {
	key, ok := pl.unitOf(pod)
	if !ok {
		return nil, 0
	}
	logger := klog.FromContext(ctx)
	if !pl.nodeExists(nodeName) {
		// The cycle's snapshot still had a node that was just deleted.
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("node %s was deleted", nodeName)), 0
	}
	u, status := pl.unit(pod, key)
	if status != nil {
		return status, 0
	}
	view := pl.viewOf(key)
	wasRunning := pl.ledger.Reservations.Admitted(key)
	q := u.Quorum(view)
	census := q.Census
	ready := q.Placed || wasRunning
	if ready && wasRunning {
		// A segment, or a child of a composite, that joins a running
		// unit still starts whole.
		ready = u.Ready(view, pod)
	}
	if ready {
		if gone := pl.goneReservation(key); gone != "" {
			// A sibling reserved a node that was deleted before the gang
			// was let go: letting it bind would bind it to nothing.
			why := fmt.Sprintf("node %s, which a member had reserved, was deleted", gone)
			pl.failGang(ctx, key, ReasonGangRejected, why, false)
			return fwk.NewStatus(fwk.Unschedulable, why), 0
		}
		pl.allowGang(logger, u, pod, nodeName, census, wasRunning)
		return nil, 0
	}
	wait, ok := pl.ledger.Reservations.Remaining(key)
	if !ok {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s has no plan in flight", key)), 0
	}
	logger.V(4).Info("Member waits for its gang", "pod", klog.KObj(pod), "podGroup", key, "placed", census.Placed(), "need", q.Need, "wait", wait)
	return fwk.NewStatus(fwk.Wait, u.WaitingToBind(q)), wait
}

// podGone reports whether the scheduler's informer no longer has pod, or
// has it being deleted.
func (pl *Plugin) podGone(pod *v1.Pod) bool {
	p, err := pl.podLister.Pods(pod.Namespace).Get(pod.Name)
	return err != nil || p.UID != pod.UID || p.DeletionTimestamp != nil
}

// nodeExists reports whether the node informer has the node.
func (pl *Plugin) nodeExists(name string) bool {
	_, err := pl.nodeLister.Get(name)
	return err == nil
}

// goneReservation returns a node that a member of the gang's attempt in
// flight reserved and that no longer exists, or "".
func (pl *Plugin) goneReservation(key gang.Key) string {
	for _, n := range pl.ledger.Reservations.InFlightNodes(key) {
		if !pl.nodeExists(n) {
			return n
		}
	}
	return ""
}

// allowGang ends the gang's attempt in success and releases its waiting
// members. For a gang that was running already, pod is a replacement or an
// elastic member, and the Event says where it went.
func (pl *Plugin) allowGang(logger klog.Logger, u gang.Unit, pod *v1.Pod, nodeName string, c gang.Census, wasRunning bool) {
	spec := u.Spec()
	uids, done, started := pl.ledger.Succeed(spec.Key)
	// The claims allocated for members that share them are theirs now.
	pl.claims.Used(spec.Key)
	for _, uid := range uids {
		if wp := pl.handle.GetWaitingPod(uid); wp != nil {
			wp.Allow(Name)
		}
	}
	if !started {
		return
	}
	if wasRunning {
		replacements.Inc()
		logger.V(2).Info("Running gang's member placed", "podGroup", spec.Key, "pod", klog.KObj(pod), "node", nodeName, "plan", done.Summary)
		pl.events.gang(spec, pod, v1.EventTypeNormal, ReasonMemberPlaced, "member %s placed next to its running gang: %s; %d of minMember %d placed",
			pod.Name, done.Summary, c.Placed(), spec.MinMember)
		return
	}
	for _, sp := range done.Spans {
		domainsSpanned.WithLabelValues(sp.Level).Observe(float64(sp.Domains))
	}
	attempts.WithLabelValues(resultScheduled).Inc()
	timeToSchedule.Observe(pl.clock.Since(spec.Created).Seconds())
	logger.V(2).Info("Gang reached quorum", "podGroup", spec.Key, "placed", c.Placed(), "plan", done.Summary)
	pl.events.gang(spec, nil, v1.EventTypeNormal, ReasonGangScheduled, "%s", u.Scheduled(c, done.Summary))
}

// failGang ends the gang's attempt in flight: waiting members are rejected,
// the held capacity is released, and the members are retried, after a
// backoff if penalize is set. Calls for an attempt that already ended do
// nothing.
func (pl *Plugin) failGang(ctx context.Context, key gang.Key, reason, why string, penalize bool) {
	base := time.Duration(pl.args.PodGroupBackoffSeconds) * time.Second
	max := time.Duration(pl.args.PodGroupMaxBackoffSeconds) * time.Second
	uids, backoff, ok := pl.ledger.Reservations.Fail(key, why, penalize, base, max)
	if !ok {
		return
	}
	pl.abandon(key, why)
	switch reason {
	case ReasonGangTimedOut:
		attempts.WithLabelValues(resultTimedOut).Inc()
	case ReasonMemberDeleted:
		attempts.WithLabelValues(resultMemberDeleted).Inc()
	default:
		attempts.WithLabelValues(resultRejected).Inc()
	}
	msg := fmt.Sprintf("gang %s: %s", key, why)
	for _, uid := range uids {
		if wp := pl.handle.GetWaitingPod(uid); wp != nil {
			wp.Reject(Name, msg)
		}
	}
	klog.FromContext(ctx).V(2).Info("Gang gave back its reservations", "podGroup", key, "reason", why, "rejected", len(uids), "backoff", backoff)
	if spec, ok := pl.lookup(key); ok {
		if backoff > 0 {
			pl.events.gang(spec, nil, v1.EventTypeWarning, reason, "%s; waiting members rejected: %d; retrying in %s", why, len(uids), backoff)
		} else {
			pl.events.gang(spec, nil, v1.EventTypeWarning, reason, "%s; waiting members rejected: %d; retrying now", why, len(uids))
		}
	}
	pl.activateBlocked()
	pl.ledger.Timers.After(key, ledger.BackoffTimer, backoff, func() { pl.activate(key) })
}

// activate moves a gang's unscheduled members back to the active queue when
// its backoff ends, instead of waiting for an unrelated cluster event.
func (pl *Plugin) activate(key gang.Key) {
	members, err := pl.members(key)
	if err != nil {
		return
	}
	if pods := gang.Waiting(members); len(pods) > 0 {
		pl.handle.Activate(pl.logger, pods)
	}
}
