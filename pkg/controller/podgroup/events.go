package podgroup

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	upstream "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling/v1alpha1"
)

// Event reasons the controller records on PodGroups, one per change a
// person would ask about. The scheduler plugin records the scheduling steps
// in between (WaitingForMembers, GangScheduled, GangTimedOut, ...).
const (
	// EventGangPending: a gang that had started has fewer than minMember
	// members again, as when its workload restarts.
	EventGangPending = "GangPending"
	// EventGangScheduling: minMember members exist; the scheduler places
	// the gang.
	EventGangScheduling = "GangScheduling"
	// EventGangRunning: minMember members run (or have succeeded).
	EventGangRunning = "GangRunning"
	// EventGangFinished: every member has finished and none failed.
	EventGangFinished = "GangFinished"
	// EventGangFailed: members failed and the gang cannot go on as it is.
	EventGangFailed = "GangFailed"
	// EventMembersMissing: members wait for the rest of their gang, which
	// has not been created for longer than the grace period. The note says
	// what is known about why.
	EventMembersMissing = ReasonMembersMissing
	// EventBelowMinMember: a gang that ran has fewer than minMember
	// members placed; the note names the missing ones.
	EventBelowMinMember = ConditionBelowMinMember
	// EventMinMemberRestored: a gang that ran below minMember has its
	// quorum placed again.
	EventMinMemberRestored = "MinMemberRestored"
	// EventInvalidPodGroup: the PodGroup's spec, or a composite's layout,
	// cannot be honoured; the note names the field and the fix, as the
	// scheduler's Event of the same reason does.
	EventInvalidPodGroup = ReasonInvalidPodGroup
)

// eventAction is the action of the controller's Events (events.k8s.io/v1
// requires one).
const eventAction = "UpdateStatus"

// recordPhase records an Event when a scheduler-plugins PodGroup's phase
// changes from before to after. It runs after the status patch succeeded,
// so each change is recorded once, by the leader that made it.
func recordPhase(rec events.EventRecorder, before, after *v1alpha1.PodGroup) {
	b, a := before.Status.Phase, after.Status.Phase
	if a == b {
		return
	}
	// The first phase of a new PodGroup is Pending and needs no Event: the
	// plugin says which members it waits for.
	if reason, eventType, ok := phaseEvent(a); ok && !(b == "" && a == upstream.PodGroupPending) {
		rec.Eventf(after, nil, eventType, reason, eventAction, "phase %s -> %s: %s", phaseName(b), a, phaseNote(after))
	}
}

// recordConditionTransitions records an Event on obj, a PodGroup of any API,
// for each change of the conditions every API shares that a person would ask
// about: a gang that ran dropping below minMember or getting its quorum back,
// members found missing, and a spec or a composite's layout found invalid. It runs after the status
// patch succeeded, so each change is recorded once, by the leader that made
// it.
func recordConditionTransitions(rec events.EventRecorder, obj runtime.Object, before, after []metav1.Condition) {
	for i := range after {
		c := &after[i]
		if c.Reason != ReasonInvalidPodGroup && c.Reason != ReasonInvalid {
			continue
		}
		if old := meta.FindStatusCondition(before, c.Type); old == nil || old.Reason != c.Reason || old.Message != c.Message {
			rec.Eventf(obj, nil, corev1.EventTypeWarning, EventInvalidPodGroup, eventAction, "%s", c.Message)
		}
	}
	if c := meta.FindStatusCondition(after, ConditionBelowMinMember); c != nil {
		old := meta.FindStatusCondition(before, ConditionBelowMinMember)
		switch {
		case c.Status == metav1.ConditionTrue && (old == nil || old.Status != metav1.ConditionTrue):
			rec.Eventf(obj, nil, corev1.EventTypeWarning, EventBelowMinMember, eventAction, "%s", c.Message)
		case c.Reason == ReasonAtLeastMinMember && old != nil && old.Status == metav1.ConditionTrue:
			rec.Eventf(obj, nil, corev1.EventTypeNormal, EventMinMemberRestored, eventAction, "%s", c.Message)
		}
	}
	if c := meta.FindStatusCondition(after, ConditionMembersCreated); c != nil && c.Reason == ReasonMembersMissing {
		if old := meta.FindStatusCondition(before, ConditionMembersCreated); old == nil || old.Reason != ReasonMembersMissing {
			rec.Eventf(obj, nil, corev1.EventTypeWarning, EventMembersMissing, eventAction, "%s", c.Message)
		}
	}
}

func phaseEvent(p upstream.PodGroupPhase) (reason, eventType string, ok bool) {
	switch p {
	case upstream.PodGroupPending:
		return EventGangPending, corev1.EventTypeNormal, true
	case upstream.PodGroupScheduling:
		return EventGangScheduling, corev1.EventTypeNormal, true
	case upstream.PodGroupRunning:
		return EventGangRunning, corev1.EventTypeNormal, true
	case upstream.PodGroupFinished:
		return EventGangFinished, corev1.EventTypeNormal, true
	case upstream.PodGroupFailed:
		return EventGangFailed, corev1.EventTypeWarning, true
	}
	return "", "", false
}

func phaseName(p upstream.PodGroupPhase) string {
	if p == "" {
		return "(none)"
	}
	return string(p)
}

// phaseNote gives the numbers behind a phase.
func phaseNote(pg *v1alpha1.PodGroup) string {
	s := &pg.Status
	counts := fmt.Sprintf("%d running, %d succeeded, %d failed", s.Running, s.Succeeded, s.Failed)
	switch s.Phase {
	case upstream.PodGroupPending:
		return fmt.Sprintf("fewer than minMember (%d) members exist", pg.Spec.MinMember)
	case upstream.PodGroupScheduling:
		return fmt.Sprintf("minMember (%d) members exist; the scheduler places them together", pg.Spec.MinMember)
	case upstream.PodGroupFinished:
		return "every member finished: " + counts
	default:
		return fmt.Sprintf("%s; minMember %d", counts, pg.Spec.MinMember)
	}
}
