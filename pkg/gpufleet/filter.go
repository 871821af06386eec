package gpufleet

import (
	"context"
	"errors"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/contract"
	"github.com/gpu-gang/gpu-gang/pkg/fleet"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// PreFilter reads the requirements of a pod that asks for NVIDIA GPUs,
// through its requests or its ResourceClaims (fleet.PodDemand): its
// PodGroup's annotations and its own, the pod's winning. Pods that ask for
// no NVIDIA GPU are not bound by them and skip the plugin. A pod whose
// annotations cannot be read waits, with an Event on the object that holds
// the bad value; a pod no node admits waits with one sentence saying why.
func (pl *Plugin) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	dv := &deviceView{pl: pl}
	// A stand-in for a member (the gang plugin's claim-less copy) carries
	// the member's GPU demand.
	d, err := pl.demandOf(ctx, contract.DemandPod(cs, pod), dv)
	if err != nil {
		return nil, demandStatus(err)
	}
	if !d.Any() {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	devices, err := dv.get()
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	group, status := pl.groupOf(pod)
	if status != nil {
		return nil, status
	}
	var groupAnnotations map[string]string
	if group != nil {
		groupAnnotations = group.Annotations
	}
	req, err := fleet.ParseRequirements(groupAnnotations, pod.Annotations)
	if err != nil {
		// Only an edit fixes it; the pod is tried again when one is made.
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, pl.reportRequirements(pod, group, err))
	}
	s := &cycleState{req: req, demand: d, nodes: pl.nodes, groupings: pl.groupings, devices: devices}
	contract.WriteGPUFleetState(cs, s)
	contract.WriteNodeGroups(cs, s)
	if len(nodes) > 0 && !pl.anyAdmits(s, nodes) {
		// Evicting pods cannot change a node's labels or devices.
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, pl.explain(s, nodes))
	}
	if v := klog.FromContext(ctx).V(5); v.Enabled() {
		v.Info("GPU requirements", "pod", klog.KObj(pod), "minCUDA", req.MinCUDA.String(), "minComputeCapability", req.MinCompute.String(),
			"uniform", req.Uniform.String(), "capacityType", req.Capacity, "allowSharedGPUs", req.AllowSharedGPUs, "demand", d)
	}
	return nil, nil
}

// PreFilterExtensions returns nil: requirements do not change when
// preemption simulates adding or removing pods.
func (pl *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter admits or rejects the node by the pod's requirements.
func (pl *Plugin) Filter(_ context.Context, cs fwk.CycleState, _ *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	s, err := readState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	node := ni.Node()
	if ok, why := s.req.Admits(pl.nodes.facts(node.Name, node.Labels, s.nodeDevices(node.Name)), s.demand, &pl.opts); !ok {
		// Evicting pods cannot change a node's labels or devices.
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, why.Reason)
	}
	return nil
}

// anyAdmits reports whether some node admits the pod. It stops at the first
// that does, so it only costs a pass over the cluster when none does.
func (pl *Plugin) anyAdmits(s *cycleState, nodes []fwk.NodeInfo) bool {
	for _, ni := range nodes {
		n := ni.Node()
		if ok, _ := s.req.Admits(pl.nodes.facts(n.Name, n.Labels, s.nodeDevices(n.Name)), s.demand, &pl.opts); ok {
			return true
		}
	}
	return false
}

// explain says why no node admits the pod: the version it needs, the best
// one in the cluster and the label or device attribute read, and so on for
// each rule.
func (pl *Plugin) explain(s *cycleState, nodes []fwk.NodeInfo) string {
	ns := make([]placement.Node, len(nodes))
	for i, ni := range nodes {
		n := ni.Node()
		ns[i] = placement.Node{Name: n.Name, Labels: n.Labels}
	}
	// fleet.Explain names the first node's source where several carry the
	// best version: name order keeps that from depending on the snapshot.
	slices.SortFunc(ns, func(a, b placement.Node) int { return strings.Compare(a.Name, b.Name) })
	e := fleet.NewWithDevices(ns, s.nodeDevices, pl.opts).Explain(s.req, s.demand, nil)
	if e.Message == "" {
		return "no node admits the pod's GPU requirements"
	}
	return e.Message
}

// demandStatus is the status of a pod whose demand cannot be read. A claim
// that does not exist yet (the claim controller makes it from its
// template) or names a DeviceClass that does not exist leaves it unknown
// whether the pod takes GPUs: it waits until the claim or class is created
// (see hints.go), as DynamicResources makes it wait.
func demandStatus(err error) *fwk.Status {
	var noClaim *capacity.ClaimNotFoundError
	var noClass *capacity.ClassNotFoundError
	if errors.As(err, &noClaim) || errors.As(err, &noClass) {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "cannot tell whether the pod takes NVIDIA GPUs: "+err.Error())
	}
	return fwk.AsStatus(err)
}
