package coscheduling

import (
	"context"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// PreFilter plans the member's gang if it has no plan yet, and restricts the
// member to the nodes its plan has room on. A running gang's replacement is
// planned on its own, next to the gang. For every pod it notes the capacity
// other gangs hold, for Filter.
func (pl *Plugin) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if simulating(ctx) {
		// The plugin itself is asking the profile's other plugins about a
		// member it plans; it has nothing to add.
		return nil, fwk.NewStatus(fwk.Skip)
	}
	key, isMember := gang.Of(pod)
	s := &cycleState{request: podAmounts(pod), held: pl.gangs.heldByOthers(key, pl.queueOrderOf(pod))}
	cs.Write(stateKey, s)
	if !isMember {
		if len(s.held) == 0 {
			return nil, fwk.NewStatus(fwk.Skip)
		}
		return nil, nil
	}
	spec, status := pl.spec(pod, key)
	if status != nil {
		return nil, status
	}
	if until, reason, ok := pl.gangs.backoff(key); ok {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("gang %s retries at %s after: %s", key, until.UTC().Format(time.RFC3339), reason))
	}
	members, err := pl.members(key)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	census := pl.census(key, members)
	var nodes []string
	if pl.running(key, spec, census) {
		if status := pl.planGang(ctx, spec, []*v1.Pod{pod}, s.held); !status.IsSuccess() {
			s.unplaced, s.spec, s.unplacedStatus = []*v1.Pod{pod}, spec, status
			return nil, status
		}
		nodes, _ = pl.gangs.planSlots(key, pod.UID, s.request)
	} else {
		q := gang.QuorumOf(spec.MinMember, census)
		if q.Placed {
			return nil, nil // the attempt in flight has its quorum already
		}
		var planned bool
		nodes, planned = pl.gangs.planSlots(key, pod.UID, s.request)
		if !planned {
			pending := pl.pending(key, members)
			if len(pending) < int(q.Missing) {
				return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
					fmt.Sprintf("waiting for members of PodGroup %s: %d more must be placed but %d are pending", key, q.Missing, len(pending)))
			}
			gang.SortByRank(pending)
			if status := pl.planGang(ctx, spec, pending[:q.Missing], s.held); !status.IsSuccess() {
				s.unplaced, s.spec, s.unplacedStatus = pending[:q.Missing], spec, status
				return nil, status
			}
			nodes, _ = pl.gangs.planSlots(key, pod.UID, s.request)
		}
	}
	if len(nodes) == 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, ErrReasonNoSlot)
	}
	s.planNodes = nodes
	return &fwk.PreFilterResult{NodeNames: sets.New(nodes...)}, nil
}

// pending returns the members that have no node and no reservation and
// that the scheduler may place: a member with scheduling gates (a queueing
// system holds it) is not planned, so that its siblings do not hold nodes
// for it in Permit until the gang times out.
func (pl *Plugin) pending(key gang.Key, members []*v1.Pod) []*v1.Pod {
	reserved := pl.gangs.reservations(key)
	var out []*v1.Pod
	for _, p := range members {
		if _, ok := reserved[p.UID]; !ok && p.Spec.NodeName == "" && len(p.Spec.SchedulingGates) == 0 {
			out = append(out, p)
		}
	}
	return out
}

// PreFilterExtensions returns nil: held capacity does not change when
// preemption simulates adding or removing pods.
func (pl *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter keeps a pod out of capacity that other gangs' plans hold.
func (pl *Plugin) Filter(_ context.Context, cs fwk.CycleState, _ *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	s, err := readState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	held := s.held[ni.Node().Name]
	if held == nil {
		return nil
	}
	if ok, _ := fitsWithHeld(ni, s.request, held); !ok {
		return fwk.NewStatus(fwk.Unschedulable, ErrReasonHeld)
	}
	return nil
}

// PostFilter runs when a pod found no node. A pod whose gang (or which)
// preempted and waits for its victims to go keeps waiting: the victims'
// deletions requeue it. A gang that does not fit, or a plain pod, may
// preempt pods of lower priority (preempt.go). A member that followed its
// gang's plan and was turned away by a Filter plugin other than the
// resource fit teaches the planner: its template is kept off those nodes,
// and the gang gives back what it reserved and plans again at once. A member
// turned away for capacity means the plan went stale: the gang gives back
// its reservations and tries again after a backoff. A pod that held
// capacity may have turned away is remembered, to be activated when the
// hold ends.
func (pl *Plugin) PostFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	s, err := readState(cs)
	if err != nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if n, waiting := pl.gangs.awaitingVictims(preemptorID(pod)); waiting {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: %d of the pods preempted for %s have not gone yet; their room is held for it",
			ErrReasonAwaitingVictims, n, preemptorName(pod)))
	}
	key, isMember := gang.Of(pod)
	if !isMember || len(s.planNodes) == 0 {
		if len(s.held) > 0 {
			pl.gangs.block(pod)
		}
		return pl.preempt(ctx, s, pod, statuses)
	}
	sig := filterSignature(pod, s.request)
	learned := false
	var why []string
	for _, node := range s.planNodes {
		st := statuses.Get(node)
		// Only a Filter plugin's verdict teaches: a node missing from the
		// snapshot (deleted since the plan) has none, and a resource or
		// held-capacity rejection means the plan went stale.
		if st == nil || st.Plugin() == "" || acceptable(st) || st.Plugin() == Name {
			continue
		}
		why = append(why, fmt.Sprintf("%s on %s: %s", st.Plugin(), node, st.Message()))
		if pl.gangs.learnExclusion(key, sig, node) {
			learned = true
		}
	}
	slices.Sort(why)
	if learned {
		pl.gangs.failClaimPlan(key)
		klog.FromContext(ctx).V(3).Info("Filter turned a member away from its planned nodes: planning again without them",
			"pod", klog.KObj(pod), "podGroup", key, "rejections", why)
		pl.failGang(ctx, key, ReasonGangRejected, fmt.Sprintf("member %s was rejected where the plan put it (%v); planning again without those nodes", pod.Name, why), false)
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s plans again: %v", key, why))
	}
	if pl.gangs.preempting(preemptorID(pod)) {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: the room preempted for gang %s does not show free yet", ErrReasonAwaitingVictims, key))
	}
	pl.failGang(ctx, key, ReasonGangRejected, fmt.Sprintf("member %s could not be placed on any node of the gang's plan", pod.Name), true)
	return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s gave back its reservations to try a new plan", key))
}
