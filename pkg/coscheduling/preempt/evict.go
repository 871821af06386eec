package preempt

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	apipod "k8s.io/kubernetes/pkg/api/v1/pod"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
	"github.com/gpu-gang/gpu-gang/pkg/preemption"
)

// Carrying out a preemption decision. The order matters:
//  1. Remember the preemption (ledger.Preemptions) before the first
//     eviction, so that a deletion the informer reports at once is counted,
//     and no other preemptor chooses these victims or counts on their room.
//  2. Hold the room for the whole preemptor: a gang's claim takes the
//     engine's plan, so every member is pinned to its node (PreFilter's
//     planSlots) and other pods and gangs stay out of it (Filter, and the
//     free capacity every plan and preemption starts from). The pod whose
//     cycle asked is also nominated to its node, as kube-scheduler nominates
//     a preemptor. A plain pod has no claim; its nomination holds its room
//     from pods of no higher priority, and other preemptions subtract it.
//  3. Evict: each victim gets the DisruptionTarget condition (reason
//     PreemptionByScheduler, naming the preemptor) and is deleted with its
//     own grace period, as kube-scheduler's preemption does.
//  4. Say what happened: Events on the victims' PodGroups (or pods) and on
//     the preemptor, and the metrics.
//
// The members wait (PostFilter) until every victim is gone; the victims'
// deletions requeue them. The claim and the record last the victims'
// longest grace period plus victimWaitSlack, plus the gang's schedule
// timeout; the record goes when the preemptor binds (PreemptorBound) or
// goes away, the claim with the gang's state.

// victimWaitSlack is added to the victims' longest grace period to bound the
// wait for them: a kubelet confirms a deletion some seconds after the grace
// period, and a victim on a node that is down never goes.
const victimWaitSlack = 30 * time.Second

// defaultGracePeriod is the pod API's default terminationGracePeriodSeconds.
const defaultGracePeriod = 30 * time.Second

// execute evicts a decision's victims and holds their room for the
// preemptor (see above).
func (pr *Preempter) execute(ctx context.Context, p *Preemptor, req *preemption.Request, reqs []capacity.Amounts, cands *candidates, d *preemption.Decision) (*fwk.PostFilterResult, *fwk.Status) {
	logger := klog.FromContext(ctx)
	var victims []*v1.Pod
	for _, v := range d.Victims {
		for _, i := range v.Pods {
			victims = append(victims, cands.pods[v.Unit][i])
		}
	}
	pr.holdForPreemptor(p, req, reqs, victims, d)

	where := d.Domain.String()
	by := fmt.Sprintf("preempted by %s, priority %d, to place it in %s", p.Name, p.Priority, where)
	if err := pr.evict(ctx, victims, p.Pod.Spec.SchedulerName+": "+by); err != nil {
		pr.evictionFailed(ctx, p, where, err)
		return nil, fwk.AsStatus(fmt.Errorf("preemption for %s: %w", p.Name, err))
	}

	pr.cfg.Reporter.Preempted(p.Spec != nil, len(victims))
	logger.V(2).Info("Preempted", "preemptor", p.Name, "priority", p.Priority, "decision", d.Summary, "exact", d.Exact, "cost", d.Cost)
	pr.reportDecision(p, d, cands, by)

	msg := fmt.Sprintf("%s preempted %d pod(s) to land in %s; it waits for them to terminate", p.Name, len(victims), where)
	return pr.nominate(p, req, d, msg)
}

// holdForPreemptor remembers the preemption and holds the room its victims
// free for the whole preemptor (steps 1 and 2 above); it returns when the
// hold ends.
func (pr *Preempter) holdForPreemptor(p *Preemptor, req *preemption.Request, reqs []capacity.Amounts, victims []*v1.Pod, d *preemption.Decision) time.Time {
	until := pr.cfg.Clock.Now().Add(longestGrace(victims) + victimWaitSlack)
	rec := &ledger.Preemption{Victims: make(map[types.UID]bool, len(victims)), Unbound: make(map[types.UID]bool, len(p.Members)),
		Created: createdAt(p)}
	for _, v := range victims {
		rec.Victims[v.UID] = true
	}
	for _, m := range p.Members {
		rec.Unbound[m.UID] = true
	}
	if p.Spec != nil {
		rec.MinMember = p.Spec.MinMember
		until = until.Add(pr.cfg.Holds.Timeout(p.Spec))
	}
	rec.Until = until
	pr.cfg.Preemptions.Start(p.ID, rec)
	if p.Spec != nil {
		slots := make([]ledger.Slot, len(p.Members))
		for i, m := range p.Members {
			slots[i] = ledger.Slot{UID: m.UID, Node: req.Nodes[d.Plan.NodeOf[i]].Name, Request: reqs[i]}
		}
		pr.cfg.Holds.HoldPlan(p.Spec, p.Members, slots, until, d.Plan, &req.Request)
	}
	return until
}

// evictionFailed ends a preemption whose victims could not be evicted: the
// record goes, and the preemptor hears why (a gang backs off before it
// decides again).
func (pr *Preempter) evictionFailed(ctx context.Context, p *Preemptor, where string, err error) {
	pr.cfg.Preemptions.End(p.ID)
	msg := fmt.Sprintf("could not evict the victims chosen to place it in %s (%v); if the scheduler may not, grant it delete on pods and patch on pods/status", where, err)
	if p.Spec != nil {
		// Its Event says so; the gang backs off before it decides again.
		pr.cfg.Holds.FailGang(ctx, p.Spec.Key, ReasonPreemptionFailed, msg, true)
		return
	}
	pr.cfg.Reporter.PodEvent(p.Pod, v1.EventTypeWarning, ReasonPreemptionFailed, "%s", msg)
}

// nominate nominates the pod whose cycle asked to its node in the
// decision's plan, as kube-scheduler nominates a preemptor, and returns
// PostFilter's answer, with msg.
func (pr *Preempter) nominate(p *Preemptor, req *preemption.Request, d *preemption.Decision, msg string) (*fwk.PostFilterResult, *fwk.Status) {
	for i, m := range p.Members {
		if m.UID == p.Pod.UID {
			node := req.Nodes[d.Plan.NodeOf[i]].Name
			pr.cfg.Holds.Nominate(p.Pod.UID, node)
			return &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatedNodeName: node, NominatingMode: fwk.ModeOverride}},
				fwk.NewStatus(fwk.Success, msg)
		}
	}
	return nil, fwk.NewStatus(fwk.Success, msg)
}

// reportDecision records the Events of a preemption: on each victim gang's
// PodGroup (on the pods of a plain pod or of a gang whose PodGroup is gone)
// and on the preemptor, naming its victims.
func (pr *Preempter) reportDecision(p *Preemptor, d *preemption.Decision, cands *candidates, by string) {
	events := pr.cfg.Reporter
	for _, v := range d.Victims {
		spec, pods := cands.specs[v.Unit], cands.pods[v.Unit]
		switch {
		case spec != nil && v.Kind == preemption.ElasticMembers:
			names := make([]string, len(v.Pods))
			for j, i := range v.Pods {
				names[j] = pods[i].Name
			}
			events.GangEvent(spec, nil, v1.EventTypeNormal, ReasonPreempted, "%s: %d member(s) above minMember (%s) evicted; the gang keeps running with %d",
				by, len(v.Pods), strings.Join(names, ", "), len(pods)-len(v.Pods))
		case spec != nil:
			events.GangEvent(spec, nil, v1.EventTypeNormal, ReasonPreempted, "%s: all %d of its running pods evicted", by, len(pods))
		default:
			for _, i := range v.Pods {
				events.PodEvent(pods[i], v1.EventTypeNormal, ReasonPreempted, "%s", by)
			}
		}
	}
	note := fmt.Sprintf("priority %d: %s; the freed room is held for it", p.Priority, d.Summary)
	if p.Spec != nil {
		events.GangEvent(p.Spec, p.Pod, v1.EventTypeNormal, ReasonPreempting, "%s", note)
		return
	}
	events.PodEvent(p.Pod, v1.EventTypeNormal, ReasonPreempting, "%s", note)
}

// evict marks and deletes the victims, several at a time.
func (pr *Preempter) evict(ctx context.Context, victims []*v1.Pod, message string) error {
	errs := make([]error, len(victims))
	cs := pr.cfg.Framework.ClientSet()
	pr.cfg.Framework.Parallelizer().Until(ctx, len(victims), func(i int) {
		errs[i] = evictPod(ctx, cs, victims[i], message)
	}, pr.cfg.PluginName)
	return errors.Join(errs...)
}

// evictPod sets the DisruptionTarget condition on a victim, so that its
// controller and its users learn why it goes, and deletes it with its own
// grace period. A victim already gone, or replaced by a pod of the same
// name, is left alone.
func evictPod(ctx context.Context, cs kubernetes.Interface, victim *v1.Pod, message string) error {
	condition := &v1.PodCondition{
		Type:               v1.DisruptionTarget,
		ObservedGeneration: apipod.CalculatePodConditionObservedGeneration(&victim.Status, victim.Generation, v1.DisruptionTarget),
		Status:             v1.ConditionTrue,
		Reason:             v1.PodReasonPreemptionByScheduler,
		Message:            message,
	}
	status := victim.Status.DeepCopy()
	if apipod.UpdatePodCondition(status, condition) {
		if err := schedutil.PatchPodStatus(ctx, cs, victim.Name, victim.Namespace, &victim.Status, status); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("setting %s on pod %s/%s: %w", v1.DisruptionTarget, victim.Namespace, victim.Name, err)
		}
	}
	err := cs.CoreV1().Pods(victim.Namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(victim.UID))})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting pod %s/%s: %w", victim.Namespace, victim.Name, err)
	}
	return nil
}

// createdAt is when a preemptor started to wait: when its earliest member
// was created, or its PodGroup if that came later (a replacement of a
// running gang waits from its own creation, not the gang's).
func createdAt(p *Preemptor) time.Time {
	var first time.Time
	for _, m := range p.Members {
		if c := m.CreationTimestamp.Time; first.IsZero() || c.Before(first) {
			first = c
		}
	}
	if p.Spec != nil && p.Spec.Created.After(first) {
		return p.Spec.Created
	}
	return first
}

// longestGrace is the longest termination grace period among pods.
func longestGrace(pods []*v1.Pod) time.Duration {
	var out time.Duration
	for _, p := range pods {
		g := defaultGracePeriod
		if s := p.Spec.TerminationGracePeriodSeconds; s != nil {
			g = time.Duration(*s) * time.Second
		}
		out = max(out, g)
	}
	return out
}
