package podgroup

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	upstream "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling/v1alpha1"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// PodGroupIndex is the field index of pods by the scheduler-plugins
// PodGroup they belong to (gang.Of). As with every member index, a list
// with it must also say client.InNamespace.
const PodGroupIndex = "gpu-gang.x-k8s.io/pod-group"

// xk8sScheduled is the condition that says a scheduler-plugins gang is
// placed. It follows the members: it turns False again when they are lost
// (until the gang ends).
var xk8sScheduled = scheduledCondition{condType: ConditionScheduled, trueReason: ReasonQuorumScheduled}

// podGroups adapts scheduler-plugins PodGroups (scheduling.x-k8s.io/v1alpha1)
// as package v1alpha1 types them, with status conditions. The controller
// keeps their whole status: phase, running, succeeded and failed counts,
// scheduleStartTime, observedGeneration, and the conditions MembersCreated,
// Scheduled and BelowMinMember; it records an Event at each phase change.
// Their status is always this controller's to keep, whatever scheduler the
// members name: reports is true.
type podGroups struct{}

var _ adapter[*v1alpha1.PodGroup] = podGroups{}

func (podGroups) api() gang.API                                       { return gang.XK8s }
func (podGroups) name() string                                        { return "podgroup" }
func (podGroups) newObject() *v1alpha1.PodGroup                       { return &v1alpha1.PodGroup{} }
func (podGroups) indexes() []fieldIndex                               { return memberIndex(gang.XK8s, PodGroupIndex) }
func (podGroups) reports(observed) bool                               { return true }
func (podGroups) conditions(pg *v1alpha1.PodGroup) []metav1.Condition { return pg.Status.Conditions }
func (podGroups) watch(b *builder.Builder, _ client.Reader, members, nodes handler.EventHandler) *builder.Builder {
	return watchMembers(b, members, nodes)
}

func (a podGroups) observe(ctx context.Context, c client.Reader, pg *v1alpha1.PodGroup, at moment) (observed, error) {
	return observeMembers(ctx, c, PodGroupIndex, a.spec(pg), pg, at)
}

// spec reads the PodGroup through the gang package's adapter of the type
// scheduler-plugins defines, whose spec ours shares.
func (podGroups) spec(pg *v1alpha1.PodGroup) *gang.Spec {
	return gang.FromPodGroup(&upstream.PodGroup{TypeMeta: pg.TypeMeta, ObjectMeta: pg.ObjectMeta, Spec: pg.Spec})
}

func (podGroups) write(pg *v1alpha1.PodGroup, in observed) time.Duration {
	st, recheck := computeStatus(pg, in)
	pg.Status = st
	return recheck
}

func (podGroups) record(rec events.EventRecorder, before, after *v1alpha1.PodGroup) {
	recordPhase(rec, before, after)
}

// computeStatus derives pg's status from what was observed. It starts from
// pg's current status, so conditions of other types and fields it does not
// own (occupiedBy) are kept, and a condition's lastTransitionTime moves only
// when its status does. It returns when to look again: the end of the grace
// period of a group waiting for members, or zero.
//
// An invalid spec is said on Scheduled, and nothing that needs a quorum is
// judged: the phase stays as it was (Pending at first) and MembersCreated
// and BelowMinMember keep what they said.
func computeStatus(pg *v1alpha1.PodGroup, in observed) (v1alpha1.PodGroupStatus, time.Duration) {
	st := *pg.Status.DeepCopy()
	n := countPhases(in.pods)
	st.Running, st.Succeeded, st.Failed = n.running, n.succeeded, n.failed
	st.ObservedGeneration = pg.Generation
	set := conditionSetter(&st.Conditions, pg.Generation, in.now)
	if in.invalid != nil {
		if st.Phase == "" {
			st.Phase = upstream.PodGroupPending
		}
		invalidSpec(xk8sScheduled, in.invalid, set)
		return st, 0
	}

	m := in.members
	// A gang ran if it was scheduled, as this or an earlier status says.
	ran := meta.IsStatusConditionTrue(pg.Status.Conditions, ConditionScheduled) ||
		meta.FindStatusCondition(pg.Status.Conditions, ConditionBelowMinMember) != nil
	st.Phase = phaseOf(pg.Status.Phase, len(in.pods), m, n)
	if st.Phase != upstream.PodGroupPending && st.ScheduleStartTime.IsZero() {
		st.ScheduleStartTime = metav1.NewTime(in.now)
	}
	recheck := membersCreated(st.Conditions, started(st.Phase), m, in.now, in.grace,
		func() string { return missingMembersHint(pg, m.present, "spec.minMember") }, set)

	// A finished group keeps the Scheduled condition it ended with.
	if st.Phase == upstream.PodGroupFinished || st.Phase == upstream.PodGroupFailed {
		if !meta.IsStatusConditionTrue(st.Conditions, ConditionScheduled) {
			set(ConditionScheduled, metav1.ConditionTrue, ReasonQuorumScheduled,
				fmt.Sprintf("the gang ran: %d members succeeded, %d failed", n.succeeded, n.failed))
		}
	} else {
		scheduled(xk8sScheduled, m, set)
	}
	ran = ran || meta.IsStatusConditionTrue(st.Conditions, ConditionScheduled)
	belowMinMember(st.Conditions, ran, m, in.pods, in.lost, set)
	// A condition kept as it was has still been checked against this
	// generation.
	observedAt(st.Conditions, pg.Generation, ConditionMembersCreated, ConditionScheduled, ConditionBelowMinMember)
	return st, recheck
}

// started reports whether the group has been Running before: its phase
// says so.
func started(phase upstream.PodGroupPhase) bool {
	switch phase {
	case upstream.PodGroupRunning, upstream.PodGroupFinished, upstream.PodGroupFailed:
		return true
	}
	return false
}

// phaseOf decides the group's phase from its previous phase, how many pods
// the index lists, its members as quorum counts them (m) and its pods by
// phase (n). Whether the gang gathered or is placed is the quorum's to say;
// how a run ended is what its pods' phases say, those being cleaned up
// included. The rules, first match wins:
//
//   - no pods at all after Finished or Failed: unchanged (the workload's
//     controller cleaned up after the run);
//   - the run ended (gang.RunEndOf): every member has finished, none
//     failed, and the group had started or minMember succeeded: Finished;
//     some failed, and the group had started or minMember finished: Failed;
//   - minMember members are running or have succeeded (the quorum placed,
//     counting running members as the bound ones): Running;
//   - some member failed, the quorum has not gathered, and the group had
//     started: Failed (a replacement member brings the group back);
//   - the group had started and members still run: Running, below
//     minMember (the BelowMinMember condition says so);
//   - the quorum gathered (minMember members exist): Scheduling;
//   - otherwise: Pending.
func phaseOf(prev upstream.PodGroupPhase, pods int, m members, n phaseCounts) upstream.PodGroupPhase {
	wasStarted := started(prev)
	if pods == 0 && (prev == upstream.PodGroupFinished || prev == upstream.PodGroupFailed) {
		return prev
	}
	switch gang.RunEndOf(m.minMember, m.active(), n.succeeded, n.failed, wasStarted) {
	case gang.RunFinished:
		return upstream.PodGroupFinished
	case gang.RunFailed:
		return upstream.PodGroupFailed
	}
	switch {
	case m.runningQuorum():
		return upstream.PodGroupRunning
	case n.failed > 0 && !m.quorum.Gathered && wasStarted:
		return upstream.PodGroupFailed
	case wasStarted && m.running > 0:
		return upstream.PodGroupRunning
	case m.quorum.Gathered:
		return upstream.PodGroupScheduling
	default:
		return upstream.PodGroupPending
	}
}
