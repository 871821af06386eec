package gpufleet

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/fleet"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// EventsToRegister lists the cluster events after which a pod this plugin
// turned away may pass, each with a hint that skips unrelated objects.
func (pl *Plugin) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	events := []fwk.ClusterEventWithHint{
		// A new node, or one relabelled (a driver upgrade that ends, GPU
		// feature discovery after a driver change, a provisioner marking
		// capacity), may admit the pod.
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel}, QueueingHintFn: pl.isNodeNowAdmitting},
		// The pod's own annotations fixed or changed, or the claims made
		// from its templates named in its status.
		{Event: fwk.ClusterEvent{Resource: fwk.TargetPod, ActionType: fwk.Update}, QueueingHintFn: pl.isRequirementChange},
		// Its PodGroup created, or its annotations fixed or changed.
		// Native PodGroups have no such event: the plugin follows them
		// through its gang sources (onGangUpdated).
		{Event: fwk.ClusterEvent{Resource: gang.PodGroupResource, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: gang.IsOwnPodGroup},
	}
	if pl.dra == nil {
		return events, nil
	}
	return append(events,
		// A node's GPUs published, or republished by a DRA driver that
		// now runs a newer driver or CUDA version, may admit the pod; a
		// slice withdrawn may take the oldest GPU of a node with it.
		fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.Add | fwk.Update | fwk.Delete}, QueueingHintFn: pl.isSliceNowAdmitting},
		// The pod's claim created, or a DeviceClass created or changed:
		// PreFilter could not tell whether the pod takes GPUs, or a class
		// no longer selects them.
		fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Add}, QueueingHintFn: isPodsClaim},
		fwk.ClusterEventWithHint{Event: fwk.ClusterEvent{Resource: fwk.DeviceClass, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: mayUseClass},
	), nil
}

// isNodeNowAdmitting queues a pod when a node that did not admit it (or
// did not exist) now does. The node's devices are those the last
// PreFilter saw (hintDevices).
func (pl *Plugin) isNodeNowAdmitting(logger klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	newNode, ok := newObj.(*v1.Node)
	if !ok {
		return fwk.Queue, fmt.Errorf("expected a Node, got %T", newObj)
	}
	req, d, known, err := pl.requirementsOf(pod)
	switch {
	case !known:
		return fwk.Queue, nil // PreFilter decides
	case err != nil:
		return fwk.QueueSkip, nil // only an edit of the annotations helps
	}
	devices := nodeDevices(pl.hintDevices(), newNode.Name)
	admits := func(n *v1.Node) bool {
		f := fleet.ReadNodeDevices(n.Labels, devices, &pl.opts)
		ok, _ := req.Admits(&f, d, &pl.opts)
		return ok
	}
	if !admits(newNode) {
		logger.V(5).Info("Node does not admit the pod's GPU requirements, skipping", "pod", klog.KObj(pod), "node", klog.KObj(newNode))
		return fwk.QueueSkip, nil
	}
	if oldNode, ok := oldObj.(*v1.Node); ok && oldNode != nil && admits(oldNode) {
		return fwk.QueueSkip, nil
	}
	logger.V(5).Info("Node now admits the pod's GPU requirements, requeueing", "pod", klog.KObj(pod), "node", klog.KObj(newNode))
	return fwk.Queue, nil
}

// requirementsOf reads a pod's requirements and demand as PreFilter does.
// known is false when the pod's PodGroup, claims or their classes are not
// at hand; err is set when an annotation cannot be read.
func (pl *Plugin) requirementsOf(pod *v1.Pod) (req fleet.Requirements, d fleet.Demand, known bool, err error) {
	var group map[string]string
	if key, ok := gang.Of(pod); ok {
		spec, err := pl.lookup(key)
		if err != nil {
			return req, d, false, nil
		}
		if spec != nil {
			group = spec.Annotations
		}
	}
	d, err = pl.demandOf(context.Background(), pod, &deviceView{pl: pl, m: pl.hintDevices(), done: true})
	if err != nil {
		return req, d, false, nil
	}
	req, err = fleet.ParseRequirements(group, pod.Annotations)
	return req, d, true, err
}

// isSliceNowAdmitting queues a pod when a ResourceSlice of NVIDIA's GPU
// driver changed so that its node may admit the pod. The node is judged by
// its labels and the slice's devices alone: a node's lowest version can
// only be at or below the lowest of one of its slices, so a slice that
// does not admit the pod means a node that does not either; and where
// labels say a version, the slice does not change it. A slice withdrawn
// queues the pod: the node's other slices, which the hint does not see,
// may now admit it.
func (pl *Plugin) isSliceNowAdmitting(logger klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	oldSlice, newSlice, err := util.As[*resourceapi.ResourceSlice](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if newSlice == nil {
		if oldSlice == nil || oldSlice.Spec.Driver != scheduling.DRADriverGPU {
			return fwk.QueueSkip, nil
		}
		logger.V(5).Info("GPU devices withdrawn, requeueing", "pod", klog.KObj(pod), "resourceSlice", klog.KObj(oldSlice))
		return fwk.Queue, nil
	}
	if newSlice.Spec.Driver != scheduling.DRADriverGPU || newSlice.Spec.NodeName == nil {
		return fwk.QueueSkip, nil // not GPUs, or not one node's
	}
	req, d, known, err := pl.requirementsOf(pod)
	switch {
	case !known:
		return fwk.Queue, nil // PreFilter decides
	case err != nil:
		return fwk.QueueSkip, nil // only an edit of the annotations helps
	}
	node, err := pl.nodeLister.Get(*newSlice.Spec.NodeName)
	if err != nil {
		return fwk.QueueSkip, nil // the node's own event will come
	}
	admits := func(s *resourceapi.ResourceSlice) bool {
		f := fleet.ReadNodeDevices(node.Labels, sliceDevices(s), &pl.opts)
		ok, _ := req.Admits(&f, d, &pl.opts)
		return ok
	}
	if !admits(newSlice) {
		logger.V(5).Info("Node's GPU devices do not admit the pod's GPU requirements, skipping", "pod", klog.KObj(pod), "resourceSlice", klog.KObj(newSlice))
		return fwk.QueueSkip, nil
	}
	if oldSlice != nil && admits(oldSlice) {
		return fwk.QueueSkip, nil
	}
	logger.V(5).Info("Node's GPU devices now admit the pod's GPU requirements, requeueing", "pod", klog.KObj(pod), "resourceSlice", klog.KObj(newSlice))
	return fwk.Queue, nil
}

// isPodsClaim queues a pod when one of its claims is created: until then
// PreFilter cannot tell whether it takes GPUs.
func isPodsClaim(logger klog.Logger, pod *v1.Pod, _, newObj interface{}) (fwk.QueueingHint, error) {
	claim, ok := newObj.(*resourceapi.ResourceClaim)
	if !ok {
		return fwk.Queue, fmt.Errorf("expected a ResourceClaim, got %T", newObj)
	}
	if claim.Namespace != pod.Namespace {
		return fwk.QueueSkip, nil
	}
	if resourceclaim.IsForPod(pod, claim, true) == nil {
		return fwk.Queue, nil // made from one of the pod's templates
	}
	for i := range pod.Spec.ResourceClaims {
		if name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i]); err == nil && name != nil && *name == claim.Name {
			logger.V(5).Info("Claim of the pod created, requeueing", "pod", klog.KObj(pod), "resourceClaim", klog.KObj(claim))
			return fwk.Queue, nil
		}
	}
	return fwk.QueueSkip, nil
}

// mayUseClass queues a pod that may take devices of a DeviceClass created
// or changed: one with claims, or any pod when the class serves an extended
// resource. DeviceClasses change rarely; telling which pods use one would
// cost a read of every claim.
func mayUseClass(_ klog.Logger, pod *v1.Pod, _, newObj interface{}) (fwk.QueueingHint, error) {
	class, ok := newObj.(*resourceapi.DeviceClass)
	if !ok {
		return fwk.Queue, fmt.Errorf("expected a DeviceClass, got %T", newObj)
	}
	if len(pod.Spec.ResourceClaims) > 0 || class.Spec.ExtendedResourceName != nil {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// isRequirementChange queues a pod whose own requirement annotations
// changed, or whose claims from templates were made (PreFilter could not
// tell, without them, whether it takes GPUs).
func (pl *Plugin) isRequirementChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	oldPod, ok1 := oldObj.(*v1.Pod)
	newPod, ok2 := newObj.(*v1.Pod)
	if !ok1 || !ok2 {
		return fwk.Queue, fmt.Errorf("expected Pods, got %T and %T", oldObj, newObj)
	}
	if fleetAnnotationsChanged(oldPod.Annotations, newPod.Annotations) {
		logger.V(5).Info("GPU requirements of the pod changed, requeueing", "pod", klog.KObj(pod))
		return fwk.Queue, nil
	}
	if !resourceclaim.PodStatusEqual(oldPod.Status.ResourceClaimStatuses, newPod.Status.ResourceClaimStatuses) {
		logger.V(5).Info("Claims of the pod made from its templates, requeueing", "pod", klog.KObj(pod))
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}
