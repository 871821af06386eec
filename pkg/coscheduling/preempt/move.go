package preempt

import (
	"context"
	"fmt"
	"math"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/preemption"
)

// Moving running gangs for a waiting one (package consolidate decides
// which). This package describes the waiting gang and the running units
// exactly as a preemption would (request, addUnits), describes a running
// gang to the planner as if its pods were pending, and carries a move out
// as it carries out a preemption: the waiting gang's record and hold, the
// evictions, the nomination. It adds a hold for each moved gang at its new
// place.

// Candidates are the running units a consolidation may choose from for a
// waiting gang, as a preemption describes them, and what it needs to
// describe them again to the planner.
type Candidates struct {
	// Request is the waiting gang as PreFilter planned it, with every
	// running unit of priority at most its own as a Unit; Priority is the
	// gang's. The caller narrows Units to what it may move.
	Request *preemption.Request
	// Pods[u] are the pods of Request.Units[u], as the informer has them.
	Pods [][]*v1.Pod
	// Specs[u] is the gang of Request.Units[u]; nil for a plain pod, or a
	// gang whose PodGroup is gone.
	Specs []*gang.Spec
	// nodes are the live nodes the request was built on, in its order.
	nodes []fwk.NodeInfo
	// held is what other gangs hold, per node, as the waiting gang's
	// PreFilter counted it.
	held map[string]capacity.Amounts
	// perMember is what each of the waiting gang's members requests.
	perMember []capacity.Amounts
}

// Candidates describes p, a waiting gang, and the running units of
// priority at most its own, as Preempt describes a preemptor and its
// victims. held and statuses are as for Preempt.
func (pr *Preempter) Candidates(ctx context.Context, p *Preemptor, held map[string]capacity.Amounts, statuses fwk.NodeToStatusReader) (*Candidates, *fwk.Status) {
	below := p.Priority
	if below < math.MaxInt32 {
		below++
	}
	req, dem, cands, status := pr.request(ctx, p, below, held, statuses)
	if status != nil {
		return nil, status
	}
	nodeInfos, err := pr.cfg.Framework.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("listing nodes from the snapshot: %w", err))
	}
	return &Candidates{Request: req, Pods: cands.pods, Specs: cands.specs, nodes: pr.cfg.Planning.LiveNodes(nodeInfos),
		held: held, perMember: dem.PerMember()}, nil
}

// Relocation is a running gang described to the planner as if its pods
// were pending, with nothing tying it to where it runs now.
type Relocation struct {
	// Request has the gang's pods as Members, in Pods order, on the
	// candidates' nodes.
	Request *placement.Request
	// PerMember is what each pod requests, in Pods order.
	PerMember []capacity.Amounts
}

// Relocate describes a running gang (spec, pods) to the planner as if its
// pods were pending, on the nodes of c with taken (per node) subtracted
// from their free capacity beyond what other gangs hold. It fails for a
// gang the planner cannot be asked about without its running members: one
// with segments or members that share a claim (a hierarchy), or whose pods
// no node accepts.
func (pr *Preempter) Relocate(ctx context.Context, c *Candidates, spec *gang.Spec, pods []*v1.Pod, taken map[string]capacity.Amounts) (*Relocation, error) {
	members := make([]*v1.Pod, len(pods))
	for i, q := range pods {
		// As its job's controller would create it again: no node.
		m := q.DeepCopy()
		m.Spec.NodeName = ""
		members[i] = m
	}
	d, status := pr.cfg.Planning.Demand(ctx, spec, members, c.nodes, nil)
	if status != nil {
		return nil, fmt.Errorf("describing gang %s: %s", spec.Key, status.Message())
	}
	if m := d.Unplaceable(); m != nil {
		return nil, fmt.Errorf("no node accepts pod %s of gang %s", m.Name, spec.Key)
	}
	all := make(map[string]capacity.Amounts, len(c.held)+len(taken))
	for _, from := range []map[string]capacity.Amounts{c.held, taken} {
		for node, a := range from {
			if all[node] == nil {
				all[node] = capacity.Amounts{}
			}
			all[node].Add(a)
		}
	}
	req, status := d.Request(ctx, spec.Key, all)
	if status != nil {
		return nil, fmt.Errorf("describing gang %s: %s", spec.Key, status.Message())
	}
	if req.Hierarchy != nil {
		return nil, fmt.Errorf("gang %s has segments or members sharing a claim, which are placed next to its running members: it is not moved", spec.Key)
	}
	// Its running members are where it is moved from, not where it must
	// stay.
	req.Anchors = nil
	return &Relocation{Request: req, PerMember: d.PerMember()}, nil
}

// MovedGang is a running gang a move evicts, and where it goes.
type MovedGang struct {
	Spec *gang.Spec
	// Pods are its running pods, all evicted.
	Pods []*v1.Pod
	// Relocation and Plan are its new place: Plan.NodeOf[i] is the node
	// for Pods[i].
	Relocation *Relocation
	Plan       *placement.Plan
}

// Move carries out a consolidation for p: req and d are the engine's
// request (the candidates' Request, its Units narrowed) and its decision,
// whose victims are exactly moved's pods. Like a preemption it records the
// move and holds the freed room for p, evicts (each pod marked with why),
// and nominates p's pod; and it holds each moved gang's new place for it
// until the same deadline. The caller reports what happened.
func (pr *Preempter) Move(ctx context.Context, p *Preemptor, c *Candidates, req *preemption.Request, d *preemption.Decision, moved []MovedGang, why string) (*fwk.PostFilterResult, *fwk.Status) {
	var victims []*v1.Pod
	for _, g := range moved {
		victims = append(victims, g.Pods...)
	}
	until := pr.holdForPreemptor(p, req, c.perMember, victims, d)
	for _, g := range moved {
		rq := g.Relocation.Request
		slots := make([]ledger.Slot, len(g.Pods))
		for i, q := range g.Pods {
			slots[i] = ledger.Slot{UID: q.UID, Node: rq.Nodes[g.Plan.NodeOf[i]].Name, Request: g.Relocation.PerMember[i]}
		}
		pr.cfg.Holds.HoldMoved(g.Spec, g.Pods, slots, until, g.Plan, rq)
	}
	where := d.Domain.String()
	if err := pr.evict(ctx, victims, p.Pod.Spec.SchedulerName+": "+why); err != nil {
		pr.evictionFailed(ctx, p, where, err)
		return nil, fwk.AsStatus(fmt.Errorf("consolidation for %s: %w", p.Name, err))
	}
	msg := fmt.Sprintf("%s moved %d gang(s) to land in %s; it waits for their pods to terminate", p.Name, len(moved), where)
	return pr.nominate(p, req, d, msg)
}

// WaitingSince is when p started to wait: when its earliest member was
// created, or its PodGroup if that came later.
func (p *Preemptor) WaitingSince() time.Time { return createdAt(p) }
