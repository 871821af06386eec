package coscheduling

import (
	"context"
	"fmt"
	"maps"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// podGroupResource is the PodGroup CRD as the scheduler's dynamic informers
// name it: <plural>.<version>.<group>.
const podGroupResource fwk.EventResource = "podgroups.v1alpha1.scheduling.x-k8s.io"

// EventsToRegister lists the cluster events after which a pod this plugin
// turned away may succeed, each with a hint that skips unrelated objects.
func (pl *Plugin) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
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
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeTaint | fwk.UpdateNodeLabel}, QueueingHintFn: pl.isNodeMoreCapable},
		// A PodGroup created late releases members held for it; an edited
		// one (a smaller minMember, a fixed spec) may release them too.
		{Event: fwk.ClusterEvent{Resource: podGroupResource, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: pl.isOwnPodGroup},
	}, nil
}

// isSiblingPod queues a gang member when another member of its gang appears
// or binds.
func (pl *Plugin) isSiblingPod(logger klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	key, ok := gang.Of(pod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	other, ok := newObj.(*v1.Pod)
	if !ok {
		return fwk.Queue, fmt.Errorf("expected a Pod, got %T", newObj)
	}
	if otherKey, ok := gang.Of(other); ok && otherKey == key && other.UID != pod.UID {
		logger.V(5).Info("Sibling changed, requeueing gang member", "pod", klog.KObj(pod), "sibling", klog.KObj(other))
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// isNodeMoreCapable queues a pod when a node appears or can now take more:
// allocatable grew, a taint or the unschedulable mark went away, or its labels
// changed (members may select nodes by label). Updates that only shrink a
// node cannot help.
func (pl *Plugin) isNodeMoreCapable(logger klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
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

// isOwnPodGroup queues a member when its own PodGroup is created or changed.
func (pl *Plugin) isOwnPodGroup(logger klog.Logger, pod *v1.Pod, _, newObj interface{}) (fwk.QueueingHint, error) {
	key, ok := gang.Of(pod)
	if !ok {
		return fwk.QueueSkip, nil
	}
	obj, err := meta.Accessor(newObj)
	if err != nil {
		return fwk.Queue, fmt.Errorf("reading PodGroup metadata: %w", err)
	}
	if obj.GetNamespace() == key.Namespace && obj.GetName() == key.Name {
		logger.V(5).Info("PodGroup changed, requeueing member", "pod", klog.KObj(pod), "podGroup", key)
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}
