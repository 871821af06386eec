package coscheduling

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// What the plugin does when its informers see pods and nodes change: the
// scheduling cycle sees no such news, and gangs waiting in Permit, held back
// in PreEnqueue or holding capacity must hear of it at once.

// onPodAdd releases a gang's held-back members once the new member brings it
// to quorum. The new member itself passes PreEnqueue on its own.
func (pl *Plugin) onPodAdd(obj interface{}) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.Spec.NodeName != "" {
		return
	}
	key, ok := pl.unitOf(pod)
	if !ok {
		return
	}
	if u, err := pl.readUnit(key); err == nil && u.Quorum(pl.viewOf(key)).Gathered {
		pl.releaseGated(key)
	}
}

// onPodUpdate follows a pod that was bound, which may complete a
// preemptor, and a pod whose gang changed (its label did, and it names no
// native PodGroup, which would win): it leaves the old gang's held-back
// members and may complete the new gang.
func (pl *Plugin) onPodUpdate(oldObj, newObj interface{}) {
	o, ok1 := oldObj.(*v1.Pod)
	n, ok2 := newObj.(*v1.Pod)
	if !ok1 || !ok2 {
		return
	}
	if o.Spec.NodeName == "" && n.Spec.NodeName != "" {
		pl.preempter.PreemptorBound(n)
	}
	if sameGang(o, n) {
		if len(o.Spec.SchedulingGates) > 0 && len(n.Spec.SchedulingGates) == 0 {
			// An ungated member counts now, as an added one does: it
			// may complete a segment its siblings wait for.
			pl.onPodAdd(n)
		}
		return
	}
	if key, ok := pl.unitOf(o); ok {
		pl.memberGone(key, o)
	}
	pl.onPodAdd(n)
}

// onPodDelete handles a member that left the scheduler's view: deleted, or
// finished (the scheduler's informer drops finished pods).
func (pl *Plugin) onPodDelete(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	pl.ledger.Preemptions.VictimGone(pod.UID)
	if key, ok := pl.unitOf(pod); ok {
		pl.memberGone(key, pod)
		return
	}
	// A plain preemptor that goes away gives up what it preempted for.
	pl.ledger.Preemptions.End(pl.ownerOf(pod))
}

// memberGone updates a gang that lost a member. A member that waited in Permit
// fails its gang's attempt at once, so that its siblings give back their
// nodes and its replacement finds a fresh plan. A gang with no members left
// holds nothing. A running gang that drops below minMember says so.
func (pl *Plugin) memberGone(key gang.Key, pod *v1.Pod) {
	ctx := klog.NewContext(context.Background(), pl.logger)
	// Forget the reservation first: the rejections below run Unreserve,
	// which must not take the deletion for a failed plan. It is found
	// under the unit it was made under, which the pod's hierarchy may no
	// longer name.
	if unit, inFlight := pl.ledger.ForgetPod(key, pod.UID); inFlight {
		pl.failGang(ctx, unit, ReasonMemberDeleted, fmt.Sprintf("member %s was deleted while it waited for its gang", pod.Name), false)
	}
	if wp := pl.handle.GetWaitingPod(pod.UID); wp != nil {
		// The scheduler rejects a deleted pod that waits in Permit too;
		// whichever comes first gives its node back.
		wp.Reject(Name, fmt.Sprintf("pod %s was deleted", pod.Name))
	}
	members, err := pl.members(key)
	if err != nil {
		return
	}
	if len(gang.Waiting(members)) == 0 {
		// No member needs the gang's hold any more, nor what its attempt
		// wrote: an attempt whose plan expired before any member reserved
		// is no longer in flight for failGang to end.
		pl.ledger.Idle(key)
		pl.abandon(key, "no member of the gang waits to be scheduled any more")
		pl.activateBlocked()
	}
	if pod.Spec.NodeName != "" && pod.Status.Phase != v1.PodSucceeded && pl.ledger.Reservations.Admitted(key) {
		pl.reportLostMember(key, pod)
	}
}

// reportLostMember records that a running unit lost a member that had not
// finished, and, if the unit is now below its quorum, what it has left.
func (pl *Plugin) reportLostMember(key gang.Key, pod *v1.Pod) {
	u, err := pl.readUnit(key)
	if err != nil || u.Spec().Deleting {
		return // the job is going away as a whole
	}
	how := "was deleted"
	if pod.Status.Phase == v1.PodFailed {
		how = "failed"
	}
	eventType := v1.EventTypeNormal
	warning, msg := u.Lost(pod, how, u.Quorum(pl.viewOf(key)))
	if warning {
		eventType = v1.EventTypeWarning
	}
	pl.events.gang(u.Spec(), pod, eventType, ReasonMemberLost, "%s", msg)
}

// onNodeDelete fails the attempts in flight that reserved the node for a
// member: that member would bind to a node that no longer exists. Its
// siblings give back their nodes and the gang plans again at once on the
// nodes that are left.
func (pl *Plugin) onNodeDelete(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	node, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	ctx := klog.NewContext(context.Background(), pl.logger)
	for _, key := range pl.ledger.Reservations.InFlightOn(node.Name) {
		pl.failGang(ctx, key, ReasonGangRejected, fmt.Sprintf("node %s, which a member had reserved, was deleted", node.Name), false)
	}
}

// sameGang reports whether two versions of a pod belong to the same gang.
func sameGang(a, b *v1.Pod) bool {
	ka, _ := gang.Of(a)
	kb, _ := gang.Of(b)
	return ka == kb
}

// activateBlocked moves the pods held capacity turned away back to the
// active queue: a hold ended, and no cluster event says so.
func (pl *Plugin) activateBlocked() {
	if pods := pl.ledger.Blocked.Take(); len(pods) > 0 {
		pl.handle.Activate(pl.logger, pods)
	}
}
