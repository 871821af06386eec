package coscheduling

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/topology"
)

// planGang is the capacity pre-check. It plans the gang's next need members
// (in rank order) node by node in the snapshot's free capacity less what
// other gangs hold, and holds the plan. A gang that does not fit holds
// nothing: Unschedulable if it could fit once room frees up,
// UnschedulableAndUnresolvable (with an Event) if it could never fit.
func (pl *Plugin) planGang(ctx context.Context, pg *v1alpha1.PodGroup, key gangKey, pending []*v1.Pod, need int, held map[string]amounts) *fwk.Status {
	logger := klog.FromContext(ctx)
	if len(pending) < need {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("waiting for members of PodGroup %s: %d more must be placed but %d are pending", key, need, len(pending)))
	}
	nodeInfos, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("listing nodes from the snapshot: %w", err))
	}
	sorted := append([]fwk.NodeInfo(nil), nodeInfos...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Node().Name < sorted[j].Node().Name })
	if status := pl.checkMinResources(pg, key, sorted, held); status != nil {
		return status
	}

	sortByRank(pending)
	chosen := pending[:need]
	req, reqs := pl.buildRequest(logger, key, chosen, sorted, held)
	req.Policy = topologyPolicy(pg, chosen)
	plan, err := pl.planner.Plan(ctx, req)
	if err != nil {
		var fitErr *placement.FitError
		switch {
		case errors.Is(err, topology.ErrUnknownLevel):
			pl.events.podGroup(pg, nil, v1.EventTypeWarning, ReasonInvalidPodGroup,
				"topology level %q is not one the scheduler is configured with: %v; name a configured level's label key or %s", req.Policy.Level, err, scheduling.HostnameKey)
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gang %s: %v", key, err))
		case errors.As(err, &fitErr):
			status := pl.explainNoFit(ctx, pg, key, req, fitErr, len(held) > 0)
			if status.Code() == fwk.Unschedulable {
				pl.holdFreePart(ctx, pg, key, chosen, req, reqs)
			}
			return status
		}
		return fwk.AsStatus(fmt.Errorf("planning gang %s: %w", key, err))
	}
	slots := make([]slot, len(chosen))
	for i, p := range chosen {
		slots[i] = slot{uid: p.UID, node: req.Nodes[plan.NodeOf[i]].Name, req: reqs[i]}
	}
	pl.gangs.setClaim(key, slots, pl.clock.Now().Add(pl.timeout(pg)), plan)
	logger.V(4).Info("Planned gang", "podGroup", key, "members", need, "plan", plan.Summary)
	return nil
}

// holdFreePart lets a gang that would fit the cluster, but not its free
// capacity now, hold the free part of a plan, if it is the first such gang
// in queue order (see gangs.head). As other pods finish, the capacity they
// free joins the hold at the gang's next try instead of going to gangs
// queued behind it.
func (pl *Plugin) holdFreePart(ctx context.Context, pg *v1alpha1.PodGroup, key gangKey, members []*v1.Pod, req *placement.Request, reqs []amounts) {
	nodeOf, placed, err := placement.Greedy{}.Place(ctx, req)
	if err != nil || placed == 0 {
		return
	}
	slots := make([]slot, 0, placed)
	for i, n := range nodeOf {
		if n >= 0 {
			slots = append(slots, slot{uid: members[i].UID, node: req.Nodes[n].Name, req: reqs[i]})
		}
	}
	rank := queueRank{priority: corev1helpers.PodPriority(members[0]), created: pg.CreationTimestamp.Time, key: key.String()}
	// The hold outlives one try by far, and lapses if the gang stops trying.
	expires := pl.clock.Now().Add(2 * pl.timeout(pg))
	if pl.gangs.holdForHead(key, rank, slots, expires) {
		klog.FromContext(ctx).V(3).Info("Gang holds the free part of its plan while it waits for room",
			"podGroup", key, "held", placed, "members", len(members))
	}
}

// buildRequest describes the members and the nodes to a planner. Nodes come
// in name order; each member's requests are returned alongside, for slots.
func (pl *Plugin) buildRequest(logger klog.Logger, key gangKey, members []*v1.Pod, nodeInfos []fwk.NodeInfo, held map[string]amounts) (*placement.Request, []amounts) {
	reqs := make([]amounts, len(members))
	for i, p := range members {
		reqs[i] = podAmounts(p)
	}
	dims := dimensions(reqs)
	nodes := make([]placement.Node, len(nodeInfos))
	for i, ni := range nodeInfos {
		n := ni.Node()
		alloc := make(placement.Vector, len(dims))
		free := make(placement.Vector, len(dims))
		for d, name := range dims {
			alloc[d] = resourceQuantity(ni.GetAllocatable(), name)
			free[d] = nodeFree(ni, name) - held[n.Name][name]
		}
		nodes[i] = placement.Node{Name: n.Name, Labels: n.Labels, Allocatable: alloc, Free: free}
	}
	eligibility := map[string][]bool{}
	ms := make([]placement.Member, len(members))
	for i, p := range members {
		sig := constraintSignature(p)
		el, ok := eligibility[sig]
		if !ok {
			el = eligibleNodes(logger, p, nodeInfos)
			eligibility[sig] = el
		}
		ms[i] = placement.Member{
			Name:        p.Namespace + "/" + p.Name,
			Rank:        i,
			Request:     toVector(dims, reqs[i]),
			Eligible:    el,
			Accelerated: reqs[i].usesAccelerators(),
		}
	}
	return &placement.Request{
		Gang:           key.String(),
		Resources:      dimNames(dims),
		Nodes:          nodes,
		NodeGeneration: pl.nodeGeneration.Load(),
		Members:        ms,
	}, reqs
}

// explainNoFit turns a failed plan into a status that gives the numbers. It
// plans again against an empty cluster to tell "not now" from "never".
func (pl *Plugin) explainNoFit(ctx context.Context, pg *v1alpha1.PodGroup, key gangKey, req *placement.Request, fitErr *placement.FitError, othersHold bool) *fwk.Status {
	empty := *req
	empty.Nodes = make([]placement.Node, len(req.Nodes))
	for i, n := range req.Nodes {
		n.Free = n.Allocatable
		empty.Nodes[i] = n
	}
	demand := describeDemand(req)
	if _, err := pl.planner.Plan(ctx, &empty); err != nil {
		var never *placement.FitError
		if !errors.As(err, &never) {
			return fwk.AsStatus(fmt.Errorf("planning gang %s on an empty cluster: %w", key, err))
		}
		msg := fmt.Sprintf("gang %s needs %s, but even with all %d nodes empty only %d of its %d members would fit (%s)",
			key, demand, len(req.Nodes), never.Placed, never.Wanted, never.Reason)
		pl.events.podGroup(pg, nil, v1.EventTypeWarning, ReasonGangTooLarge,
			"%s: lower spec.minMember or the members' requests, or add capacity", msg)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	msg := fmt.Sprintf("gang %s needs %s; free capacity fits %d of its %d members now (%s)",
		key, demand, fitErr.Placed, fitErr.Wanted, fitErr.Reason)
	if req.Policy.Required {
		pl.events.podGroup(pg, nil, v1.EventTypeNormal, ReasonTopologyUnsatisfied,
			"waiting: no single domain of level %s has room for the gang now (%s); it starts when one does, or relax %s to %s",
			req.Policy.Level, fitErr.Reason, scheduling.AnnotationTopologyRequired, scheduling.AnnotationTopologyPreferred)
	}
	if othersHold {
		msg += "; part of the free capacity is held for other gangs being placed"
	}
	return fwk.NewStatus(fwk.Unschedulable, msg)
}

// describeDemand summarises members by shape in rank order of first
// appearance: "1 × {cpu=2} + 3 × {cpu=4 nvidia.com/gpu=8}".
func describeDemand(req *placement.Request) string {
	var shapes []string
	count := map[string]int{}
	for i := range req.Members {
		s := placement.Describe(req.Resources, req.Members[i].Request)
		if count[s] == 0 {
			shapes = append(shapes, s)
		}
		count[s]++
	}
	parts := make([]string, len(shapes))
	for i, s := range shapes {
		parts[i] = fmt.Sprintf("%d × {%s}", count[s], s)
	}
	return strings.Join(parts, " + ")
}

// checkMinResources honours a PodGroup's minResources: the gang's declared
// total must fit in the cluster's free capacity (less what other gangs hold),
// and could ever fit in its allocatable.
func (pl *Plugin) checkMinResources(pg *v1alpha1.PodGroup, key gangKey, nodeInfos []fwk.NodeInfo, held map[string]amounts) *fwk.Status {
	if len(pg.Spec.MinResources) == 0 {
		return nil
	}
	names := make([]v1.ResourceName, 0, len(pg.Spec.MinResources))
	for name := range pg.Spec.MinResources {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	for _, name := range names {
		q := pg.Spec.MinResources[name]
		want := q.Value()
		if name == v1.ResourceCPU {
			want = q.MilliValue()
		}
		var total, free int64
		for _, ni := range nodeInfos {
			total += resourceQuantity(ni.GetAllocatable(), name)
			free += nodeFree(ni, name) - held[ni.Node().Name][name]
		}
		if total < want {
			msg := fmt.Sprintf("gang %s: spec.minResources asks for %s %s, but the cluster has %s in all",
				key, placement.FormatQuantity(string(name), want), name, placement.FormatQuantity(string(name), total))
			pl.events.podGroup(pg, nil, v1.EventTypeWarning, ReasonGangTooLarge, "%s: lower spec.minResources or add capacity", msg)
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
		}
		if free < want {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s: spec.minResources asks for %s %s, %s free now",
				key, placement.FormatQuantity(string(name), want), name, placement.FormatQuantity(string(name), free)))
		}
	}
	return nil
}

// constraintSignature identifies what decides which nodes a pod may run on
// at all, so members from one template share one eligibility computation.
func constraintSignature(pod *v1.Pod) string {
	var affinity *v1.NodeAffinity
	if pod.Spec.Affinity != nil {
		affinity = pod.Spec.Affinity.NodeAffinity
	}
	b, err := json.Marshal(struct {
		Selector    map[string]string `json:"s,omitempty"`
		Affinity    *v1.NodeAffinity  `json:"a,omitempty"`
		Tolerations []v1.Toleration   `json:"t,omitempty"`
	}{pod.Spec.NodeSelector, affinity, pod.Spec.Tolerations})
	if err != nil {
		return string(pod.UID) // never shared, never wrong
	}
	return string(b)
}

var unschedulableTaint = v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}

// eligibleNodes tells, node by node, whether the pod may run there at all:
// the node is schedulable, its NoSchedule/NoExecute taints are tolerated, and
// it matches the pod's node selector and required node affinity. Resources,
// ports and inter-pod affinity are left to the plan and to Filter.
func eligibleNodes(logger klog.Logger, pod *v1.Pod, nodeInfos []fwk.NodeInfo) []bool {
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	hardTaints := func(t *v1.Taint) bool {
		return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
	}
	out := make([]bool, len(nodeInfos))
	for i, ni := range nodeInfos {
		node := ni.Node()
		if node.Spec.Unschedulable && !corev1helpers.TolerationsTolerateTaint(logger, pod.Spec.Tolerations, &unschedulableTaint, false) {
			continue
		}
		if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, pod.Spec.Tolerations, hardTaints, false); untolerated {
			continue
		}
		if ok, err := affinity.Match(node); err != nil || !ok {
			continue
		}
		out[i] = true
	}
	return out
}
