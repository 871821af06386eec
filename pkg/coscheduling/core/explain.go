package core

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/eligibility"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Explaining a gang that does not fit: in people's words, with the numbers,
// and telling "not now" from "not while long-running pods stay" from
// "never", which decides whether it may hold as the head.

// explainIneligible fails a gang some of whose members no node accepts at
// all, naming the Filter plugins that turned them away, instead of letting
// the planner report it as a lack of room.
func (pl *Planner) explainIneligible(spec *gang.Spec, templates []*eligibility.Template, nodes int) *fwk.Status {
	for _, t := range templates {
		if t.Rejected != nil {
			msg := fmt.Sprintf("gang %s: member %s is rejected before any node is tried by %s: %s", spec.Key, t.Pod.Name, t.Rejected.Plugin(), t.Rejected.Message())
			pl.reporter.GangEvent(spec, t.Pod, v1.EventTypeWarning, ReasonNoFeasibleNodes, "%s", msg)
			return fwk.NewStatus(t.Rejected.Code(), msg)
		}
		if nodes > 0 && !anyTrue(t.Eligible) {
			msg := fmt.Sprintf("gang %s: no node accepts member %s%s", spec.Key, t.Pod.Name, t.Why())
			pl.reporter.GangEvent(spec, t.Pod, v1.EventTypeWarning, ReasonNoFeasibleNodes, "%s; it is tried again when nodes or pods change", msg)
			return fwk.NewStatus(fwk.Unschedulable, msg)
		}
	}
	return nil
}

func anyTrue(b []bool) bool {
	for _, v := range b {
		if v {
			return true
		}
	}
	return false
}

// explainNoFit turns a failed plan into a status that gives the numbers. It
// plans again against the capacity that can free up, and against an empty
// cluster, to tell "not now" from "not while long-running pods stay" from
// "never". Only a gang that would fit once running jobs finish may hold
// capacity as the head of the queue.
func (pl *Planner) explainNoFit(ctx context.Context, spec *gang.Spec, members []*v1.Pod, req *placement.Request, d *dra.PassDemand,
	fitErr *placement.FitError, othersHold bool) *fwk.Status {
	key := spec.Key
	demand := describeDemand(req, d)
	fitErr = d.DescribeFit(req, fitErr)
	nodeInfos, err := pl.framework.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("listing nodes from the snapshot: %w", err))
	}
	topologyUnsatisfied := func() {
		if req.Policy.Required {
			pl.reporter.GangEvent(spec, nil, v1.EventTypeNormal, ReasonTopologyUnsatisfied,
				"waiting: no single domain of level %s has room for the gang now (%s); it starts when one does%s",
				req.Policy.Level, fitErr.Reason, pl.topologyAdvice(spec))
		}
	}
	eventual := withFree(req, pl.eventualFree(ctx, req, nodeInfos, d))
	if plan, err := pl.placement.Plan(ctx, eventual); err == nil {
		msg := fmt.Sprintf("gang %s needs %s; free capacity fits %d of its %d members now (%s); it fits once running jobs finish",
			key, demand, fitErr.Placed, fitErr.Wanted, fitErr.Reason)
		topologyUnsatisfied()
		if othersHold {
			msg += "; part of the free capacity is held for other gangs being placed"
		}
		pl.holdAsHead(ctx, spec, members, req, d.Requests, plan)
		return fwk.NewStatus(fwk.Unschedulable, msg)
	}
	empty := withFree(req, nil)
	if _, err := pl.placement.Plan(ctx, empty); err != nil {
		var never *placement.FitError
		if !errors.As(err, &never) {
			return fwk.AsStatus(fmt.Errorf("planning gang %s on an empty cluster: %w", key, err))
		}
		never = d.DescribeFit(req, never)
		if status := pl.gangClaims.ExplainSelectorError(spec, d); status != nil {
			return status
		}
		if status := pl.gangClaims.ExplainUnpublished(spec, req, d); status != nil {
			return status
		}
		if status := pl.explainDomainNoFit(ctx, spec, empty, never); status != nil {
			return status
		}
		msg := fmt.Sprintf("gang %s needs %s, but even with all %d nodes empty only %d of its %d members would fit (%s)",
			key, demand, len(req.Nodes), never.Placed, never.Wanted, never.Reason)
		pl.reporter.GangEvent(spec, nil, v1.EventTypeWarning, ReasonGangTooLarge,
			"%s: lower spec.minMember or the members' requests, or add capacity", msg)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	topologyUnsatisfied()
	msg := fmt.Sprintf("gang %s needs %s; it would fit an empty cluster, but pods that do not finish on their own (services, DaemonSets: restartPolicy Always, outside any gang) leave room for too little of it even once every job finishes (%s)",
		key, demand, fitErr.Reason)
	pl.reporter.GangEvent(spec, nil, v1.EventTypeWarning, ReasonPermanentPodsInTheWay,
		"%s; it waits without holding capacity, so other gangs run meanwhile; free capacity or add nodes", msg)
	return fwk.NewStatus(fwk.Unschedulable, msg)
}

// withFree returns a copy of req whose nodes have free capacity free[i], or
// their whole allocatable when free is nil.
func withFree(req *placement.Request, free []placement.Vector) *placement.Request {
	out := *req
	out.Nodes = make([]placement.Node, len(req.Nodes))
	for i, n := range req.Nodes {
		if free == nil {
			n.Free = n.Allocatable
		} else {
			n.Free = free[i]
		}
		out.Nodes[i] = n
	}
	return &out
}

// eventualFree is, per node of req, the capacity that is free once every
// pod that finishes on its own has finished: allocatable less what pods
// that stay request, and, for dimensions devices serve, less the devices
// their claims hold. Pods stay when they are outside any gang and restart
// always (services, DaemonSets, static pods); gang members and batch pods
// finish.
func (pl *Planner) eventualFree(ctx context.Context, req *placement.Request, nodeInfos []fwk.NodeInfo, d *dra.PassDemand) []placement.Vector {
	byName := make(map[string]fwk.NodeInfo, len(nodeInfos))
	for _, ni := range nodeInfos {
		byName[ni.Node().Name] = ni
	}
	dims := make([]v1.ResourceName, len(req.Resources))
	for i, name := range req.Resources {
		dims[i] = v1.ResourceName(name)
	}
	cols := d.Columns(dims)
	out := make([]placement.Vector, len(req.Nodes))
	for i, n := range req.Nodes {
		free := n.Allocatable.Clone()
		ni, ok := byName[n.Name]
		if !ok {
			out[i] = free
			continue
		}
		var staying []*v1.Pod
		for _, pi := range ni.GetPods() {
			if p := pi.GetPod(); stays(p) {
				staying = append(staying, p)
			}
		}
		var held capacity.Bits
		if d.Devices != nil && len(staying) > 0 {
			held = pl.devices.AllocatedPositions(d.Devices, n.Name, staying)
		}
		for c := range cols {
			if cols[c].MayUseDevices && cols[c].Devices.ServedByDevices(ctx, dra.NodeCapacity{Info: ni}) {
				free[c] -= cols[c].Devices.Counted(ctx, dra.NodeCapacity{Info: ni}, held)
				continue
			}
			for _, p := range staying {
				free[c] -= capacity.PodAmounts(p)[cols[c].Name]
			}
		}
		out[i] = free
	}
	return out
}

// stays reports whether a pod keeps its node until someone removes it.
func stays(p *v1.Pod) bool {
	if _, member := gang.Of(p); member || p.DeletionTimestamp != nil {
		return false
	}
	return p.Spec.RestartPolicy == v1.RestartPolicyAlways || p.Spec.RestartPolicy == ""
}

// checkMinResources honours a PodGroup's minResources for what the gang
// still misses: the declared total, less what its placed members request,
// must fit in the cluster's free capacity (less what other gangs hold), and
// could ever fit in its allocatable.
func (pl *Planner) checkMinResources(ctx context.Context, spec *gang.Spec, nodeInfos []fwk.NodeInfo, held map[string]capacity.Amounts, placed []*v1.Pod, d *dra.PassDemand) *fwk.Status {
	if len(spec.MinResources) == 0 {
		return nil
	}
	have := capacity.Amounts{}
	for _, p := range placed {
		have.Add(capacity.PodAmounts(p))
	}
	names := make([]v1.ResourceName, 0, len(spec.MinResources))
	for name := range spec.MinResources {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	for _, name := range names {
		q := spec.MinResources[name]
		want := q.Value()
		if name == v1.ResourceCPU {
			want = q.MilliValue()
		}
		var total, free int64
		col := d.Columns([]v1.ResourceName{name})[0]
		for _, ni := range nodeInfos {
			total += col.Allocatable(ctx, ni)
			free += col.Free(ctx, ni, held[ni.Node().Name])
		}
		if total < want {
			msg := fmt.Sprintf("gang %s: spec.minResources asks for %s %s, but the cluster has %s in all",
				spec.Key, placement.FormatQuantity(string(name), want), name, placement.FormatQuantity(string(name), total))
			pl.reporter.GangEvent(spec, nil, v1.EventTypeWarning, ReasonGangTooLarge, "%s: lower spec.minResources or add capacity", msg)
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
		}
		if missing := want - have[name]; missing > free {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s: spec.minResources asks for %s %s; its placed members hold %s, and %s is free now",
				spec.Key, placement.FormatQuantity(string(name), want), name, placement.FormatQuantity(string(name), have[name]), placement.FormatQuantity(string(name), free)))
		}
	}
	return nil
}

// describeDemand summarises members by shape in rank order of first
// appearance: "1 × {cpu=2} + 3 × {cpu=4 nvidia.com/gpu=8}". Device
// dimensions are named by what they take ("gpu.nvidia.com devices"); union
// dimensions, which only keep overlapping kinds exact, are left out.
func describeDemand(req *placement.Request, d *dra.PassDemand) string {
	names := make([]string, len(req.Resources))
	show := make([]bool, len(req.Resources))
	for i, name := range req.Resources {
		names[i] = d.Describe(name)
		show[i] = !d.IsUnion(v1.ResourceName(name))
	}
	var shapes []string
	count := map[string]int{}
	for i := range req.Members {
		v := req.Members[i].Request.Clone()
		for j := range v {
			if !show[j] {
				v[j] = 0
			}
		}
		s := placement.Describe(names, v)
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
