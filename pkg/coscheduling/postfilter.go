package coscheduling

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/eligibility"
)

// PostFilter runs when a pod found no node. A pod whose gang (or which)
// preempted and waits for its victims to go keeps waiting: the victims'
// deletions requeue it. A gang that does not fit, or a plain pod, may
// preempt pods of lower priority (preempt.go). A member that followed its
// gang's plan and was turned away by a Filter plugin other than the
// resource fit teaches the planner: its template is kept off those nodes,
// and the gang gives back what it reserved and plans again at once. A
// member turned away for capacity, or by a rejection that may have gone
// stale within the cycle and no longer holds, means the plan went stale:
// the gang gives back its reservations and tries again after a backoff. A
// pod that held capacity may have turned away is remembered, to be
// activated when the hold ends. A gang that preemption cannot help may
// have movable gangs moved out of a domain for it (consolidate.go).
func (pl *Plugin) PostFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	// A cycle that ended before the gang plugin's PreFilter may have left
	// a fence up (railfence.go): down before preemption reads devices.
	pl.fences.Lower()
	s, err := readState(cs)
	if err != nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if n, waiting := pl.ledger.Preemptions.AwaitingVictims(pl.ownerOf(pod)); waiting {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: %d of the pods preempted for %s have not gone yet; their room is held for it",
			ErrReasonAwaitingVictims, n, pl.preemptorName(pod)))
	}
	key, isMember := pl.unitOf(pod)
	if !isMember || len(s.planNodes) == 0 {
		if len(s.held) > 0 {
			pl.ledger.Blocked.Add(pod)
		}
		p, ok := pl.preemptorOf(s, pod)
		if !ok {
			return nil, fwk.NewStatus(fwk.Unschedulable)
		}
		res, status := pl.preempter.Preempt(ctx, p, s.held, statuses)
		if status.Code() != fwk.Unschedulable || pl.consolidator == nil {
			return res, status
		}
		// Preemption evicts nothing: gangs of the same priority that
		// agreed to move may still free a domain for it.
		if cres, cstatus, acted := pl.consolidator.Consolidate(ctx, p, s.held, statuses); acted {
			return cres, cstatus
		}
		return res, status
	}
	sig := eligibility.FilterSignature(pod, s.request)
	learned := false
	var why []string
	for _, node := range pl.stillRejected(ctx, pod, s.planNodes, statuses) {
		st := statuses.Get(node)
		why = append(why, fmt.Sprintf("%s on %s: %s", st.Plugin(), node, st.Message()))
		if pl.ledger.Lessons.LearnExclusion(key, sig, node) {
			learned = true
		}
	}
	slices.Sort(why)
	if learned {
		pl.ledger.FailPlan(key)
		klog.FromContext(ctx).V(3).Info("Filter turned a member away from its planned nodes: planning again without them",
			"pod", klog.KObj(pod), "podGroup", key, "rejections", why)
		pl.failGang(ctx, key, ReasonGangRejected, fmt.Sprintf("member %s was rejected where the plan put it (%v); planning again without those nodes", pod.Name, why), false)
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s plans again: %v", key, why))
	}
	if pl.ledger.Preemptions.Preempting(pl.ownerOf(pod)) {
		return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: the room preempted for gang %s does not show free yet", ErrReasonAwaitingVictims, key))
	}
	pl.failGang(ctx, key, ReasonGangRejected, fmt.Sprintf("member %s could not be placed on any node of the gang's plan", pod.Name), true)
	return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s gave back its reservations to try a new plan", key))
}

// stillRejected returns the planned nodes a Filter plugin turned the pod
// away from that teach a lesson. Only a Filter plugin's verdict teaches: a
// node missing from the snapshot (deleted since the plan) has none, and a
// resource or held-capacity rejection means the plan went stale. So does a
// rejection that may have gone stale within the cycle
// (eligibility.MayBeStale) and no longer holds.
func (pl *Plugin) stillRejected(ctx context.Context, pod *v1.Pod, planNodes []string, statuses fwk.NodeToStatusReader) []string {
	var out, recheck []string
	var infos []fwk.NodeInfo
	for _, node := range planNodes {
		st := statuses.Get(node)
		if st == nil || st.Plugin() == "" || eligibility.Acceptable(st) || st.Plugin() == Name {
			continue
		}
		if !eligibility.MayBeStale(st) {
			out = append(out, node)
			continue
		}
		if ni, err := pl.handle.SnapshotSharedLister().NodeInfos().Get(node); err == nil {
			recheck, infos = append(recheck, node), append(infos, ni)
		}
	}
	if len(recheck) == 0 {
		return out
	}
	still := pl.core.Eligibility().StillRejects(ctx, pod, infos)
	for i, node := range recheck {
		if still[i] {
			out = append(out, node)
			continue
		}
		st := statuses.Get(node)
		klog.FromContext(ctx).V(3).Info("A Filter rejection of a planned node no longer holds: not learning from it",
			"pod", klog.KObj(pod), "node", node, "plugin", st.Plugin(), "reason", st.Message())
	}
	slices.Sort(out)
	return out
}
