package gpufleet

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/fleet"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// EventsToRegister lists the cluster events after which a pod this plugin
// turned away may pass, each with a hint that skips unrelated objects.
func (pl *Plugin) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		// A new node, or one relabelled (a driver upgrade that ends, GPU
		// feature discovery after a driver change, a provisioner marking
		// capacity), may admit the pod.
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel}, QueueingHintFn: pl.isNodeNowAdmitting},
		// The pod's own annotations fixed or changed.
		{Event: fwk.ClusterEvent{Resource: fwk.TargetPod, ActionType: fwk.Update}, QueueingHintFn: pl.isRequirementChange},
		// Its PodGroup created, or its annotations fixed or changed.
		// Native PodGroups have no such event: the plugin follows them
		// through its gang sources (onGangUpdated).
		{Event: fwk.ClusterEvent{Resource: gang.PodGroupResource, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: gang.IsOwnPodGroup},
	}, nil
}

// isNodeNowAdmitting queues a pod when a node that did not admit it (or
// did not exist) now does.
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
	admits := func(n *v1.Node) bool {
		f := fleet.ReadNode(n.Labels, &pl.opts)
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
// known is false when the pod's PodGroup is not at hand; err is set when
// an annotation cannot be read.
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
	req, err = fleet.ParseRequirements(group, pod.Annotations)
	return req, fleet.DemandOf(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})), true, err
}

// isRequirementChange queues a pod whose own requirement annotations
// changed.
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
	return fwk.QueueSkip, nil
}
