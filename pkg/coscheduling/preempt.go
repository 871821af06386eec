package coscheduling

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/fleet"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
	"github.com/gpu-gang/gpu-gang/pkg/preemption"
	"github.com/gpu-gang/gpu-gang/pkg/topology"
)

// Gang-aware preemption replaces kube-scheduler's DefaultPreemption in
// gpu-gang's profile. Package preemption decides; this file asks it and
// evict.go acts on the answer.
//
// When a gang does not fit, PostFilter asks the engine about exactly the
// members PreFilter could not place, described as PreFilter describes them
// to the planner (buildRequest: the same nodes, eligibility, per-node caps,
// policy and anchors). A plain pod that found no node is a gang of one,
// eligible where only the resource fit or held capacity turned it away.
// What the engine sees as free is what the preemptor may count on:
//   - free capacity less what other gangs hold (their claims, and the head
//     hold unless the preemptor comes first in the queue), and less what is
//     nominated for plain pods of at least its priority, so two preemptors
//     never count on the same room;
//   - plus the room of pods already leaving: pods being deleted and the
//     victims of earlier preemptions. They are never chosen again, and a
//     preemptor that fits once they are gone evicts nothing and waits.
//
// The candidates are every bound pod of lower priority: gang members
// grouped by PodGroup into one unit (evicted whole, or members above
// minMember one by one, never the essential ones; see gang.Essential), and
// every other pod a unit of its own; with the PodDisruptionBudgets that
// cover them. Pods still in flight (waiting in Permit, binding) are not
// candidates: their gang's claim holds their room until it binds or fails.

// ErrReasonAwaitingVictims starts the status of a preemptor that waits for
// the pods it preempted to terminate.
const ErrReasonAwaitingVictims = "waiting for preempted pods to terminate"

// decider chooses victims. *preemption.Engine is the one the plugin runs;
// tests wrap it to see the requests it gets.
type decider interface {
	Decide(ctx context.Context, req *preemption.Request) (*preemption.Decision, error)
}

// candidates are the pods behind a preemption.Request's units.
type candidates struct {
	// pods[u][i] is the pod of Units[u].Pods[i], as the informer has it.
	pods [][]*v1.Pod
	// specs[u] is the gang of unit u; nil for a plain pod, or for a gang
	// whose PodGroup is gone.
	specs []*gang.Spec
}

// preemptor is what is being placed by preemption: the members PreFilter
// could not place (a plain pod alone), their gang, and the pod whose
// scheduling cycle asked.
type preemptor struct {
	pod     *v1.Pod
	spec    *gang.Spec // nil for a plain pod
	members []*v1.Pod
	// id names it in the ledger's preemptions (ledger.Owner).
	id string
	// name is the PodGroup's or the pod's namespace/name, for people.
	name     string
	priority int32
}

// preemptorName names a preemptor for people: its PodGroup's or its own
// namespace/name.
func (pl *Plugin) preemptorName(pod *v1.Pod) string {
	if key, ok := pl.unitOf(pod); ok {
		return key.String()
	}
	return pod.Namespace + "/" + pod.Name
}

// preempt tries to make room for pod by evicting pods of lower priority.
// It returns the node nominated for pod when it evicted something, and a
// status saying why not otherwise.
func (pl *Plugin) preempt(ctx context.Context, s *cycleState, pod *v1.Pod, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	p, ok := pl.preemptorOf(s, pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	// The engine would say the same; saying it first spares every pod
	// that cannot preempt the cost of describing the cluster.
	if pp := p.preemptionPolicy(); pp != nil && *pp == v1.PreemptNever {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("preemption: %s has preemptionPolicy %s and evicts nothing", p.name, v1.PreemptNever))
	}
	if !pl.anyBelow(p.priority) {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("preemption: no running pod has a priority below the %d of %s", p.priority, p.name))
	}
	req, dem, cands, status := pl.preemptionRequest(ctx, p, s.held, statuses)
	if status != nil {
		return nil, status
	}
	d, err := pl.decider.Decide(ctx, req)
	if err != nil {
		var no *preemption.NoPreemptionError
		switch {
		case errors.As(err, &no):
			klog.FromContext(ctx).V(4).Info("No preemption", "preemptor", p.name, "reason", no.Reason, "message", no.Message)
			if no.Reason == preemption.ReasonFits {
				return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s fits once the pods already leaving are gone; it evicts nothing and waits for them", p.name))
			}
			// The engine quotes the planner, which names device kinds by
			// their dimensions.
			return nil, fwk.NewStatus(fwk.Unschedulable, "preemption: "+dem.DescribeText(&req.Request, no.Message))
		case errors.Is(err, topology.ErrUnknownLevel):
			// PreFilter explained it with an Event already.
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("preemption for %s: %v", p.name, err))
		}
		return nil, fwk.AsStatus(fmt.Errorf("deciding preemption for %s: %w", p.name, err))
	}
	return pl.carryOut(ctx, p, req, dem.Requests, cands, d)
}

// anyBelow reports whether any pod in the snapshot has a priority below
// prio: without one, nothing can be preempted.
func (pl *Plugin) anyBelow(prio int32) bool {
	nodeInfos, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return true // let the full request report it
	}
	for _, ni := range nodeInfos {
		for _, pi := range ni.GetPods() {
			if corev1helpers.PodPriority(pi.GetPod()) < prio {
				return true
			}
		}
	}
	return false
}

// preemptorOf says what preemption would place for pod: the members
// PreFilter could not place for want of room, or the pod alone outside
// gangs. ok is false when preemption cannot help: the plugin has no
// decider, or the gang waits for members, backs off, could never fit, or
// its plan went stale.
func (pl *Plugin) preemptorOf(s *cycleState, pod *v1.Pod) (*preemptor, bool) {
	if pl.decider == nil {
		return nil, false
	}
	p := &preemptor{pod: pod, members: []*v1.Pod{pod}, id: pl.ownerOf(pod), name: pl.preemptorName(pod),
		priority: corev1helpers.PodPriority(pod)}
	if _, isMember := gang.Of(pod); isMember {
		if len(s.unplaced) == 0 || s.unplacedStatus.Code() != fwk.Unschedulable {
			return nil, false
		}
		p.spec, p.members = s.spec, s.unplaced
		if s.spec != nil && s.spec.Priority != nil {
			// A gang's own priority (a native PodGroup's) is what it
			// preempts with.
			p.priority = *s.spec.Priority
		}
	}
	return p, true
}

// preemptionPolicy is the gang's own policy if its API gives one (a native
// PodGroup's), else the pod's.
func (p *preemptor) preemptionPolicy() *v1.PreemptionPolicy {
	if p.spec != nil && p.spec.PreemptionPolicy != nil {
		return p.spec.PreemptionPolicy
	}
	return p.pod.Spec.PreemptionPolicy
}

// preemptionRequest describes the preemptor and its candidate victims to
// the engine (see the comment at the top of this file), with the members'
// demand it read.
func (pl *Plugin) preemptionRequest(ctx context.Context, p *preemptor, held map[string]capacity.Amounts, statuses fwk.NodeToStatusReader) (*preemption.Request, *dra.PassDemand, *candidates, *fwk.Status) {
	nodeInfos, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, nil, nil, fwk.AsStatus(fmt.Errorf("listing nodes from the snapshot: %w", err))
	}
	// The nodes as PreFilter plans on them (plan.go), so that the
	// engine's request and tree are the planner's.
	sorted := pl.liveNodes(nodeInfos)

	d, status := pl.demandOf(ctx, p.spec, p.members, 0)
	if status != nil {
		return nil, nil, nil, status
	}
	templates, of := templatesOf(p.members, d.Requests)
	markCounted(d, templates, of)
	key := gang.Key{Namespace: p.pod.Namespace, Name: p.pod.Name}
	if p.spec != nil {
		key = p.spec.Key
		pl.gangEligibility(ctx, p.spec, p.members, templates, sorted) // a bad gang leaves no node eligible
	} else {
		templates[0].eligible = preemptibleNodes(sorted, statuses)
	}
	for _, t := range templates {
		if !anyTrue(t.eligible) {
			// No eviction makes room where the member may not run at all.
			return nil, nil, nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("preemption cannot help %s: no node accepts member %s whatever runs there", p.name, t.pod.Name))
		}
	}
	leaving := pl.ledger.Preemptions.PendingVictims()
	req := pl.buildRequest(ctx, key, p.members, d, sorted, pl.roomTaken(p, sorted, held, leaving), templates, of)
	if p.spec != nil {
		if status := pl.shapeRequest(p.spec, p.members, d, req, sorted); status != nil {
			return nil, nil, nil, status
		}
	}
	preq := &preemption.Request{
		Request:  *req,
		Priority: p.priority,
		Now:      pl.clock.Now(),
	}
	if pp := p.preemptionPolicy(); pp != nil {
		preq.PreemptionPolicy = *pp
	}
	cands := pl.addUnits(ctx, preq, p, sorted, leaving, d)
	return preq, d, cands, nil
}

// preemptibleNodes are the nodes on which evicting pods could make room for
// a plain pod: those only the resource fit, or capacity held for gangs,
// turned it away.
func preemptibleNodes(nodeInfos []fwk.NodeInfo, statuses fwk.NodeToStatusReader) []bool {
	out := make([]bool, len(nodeInfos))
	for i, ni := range nodeInfos {
		st := statuses.Get(ni.Node().Name)
		out[i] = st.IsSuccess() || st.Code() == fwk.Unschedulable && (st.Plugin() == names.NodeResourcesFit || st.Plugin() == Name)
	}
	return out
}

// roomTaken is, per node, what the preemptor may not count on beyond what
// pods request: capacity held for other gangs, and nominated for plain pods
// of at least its priority. The room of pods already leaving (being
// deleted, or victims of earlier preemptions) comes back as negative
// amounts. buildRequest subtracts it from the free capacity.
func (pl *Plugin) roomTaken(p *preemptor, nodeInfos []fwk.NodeInfo, held map[string]capacity.Amounts, leaving map[types.UID]bool) map[string]capacity.Amounts {
	out := make(map[string]capacity.Amounts, len(held))
	on := func(node string) capacity.Amounts {
		if out[node] == nil {
			out[node] = capacity.Amounts{}
		}
		return out[node]
	}
	for node, a := range held {
		on(node).Add(a)
	}
	for _, ni := range nodeInfos {
		name := ni.Node().Name
		for _, pi := range ni.GetPods() {
			if q := pi.GetPod(); pl.isLeaving(q, leaving) {
				a := on(name)
				for r, v := range capacity.PodAmounts(q) {
					a[r] -= v
				}
			}
		}
		if a := pl.nominatedOn(name, p.priority, p.id); a != nil {
			on(name).Add(a)
		}
	}
	return out
}

// nominatedOn sums what plain pods nominated to a node ask for, if their
// priority is at least priority: a preemptor's freed room, which no one of
// lower priority may plan into. A gang's room is its claim, held already;
// skip names the preemptor asking, whose own nomination is its room.
func (pl *Plugin) nominatedOn(node string, priority int32, skip string) capacity.Amounts {
	var a capacity.Amounts
	for _, npi := range pl.handle.NominatedPodsForNode(node) {
		q := npi.GetPod()
		if _, member := gang.Of(q); member || (skip != "" && ledger.Owner(q) == skip) || corev1helpers.PodPriority(q) < priority {
			continue
		}
		if a == nil {
			a = capacity.Amounts{}
		}
		a.Add(capacity.PodAmounts(q))
	}
	return a
}

// isLeaving reports whether a pod of the snapshot is leaving its node: it is
// being deleted, or is gone already (the informer may be ahead of the
// snapshot), or is the victim of a preemption still under way.
func (pl *Plugin) isLeaving(q *v1.Pod, victims map[types.UID]bool) bool {
	if q.DeletionTimestamp != nil || victims[q.UID] {
		return true
	}
	obj, ok, err := pl.podIndex.GetByKey(q.Namespace + "/" + q.Name)
	if err != nil {
		return false
	}
	if !ok {
		return true
	}
	live, isPod := obj.(*v1.Pod)
	return isPod && (live.UID != q.UID || live.DeletionTimestamp != nil)
}

// acceleratorCount sums what a requests of accelerators
// (fleet.IsAccelerator): the GPUs the cost order counts.
func acceleratorCount(a capacity.Amounts) int64 {
	var n int64
	for name, q := range a {
		if fleet.IsAccelerator(name) {
			n += q
		}
	}
	return n
}
