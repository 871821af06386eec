package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/contract"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/eligibility"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/topology"
)

// PlanGang is the capacity pre-check. It plans members (the gang's next
// members in rank order, or a running gang's replacement) node by node: in
// the snapshot's free capacity less what other gangs hold, on nodes every
// Filter plugin of the profile accepts, next to the gang's members that
// already hold a node. It holds the plan until the attempt's deadline.
//
// A gang that does not fit holds nothing, except that the first such gang
// in queue order may hold its plan's places for a bounded time (see
// hold.go). The status says why: Unschedulable if room can free up,
// UnschedulableAndUnresolvable (with an Event) if the gang could never fit.
func (pl *Planner) PlanGang(ctx context.Context, spec *gang.Spec, members []*v1.Pod, held map[string]capacity.Amounts) *fwk.Status {
	logger := klog.FromContext(ctx)
	key := spec.Key
	nodeInfos, err := pl.framework.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("listing nodes from the snapshot: %w", err))
	}
	sorted := pl.snapshot.Live(nodeInfos, pl.nodeGeneration.Load(), pl.LiveNodes)
	held = pl.WithNominated(held, sorted, corev1helpers.PodPriority(members[0]))
	placed := pl.placedMembers(key)
	d, status := pl.DemandOf(ctx, spec, members, 0)
	if status != nil {
		return status
	}
	if status := pl.checkMinResources(ctx, spec, sorted, held, placed, d); status != nil {
		return status
	}
	var req *placement.Request
	// The request's nodes, and their generations, are lent by the node
	// view until the plan is done.
	var gens []int64
	release, releaseRoomy := func() {}, func() {}
	defer func() { release(); releaseRoomy() }()
	var plan *placement.Plan
	var fp uint64
	var templates []*eligibility.Template
	var of []int
	var rails *railPass
	// A firstAvailable request plans with its first alternative; only when
	// the gang does not fit with it are the next ones tried, in order.
	for alt := 0; ; alt++ {
		templates, of = eligibility.TemplatesOf(members, d.Requests)
		MarkCounted(d, templates, of)
		pl.eligibility.PreFilter(ctx, templates, sorted, pl.ledger.Lessons.View(key))
		// Members share their template's eligibility slice, which Filter
		// fills in place (eligibility.Runner.RoomyFirst).
		release()
		req, gens, release = pl.lendRequest(ctx, key, members, d, sorted, held, templates, of, true)
		releaseRoomy()
		var rest func()
		rest, releaseRoomy = pl.eligibility.RoomyFirst(ctx, &pl.snapshot, !pl.fullScan, templates, sorted, gens, req)
		// A ComputeDomain's gang is placed on whole cliques apart from other
		// domains (computedomain_apart.go), which needs every node filtered.
		if rest != nil && (eligibility.SomeIneligible(templates) || pl.inComputeDomain(members)) {
			rest()
			rest = nil
		}
		if status := pl.placeComputeDomain(spec, members, templates, sorted, req); status != nil {
			return status
		}
		if status := pl.explainIneligible(spec, templates, len(sorted)); status != nil {
			return status
		}
		if status := pl.shapeRequest(spec, members, d, req, sorted); status != nil {
			return status
		}
		if rails, status = pl.railsOf(ctx, spec, d, req); status != nil {
			return status
		}
		planner := rails.planner(pl.placement)
		plan, fp, err = pl.feasiblePlan(ctx, key, members, req, sorted, templates, of, planner)
		if err != nil && rest != nil {
			rest()
			plan, fp, err = pl.feasiblePlan(ctx, key, members, req, sorted, templates, of, planner)
		}
		var fitErr *placement.FitError
		if err == nil || !errors.As(err, &fitErr) || alt+1 >= d.Alternatives {
			break
		}
		if d, status = pl.DemandOf(ctx, spec, members, alt+1); status != nil {
			return status
		}
	}
	if err != nil {
		var fitErr *placement.FitError
		var unfit *unfitError
		switch {
		case errors.Is(err, topology.ErrUnknownLevel):
			pl.reporter.GangEvent(spec, nil, v1.EventTypeWarning, scheduling.ReasonInvalidPodGroup,
				"topology level %q is not one the scheduler is configured with: %v; name a configured level's label key or %s", req.Policy.Level, err, scheduling.HostnameKey)
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gang %s: %v", key, err))
		case errors.As(err, &unfit):
			pl.reporter.GangEvent(spec, nil, v1.EventTypeWarning, ReasonFilterRejectsPlan,
				"no plan for %d member(s) passes the scheduler's filters: %v; it is tried again when the cluster changes", len(members), unfit)
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s: %v", key, unfit))
		case errors.As(err, &fitErr) && rails.blocks(ctx, pl.placement, req):
			return pl.explainRails(spec, rails, req)
		case errors.As(err, &fitErr):
			return pl.explainNoFit(ctx, spec, members, req, d, fitErr, len(held) > 0)
		}
		return fwk.AsStatus(fmt.Errorf("planning gang %s: %w", key, err))
	}
	// The plan's Event (GangScheduled) says which firstAvailable
	// alternatives it took.
	plan.Summary += d.Chosen() + pl.DomainNote(key) + rails.note(plan) + pl.unalignedNote(ctx, spec, d, req, plan)
	slots := make([]ledger.Slot, len(members))
	for i, p := range members {
		slots[i] = ledger.Slot{UID: p.UID, Node: req.Nodes[plan.NodeOf[i]].Name, Request: d.Requests[i]}
	}
	if wasHead := pl.ledger.HoldPlan(key, slots, pl.clock.Now().Add(pl.Timeout(spec)), plan, fp); wasHead {
		pl.reporter.HoldEnded(true)
	}
	pl.realign.Delete(key)
	// The fences of an earlier plan fence its nodes, not this one's.
	pl.gangClaims.Fences().Forget(key)
	logger.V(4).Info("Planned gang", "podGroup", key, "members", len(members), "plan", plan.Summary)
	if status := pl.gangClaims.AllocateShared(ctx, spec, members, d, req, plan); status != nil {
		return status
	}
	if status := pl.gangClaims.AllocateAligned(ctx, spec, members, d, req, plan, rails.aligned()); status != nil {
		return status
	}
	// Members turned away before (for capacity, or while a sibling was
	// gated) wait in the unschedulable queue, and a new plan is no cluster
	// event: bring them back now that they have a place.
	pl.queue.Activate(key)
	return nil
}

// LiveNodes returns the snapshot's nodes in name order, less those the node
// informer no longer has: a cycle's snapshot can lag behind a node's
// deletion, and the API server binds pods to nodes that do not exist.
func (pl *Planner) LiveNodes(nodeInfos []fwk.NodeInfo) []fwk.NodeInfo {
	type named struct {
		name string
		ni   fwk.NodeInfo
	}
	live := make([]named, 0, len(nodeInfos))
	for _, ni := range nodeInfos {
		if name := ni.Node().Name; pl.nodeExists(name) {
			live = append(live, named{name, ni})
		}
	}
	slices.SortFunc(live, func(a, b named) int { return strings.Compare(a.name, b.name) })
	out := make([]fwk.NodeInfo, len(live))
	for i, n := range live {
		out[i] = n.ni
	}
	return out
}

// nodeExists reports whether the node informer has the node.
func (pl *Planner) nodeExists(name string) bool {
	_, err := pl.nodeLister.Get(name)
	return err == nil
}

// placedMembers returns the gang's members that hold a node: bound ones,
// and reserved ones with the node they reserved.
func (pl *Planner) placedMembers(key gang.Key) []*v1.Pod {
	members, err := pl.gangs.Members(key)
	if err != nil {
		return nil
	}
	reserved := pl.ledger.Reservations.ReservedBy(key)
	var out []*v1.Pod
	for _, p := range members {
		if p.Spec.NodeName != "" {
			out = append(out, p)
			continue
		}
		if r, ok := reserved[p.UID]; ok {
			q := p.DeepCopy()
			q.Spec.NodeName = r.Node
			out = append(out, q)
		}
	}
	return out
}

// buildRequest describes the members and the nodes to a planner. Nodes come
// in name order; d holds the members' requests (DemandOf). The request's
// nodes are its own.
func (pl *Planner) buildRequest(ctx context.Context, key gang.Key, members []*v1.Pod, d *dra.PassDemand, nodeInfos []fwk.NodeInfo, held map[string]capacity.Amounts,
	templates []*eligibility.Template, of []int) *placement.Request {
	req, _, _ := pl.lendRequest(ctx, key, members, d, nodeInfos, held, templates, of, false)
	return req
}

// lendRequest is buildRequest whose nodes, when lend is set, may be the
// planning snapshot's own (eligibility.Snapshot.Nodes): the caller plans with the request and
// calls release before the next plan, and does not keep it after. gens
// are the nodes' generations when the view lent them, else nil.
func (pl *Planner) lendRequest(ctx context.Context, key gang.Key, members []*v1.Pod, d *dra.PassDemand, nodeInfos []fwk.NodeInfo, held map[string]capacity.Amounts,
	templates []*eligibility.Template, of []int, lend bool) (*placement.Request, []int64, func()) {
	dims := Dimensions(d.Requests)
	cols := d.Columns(dims)
	nodes, gens, epoch, release := pl.snapshot.Nodes(ctx, nodeInfos, dims, cols, held, lend)
	ms := make([]placement.Member, len(members))
	accelerated := make([]bool, len(members))
	for i, p := range members {
		t := templates[of[i]]
		accelerated[i] = d.Accelerated(i)
		ms[i] = placement.Member{
			Name:        p.Namespace + "/" + p.Name,
			Rank:        i,
			Request:     toVector(dims, d.Requests[i]),
			Eligible:    t.Eligible,
			Accelerated: accelerated[i],
			MaxPerNode:  t.PerNode,
		}
	}
	return &placement.Request{
		Gang:           key.String(),
		Resources:      dimNames(dims),
		Nodes:          nodes,
		NodeGeneration: pl.nodeGeneration.Load(),
		LabelsEpoch:    epoch,
		// The view's vectors are never written (nodeVectors), and held
		// nodes get fresh ones per plan.
		StableFree: lend,
		Members:    ms,
		Groups:     gangGroups(templates, of, accelerated, nodes, epoch),
	}, gens, release
}

// gangGroups asks for the groups of nodes the gang's accelerated members
// must not mix. A PreFilter plugin whose policy groups nodes (GPUFleet's
// uniform gangs: one GPU product, driver and capacity type) leaves a
// placement.Grouper in the CycleState of the members it binds; eligibility
// ran the profile's PreFilter plugins for each template, so the state of
// the gang's first accelerated member holds it. Nil when no plugin does,
// or when the framework could not run PreFilter plugins for the plugin.
func gangGroups(templates []*eligibility.Template, of []int, accelerated []bool, nodes []placement.Node, epoch uint64) *placement.Groups {
	for i, acc := range accelerated {
		if !acc {
			continue
		}
		state := templates[of[i]].State
		if state == nil {
			return nil
		}
		g, err := contract.ReadNodeGroups(state)
		if err != nil {
			return nil // no plugin groups this member's nodes
		}
		return g.NodeGroups(nodes, epoch)
	}
	return nil
}
