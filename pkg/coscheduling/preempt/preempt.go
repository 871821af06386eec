// Package preempt is the coscheduling plugin's gang-aware preemption, which
// replaces kube-scheduler's DefaultPreemption in gpu-gang's profile.
// Package preemption decides; this package asks it (preempt.go, victims.go,
// budgets.go) and acts on the answer (evict.go). move.go does the same for
// package consolidate, which moves movable gangs. What it needs of the plugin
// (its gangs, its planning, its holds, its Events) comes through the small
// interfaces of gangs.go.
//
// When a gang does not fit, PostFilter asks the engine about exactly the
// members PreFilter could not place, described as PreFilter describes them
// to the planner (Planning: the same nodes, eligibility, per-node caps,
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
package preempt

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
	"github.com/gpu-gang/gpu-gang/pkg/fleet"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
	"github.com/gpu-gang/gpu-gang/pkg/preemption"
	"github.com/gpu-gang/gpu-gang/pkg/topology"
)

// ErrReasonAwaitingVictims starts the status of a preemptor that waits for
// the pods it preempted to terminate.
const ErrReasonAwaitingVictims = "waiting for preempted pods to terminate"

// Reasons of the Events a preemption records.
const (
	// ReasonPreempted: on a victim's PodGroup (or a plain victim pod): the
	// gang, or some of its members above minMember, were preempted; the
	// note names the preemptor, its priority and where it lands.
	ReasonPreempted = "Preempted"
	// ReasonPreempting: on the preemptor's PodGroup (or pod): it evicted
	// pods of lower priority to fit; the note names the victims.
	ReasonPreempting = "Preempting"
	// ReasonPreemptionFailed: the chosen victims could not be evicted; the
	// preemptor backs off and decides again.
	ReasonPreemptionFailed = "PreemptionFailed"
)

// Preemptor is what is being placed by preemption: the members PreFilter
// could not place (a plain pod alone), their gang, and the pod whose
// scheduling cycle asked.
type Preemptor struct {
	// Pod is the pod whose scheduling cycle asked.
	Pod *v1.Pod
	// Spec is the gang's; nil for a plain pod.
	Spec *gang.Spec
	// Members are the pods to place: the gang's members PreFilter could
	// not place, or Pod alone.
	Members []*v1.Pod
	// ID names it in the ledger's preemptions (Gangs.OwnerOf).
	ID string
	// Name is the PodGroup's or the pod's namespace/name, for people.
	Name string
	// Priority is what it preempts with: the gang's own priority if its
	// API gives one, else the pod's.
	Priority int32
}

// candidates are the pods behind a preemption.Request's units.
type candidates struct {
	// pods[u][i] is the pod of Units[u].Pods[i], as the informer has it.
	pods [][]*v1.Pod
	// specs[u] is the gang of unit u; nil for a plain pod, or for a gang
	// whose PodGroup is gone.
	specs []*gang.Spec
}

// Preempt tries to make room for p by evicting pods of lower priority.
// held is what other gangs hold, per node, as the preemptor's PreFilter
// counted it; statuses are the Filter verdicts of p.Pod's cycle. It returns
// the node nominated for p.Pod when it evicted something, and a status
// saying why not otherwise.
func (pr *Preempter) Preempt(ctx context.Context, p *Preemptor, held map[string]capacity.Amounts, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	if pr.cfg.Decider == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	// The engine would say the same; saying it first spares every pod
	// that cannot preempt the cost of describing the cluster.
	if pp := p.preemptionPolicy(); pp != nil && *pp == v1.PreemptNever {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("preemption: %s has preemptionPolicy %s and evicts nothing", p.Name, v1.PreemptNever))
	}
	if !pr.anyBelow(p.Priority) {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("preemption: no running pod has a priority below the %d of %s", p.Priority, p.Name))
	}
	req, dem, cands, status := pr.request(ctx, p, p.Priority, held, statuses)
	if status != nil {
		return nil, status
	}
	d, err := pr.cfg.Decider.Decide(ctx, req)
	if err != nil {
		var no *preemption.NoPreemptionError
		switch {
		case errors.As(err, &no):
			klog.FromContext(ctx).V(4).Info("No preemption", "preemptor", p.Name, "reason", no.Reason, "message", no.Message)
			if no.Reason == preemption.ReasonFits {
				return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s fits once the pods already leaving are gone; it evicts nothing and waits for them", p.Name))
			}
			// The engine quotes the planner, which names device kinds by
			// their dimensions.
			return nil, fwk.NewStatus(fwk.Unschedulable, "preemption: "+dem.Explain(&req.Request, no.Message))
		case errors.Is(err, topology.ErrUnknownLevel):
			// PreFilter explained it with an Event already.
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("preemption for %s: %v", p.Name, err))
		}
		return nil, fwk.AsStatus(fmt.Errorf("deciding preemption for %s: %w", p.Name, err))
	}
	return pr.execute(ctx, p, req, dem.PerMember(), cands, d)
}

// Request describes p and its candidate victims to the engine, as Preempt
// does before it decides. The benchmarks measure it.
func (pr *Preempter) Request(ctx context.Context, p *Preemptor, held map[string]capacity.Amounts, statuses fwk.NodeToStatusReader) (*preemption.Request, *fwk.Status) {
	req, _, _, status := pr.request(ctx, p, p.Priority, held, statuses)
	return req, status
}

// anyBelow reports whether any pod in the snapshot has a priority below
// prio: without one, nothing can be preempted.
func (pr *Preempter) anyBelow(prio int32) bool {
	nodeInfos, err := pr.cfg.Framework.SnapshotSharedLister().NodeInfos().List()
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

// preemptionPolicy is the gang's own policy if its API gives one (a native
// PodGroup's), else the pod's.
func (p *Preemptor) preemptionPolicy() *v1.PreemptionPolicy {
	if p.Spec != nil && p.Spec.PreemptionPolicy != nil {
		return p.Spec.PreemptionPolicy
	}
	return p.Pod.Spec.PreemptionPolicy
}

// request describes the preemptor and its candidate victims to the engine
// (see the package comment), with the members' demand it read. The
// candidates are the units of priority below below: the preemptor's own
// priority for a preemption, one above it for a consolidation (move.go).
func (pr *Preempter) request(ctx context.Context, p *Preemptor, below int32, held map[string]capacity.Amounts, statuses fwk.NodeToStatusReader) (*preemption.Request, Demand, *candidates, *fwk.Status) {
	nodeInfos, err := pr.cfg.Framework.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, nil, nil, fwk.AsStatus(fmt.Errorf("listing nodes from the snapshot: %w", err))
	}
	// The nodes as PreFilter plans on them, so that the engine's request
	// and tree are the planner's.
	sorted := pr.cfg.Planning.LiveNodes(nodeInfos)

	key := gang.Key{Namespace: p.Pod.Namespace, Name: p.Pod.Name}
	var eligible []bool
	if p.Spec != nil {
		key = p.Spec.Key
	} else {
		eligible = preemptibleNodes(sorted, statuses, pr.cfg.PluginName)
	}
	d, status := pr.cfg.Planning.Demand(ctx, p.Spec, p.Members, sorted, eligible)
	if status != nil {
		return nil, nil, nil, status
	}
	if m := d.Unplaceable(); m != nil {
		// No eviction makes room where the member may not run at all.
		return nil, nil, nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("preemption cannot help %s: no node accepts member %s whatever runs there", p.Name, m.Name))
	}
	leaving := pr.cfg.Preemptions.PendingVictims()
	req, status := d.Request(ctx, key, pr.roomTaken(p, sorted, held, leaving))
	if status != nil {
		return nil, nil, nil, status
	}
	preq := &preemption.Request{
		Request:  *req,
		Priority: p.Priority,
		Now:      pr.cfg.Clock.Now(),
	}
	if pp := p.preemptionPolicy(); pp != nil {
		preq.PreemptionPolicy = *pp
	}
	unitsOf := p
	if below != p.Priority {
		q := *p
		q.Priority = below
		unitsOf = &q
	}
	cands := pr.addUnits(ctx, preq, unitsOf, sorted, leaving, d)
	return preq, d, cands, nil
}

// preemptibleNodes are the nodes on which evicting pods could make room for
// a plain pod: those only the resource fit, or capacity held for gangs
// (plugin), turned it away.
func preemptibleNodes(nodeInfos []fwk.NodeInfo, statuses fwk.NodeToStatusReader, plugin string) []bool {
	out := make([]bool, len(nodeInfos))
	for i, ni := range nodeInfos {
		st := statuses.Get(ni.Node().Name)
		out[i] = st.IsSuccess() || st.Code() == fwk.Unschedulable && (st.Plugin() == names.NodeResourcesFit || st.Plugin() == plugin)
	}
	return out
}

// roomTaken is, per node, what the preemptor may not count on beyond what
// pods request: capacity held for other gangs, and nominated for plain pods
// of at least its priority. The room of pods already leaving (being
// deleted, or victims of earlier preemptions) comes back as negative
// amounts. Demand.Request subtracts it from the free capacity.
func (pr *Preempter) roomTaken(p *Preemptor, nodeInfos []fwk.NodeInfo, held map[string]capacity.Amounts, leaving map[types.UID]bool) map[string]capacity.Amounts {
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
			if q := pi.GetPod(); pr.isLeaving(q, leaving) {
				a := on(name)
				for r, v := range capacity.PodAmounts(q) {
					a[r] -= v
				}
			}
		}
		if a := NominatedRoom(pr.cfg.Framework, name, p.Priority, p.ID); a != nil {
			on(name).Add(a)
		}
	}
	return out
}

// Nominator lists the pods the scheduling queue nominated to a node.
// fwk.Handle satisfies it.
type Nominator interface {
	NominatedPodsForNode(nodeName string) []fwk.PodInfo
}

// NominatedRoom sums what plain pods nominated to a node ask for, if their
// priority is at least priority: a preemptor's freed room, which no one of
// lower priority may plan into. A gang's room is its claim, held already;
// skip names the preemptor asking (ledger.Owner), whose own nomination is
// its room; "" skips nothing.
func NominatedRoom(n Nominator, node string, priority int32, skip string) capacity.Amounts {
	var a capacity.Amounts
	for _, npi := range n.NominatedPodsForNode(node) {
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
func (pr *Preempter) isLeaving(q *v1.Pod, victims map[types.UID]bool) bool {
	if q.DeletionTimestamp != nil || victims[q.UID] {
		return true
	}
	obj, ok, err := pr.cfg.Pods.GetByKey(q.Namespace + "/" + q.Name)
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

// PreemptorBound is told of each pod that was bound. Once the members a
// preemptor preempted for are bound (for a gang, minMember of its members),
// it observes the preemptor's time to bound and forgets its preemption.
func (pr *Preempter) PreemptorBound(pod *v1.Pod) {
	gangs := pr.cfg.Gangs
	id := gangs.OwnerOf(pod)
	created, minMember, all, ok := pr.cfg.Preemptions.MemberBound(id, pod.UID)
	if !ok {
		return
	}
	if key, isMember := gangs.UnitOf(pod); isMember && !all {
		var bound bool
		if u, view, err := gangs.Unit(key); err == nil {
			bound = u.QuorumWith(view, minMember).Bound
		} else if members, err := gangs.Members(key); err == nil {
			// The gang's object is gone: its members still count
			// against what the preemption recorded.
			bound = gang.QuorumOf(minMember, gangs.Census(key, members)).Bound
		}
		if !bound {
			return
		}
	}
	if pr.cfg.Preemptions.End(id) {
		since := pr.cfg.Clock.Since(created)
		pr.cfg.Reporter.PreemptorBound(since)
		pr.cfg.Logger.V(2).Info("Preemptor bound", "preemptor", id, "sinceCreated", since)
	}
}
