package coscheduling

import (
	"context"
	"fmt"
	"maps"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// EventsToRegister lists the cluster events after which a pod this plugin
// turned away may succeed, each with a hint that skips unrelated objects.
func (pl *Plugin) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	events := []fwk.ClusterEventWithHint{
		// A new member can bring a gang held in PreEnqueue to quorum, and a
		// recreated member can take the place of one that was deleted.
		{Event: fwk.ClusterEvent{Resource: fwk.UnscheduledPod, ActionType: fwk.Add | fwk.UpdatePodLabel}, QueueingHintFn: pl.isSiblingPod},
		// A member that binds can bring an elastic gang to quorum, after
		// which its extra members schedule without waiting.
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Add}, QueueingHintFn: pl.isSiblingPod},
		// A pod leaving a node (deleted, finished, or un-assumed when a
		// gang gives back its reservations) frees the room a gang's plan was
		// short of, or that a held claim kept from a pod. Every pod this
		// plugin rejects for capacity gains from freed room, so there is
		// nothing to skip.
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}},
		// A new or grown node, or one that sheds a taint or gains the labels
		// members select, can make a gang fit that did not.
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeTaint | fwk.UpdateNodeLabel}, QueueingHintFn: isNodeMoreCapable},
		// A PodGroup created late releases members held for it; an edited
		// one (a smaller minMember, a fixed spec) may release them too.
		// Native PodGroups have no such event (see
		// gang.API.QueueHearsEvents): the plugin follows them through its
		// gang sources instead (onGangAdded and the functions after it).
		{Event: fwk.ClusterEvent{Resource: gang.PodGroupResource, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: gang.IsOwnPodGroup},
	}
	if pl.devices == nil {
		return events, nil
	}
	return append(events,
		// Devices free up when an allocated claim is deallocated or
		// deleted, which comes after its pod left (the resource claim
		// controller deletes a claim made from a template once its pod is
		// gone), or without any pod event (a claim another controller
		// allocated): a gang turned away before must hear the claim. A
		// claim a member names, created after it, ends its wait for it.
		fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Add | fwk.Update | fwk.Delete}, QueueingHintFn: pl.isClaimChangeForPod},
		// New or grown slices publish devices; a new or edited DeviceClass
		// can match devices, or map an extended resource, that none did.
		fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.Add | fwk.Update}},
		fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{Resource: fwk.DeviceClass, ActionType: fwk.Add | fwk.Update}},
	), nil
}

// isClaimChangeForPod is claimChangeHint, after telling the claim watch.
//
// The queue hears claims from the DRA manager's claim cache, after the
// claim tracker took the change in; the claim watch that spares planning
// passes a read of the tracker hears them from the informer, in no order
// with the cache, and may not have yet. The hint therefore tells the watch
// first: the pass the pod makes next reads the tracker.
func (pl *Plugin) isClaimChangeForPod(logger klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	pl.devices.Inventories().Claims().Changed()
	return claimChangeHint(logger, pod, oldObj, newObj)
}

// claimChangeHint queues a pod when a claim's devices free up, or when a
// claim the pod names appears. Other changes skip it: every failed attempt
// lengthens a pod's backoff, and a gang kept in backoff by attempts that
// could not succeed is overtaken by younger gangs when room frees up.
func claimChangeHint(logger klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	oldClaim, newClaim, err := schedutil.As[*resourceapi.ResourceClaim](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if oldClaim == nil && newClaim == nil {
		return fwk.Queue, fmt.Errorf("expected a ResourceClaim, got %T", newObj)
	}
	if oldClaim != nil && oldClaim.Status.Allocation != nil && (newClaim == nil || newClaim.Status.Allocation == nil) {
		logger.V(5).Info("Claim released its devices, requeueing", "pod", klog.KObj(pod), "claim", klog.KObj(oldClaim))
		return fwk.Queue, nil
	}
	if oldClaim == nil && newClaim.Namespace == pod.Namespace && dra.UsesClaim(pod, newClaim.Name) {
		logger.V(5).Info("Own claim created, requeueing", "pod", klog.KObj(pod), "claim", klog.KObj(newClaim))
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// isSiblingPod is siblingHint over the plugin's admission units.
func (pl *Plugin) isSiblingPod(logger klog.Logger, pod *v1.Pod, _, newObj interface{}) (fwk.QueueingHint, error) {
	return siblingHint(logger, pl.unitOf, pod, newObj)
}

// siblingHint queues a gang member when another member of its gang (the
// same unit, as unitOf says) appears or binds.
func siblingHint(logger klog.Logger, unitOf func(*v1.Pod) (gang.Key, bool), pod *v1.Pod, newObj interface{}) (fwk.QueueingHint, error) {
	key, ok := unitOf(pod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	other, ok := newObj.(*v1.Pod)
	if !ok {
		return fwk.Queue, fmt.Errorf("expected a Pod, got %T", newObj)
	}
	if otherKey, ok := unitOf(other); ok && otherKey == key && other.UID != pod.UID {
		logger.V(5).Info("Sibling changed, requeueing gang member", "pod", klog.KObj(pod), "sibling", klog.KObj(other))
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// isNodeMoreCapable queues a pod when a node appears or can now take more:
// allocatable grew, a taint or the unschedulable mark went away, or its labels
// changed (members may select nodes by label). Updates that only shrink a
// node cannot help.
func isNodeMoreCapable(logger klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	newNode, ok := newObj.(*v1.Node)
	if !ok {
		return fwk.Queue, fmt.Errorf("expected a Node, got %T", newObj)
	}
	oldNode, ok := oldObj.(*v1.Node)
	if !ok || oldNode == nil {
		return fwk.Queue, nil // added
	}
	for name, q := range newNode.Status.Allocatable {
		if q.Cmp(oldNode.Status.Allocatable[name]) > 0 {
			return fwk.Queue, nil
		}
	}
	if len(newNode.Spec.Taints) < len(oldNode.Spec.Taints) || (oldNode.Spec.Unschedulable && !newNode.Spec.Unschedulable) {
		return fwk.Queue, nil
	}
	if !maps.Equal(oldNode.Labels, newNode.Labels) {
		return fwk.Queue, nil
	}
	logger.V(5).Info("Node update cannot make room, skipping", "pod", klog.KObj(pod), "node", klog.KObj(newNode))
	return fwk.QueueSkip, nil
}

// onGangAdded lets the members of a gang whose PodGroup was just created be
// looked at again.
func (pl *Plugin) onGangAdded(s *gang.Spec) { pl.gangChanged(s.Key) }

// onGangUpdated lets a gang's members be looked at again when its PodGroup
// changes. Where the queue hears the API's events, that is any change, as
// the queue's own hint (gang.IsOwnPodGroup) sees it; elsewhere, only a
// change of the spec (a new generation: status updates, such as the status
// controller's, change nothing a member waits for). It also says when a
// native PodGroup starts being deleted while members still wait. A new
// object of the same name (deleted and re-created while the informer was
// not watching) is a deletion and a creation: what the old one's gang held
// is given back.
func (pl *Plugin) onGangUpdated(old, new *gang.Spec) {
	if old.UID != new.UID {
		pl.onGangDeleted(old)
		pl.onGangAdded(new)
		return
	}
	if !old.Deleting && new.Deleting && new.Key.API == gang.Native {
		pl.nativePodGroupDeleting(new)
	}
	if new.Key.API.QueueHearsEvents() || old.Generation != new.Generation {
		pl.gangChanged(new.Key)
	}
}

// onGangDeleted handles a gang whose PodGroup is gone: deleted, or, for a
// native one, removed by the API server once no active pod named it (or its
// finalizer was removed by hand). Members created since, or that still wait,
// are held until it exists again.
func (pl *Plugin) onGangDeleted(s *gang.Spec) {
	pl.gangDeleted(s.Key)
	pl.childDeleted(s)
}

// gangChanged lets the gang's members be looked at again: held ones through
// PreEnqueue and, where the queue does not hear the API's events itself,
// unschedulable ones through a new cycle. The queue's own event may come
// before the gang sources have the change; this runs once they have it.
func (pl *Plugin) gangChanged(key gang.Key) {
	pl.releaseGated(key)
	if unit := pl.unitOfGang(key); unit != key {
		// A PodGroup under a gang composite: its members are held and
		// planned with the whole tree.
		pl.releaseGated(unit)
		pl.activate(unit)
	}
	if !key.API.QueueHearsEvents() {
		pl.activate(key)
	}
}

// nativePodGroupDeleting records, on a native PodGroup that starts being
// deleted while members wait, that they are still scheduled: the API server
// keeps the PodGroup (finalizer scheduling.k8s.io/podgroup-protection)
// until no active pod names it, and until then it defines their gang.
func (pl *Plugin) nativePodGroupDeleting(spec *gang.Spec) {
	key := spec.Key
	members, err := pl.members(key)
	if err != nil {
		return
	}
	waiting := len(gang.Waiting(members))
	if waiting == 0 {
		return
	}
	pl.events.gang(spec, nil, v1.EventTypeNormal, ReasonPodGroupDeleting,
		"the PodGroup is being deleted while %d of its members wait for a node: the API server keeps it until no active pod names it, and until then gpu-gang schedules them as a gang. Delete the pods if their job is gone",
		waiting)
}
