package coscheduling

import (
	"context"
	"fmt"
	"maps"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// podGroupResource is the PodGroup CRD as the scheduler's dynamic informers
// name it: <plural>.<version>.<group>.
//
// Native PodGroups (scheduling.k8s.io/v1beta1) have no cluster event here:
// kube-scheduler registers its handlers for them only with the
// GenericWorkload feature gate on, which gpu-gang runs without (see
// gang.DecideNative), and a dynamic informer of its own would be a second copy
// of every PodGroup. The plugin's own informer follows them instead
// (onNativePodGroupAdd and the functions after it) and activates the
// members a change concerns.
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

// isOwnPodGroup queues a member when its own scheduler-plugins PodGroup is
// created or changed.
func (pl *Plugin) isOwnPodGroup(logger klog.Logger, pod *v1.Pod, _, newObj interface{}) (fwk.QueueingHint, error) {
	key, ok := gang.Of(pod)
	if !ok || key.API != gang.XK8s {
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

// nativeKey is the gang key of a native PodGroup.
func nativeKey(pg *schedulingv1beta1.PodGroup) gang.Key {
	return gang.Key{API: gang.Native, Namespace: pg.Namespace, Name: pg.Name}
}

// onNativePodGroupAdd releases the members of a native PodGroup that was
// just created: those PreEnqueue held for it, and those a scheduling cycle
// turned away while it did not exist.
func (pl *Plugin) onNativePodGroupAdd(obj interface{}) {
	if pg, ok := obj.(*schedulingv1beta1.PodGroup); ok {
		pl.nativePodGroupChanged(nativeKey(pg))
	}
}

// onNativePodGroupUpdate releases a native PodGroup's members when its spec
// changes (a new generation; status updates, such as the status
// controller's, change nothing a member waits for), and says so when the
// PodGroup starts being deleted while members still wait.
func (pl *Plugin) onNativePodGroupUpdate(oldObj, newObj interface{}) {
	o, ok1 := oldObj.(*schedulingv1beta1.PodGroup)
	n, ok2 := newObj.(*schedulingv1beta1.PodGroup)
	if !ok1 || !ok2 {
		return
	}
	if o.DeletionTimestamp == nil && n.DeletionTimestamp != nil {
		pl.nativePodGroupDeleting(n)
	}
	if o.Generation != n.Generation {
		pl.nativePodGroupChanged(nativeKey(n))
	}
}

// onNativePodGroupDelete handles a native PodGroup that is gone: the API
// server removed it once no active pod named it, or its finalizer was
// removed by hand. Members created since, or that still wait, are held
// until it exists again.
func (pl *Plugin) onNativePodGroupDelete(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if pg, ok := obj.(*schedulingv1beta1.PodGroup); ok {
		pl.gangDeleted(nativeKey(pg))
	}
}

// nativePodGroupChanged lets the gang's members be looked at again: held
// ones through PreEnqueue, unschedulable ones through a new cycle.
func (pl *Plugin) nativePodGroupChanged(key gang.Key) {
	pl.releaseGated(key)
	pl.activate(key)
}

// nativePodGroupDeleting records, on a native PodGroup that starts being
// deleted while members wait, that they are still scheduled: the API server
// keeps the PodGroup (finalizer scheduling.k8s.io/podgroup-protection)
// until no active pod names it, and until then it defines their gang.
func (pl *Plugin) nativePodGroupDeleting(pg *schedulingv1beta1.PodGroup) {
	key := nativeKey(pg)
	members, err := pl.members(key)
	if err != nil {
		return
	}
	waiting := 0
	for _, p := range members {
		if p.Spec.NodeName == "" {
			waiting++
		}
	}
	if waiting == 0 {
		return
	}
	pl.events.gang(gang.FromNativePodGroup(pg), nil, v1.EventTypeNormal, ReasonPodGroupDeleting,
		"the PodGroup is being deleted while %d of its members wait for a node: the API server keeps it until no active pod names it, and until then gpu-gang schedules them as a gang. Delete the pods if their job is gone",
		waiting)
}
