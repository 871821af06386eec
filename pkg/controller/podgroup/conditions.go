package podgroup

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// Condition types the controller sets on a PodGroup.
const (
	// ConditionMembersCreated is True once at least minMember members exist
	// (failed members and members being deleted do not count). The
	// scheduler holds every member until then.
	ConditionMembersCreated = "MembersCreated"
	// ConditionScheduled is True once at least minMember members are
	// placed: bound to nodes, or succeeded while others still run.
	ConditionScheduled = "Scheduled"
	// ConditionBelowMinMember is True while a gang that ran has fewer than
	// minMember members placed (bound, running or succeeded) because
	// members were lost: deleted, evicted, failed, or gone with their node.
	// Its message gives the counts and names the missing members, for the
	// operator or person who restarts or repairs the job.
	ConditionBelowMinMember = "BelowMinMember"
)

// Condition reasons.
const (
	// ReasonEnoughMembers: at least minMember members exist.
	ReasonEnoughMembers = "EnoughMembers"
	// ReasonWaitingForMembers: fewer than minMember members exist, and one
	// was created recently enough that more may follow. The scheduler's
	// Event of the same situation has the same, shared, reason.
	ReasonWaitingForMembers = scheduling.ReasonWaitingForMembers
	// ReasonMembersMissing: some members exist and wait, but no member has
	// been created for longer than the grace period, so the rest are
	// probably never going to be. The members that exist wait forever.
	ReasonMembersMissing = "MembersMissing"
	// ReasonQuorumScheduled: at least minMember members are placed.
	ReasonQuorumScheduled = "QuorumScheduled"
	// ReasonUnschedulable: a member waits and the scheduler said why. It is
	// also the reason kube-scheduler gives PodGroupInitiallyScheduled
	// (schedulingv1beta1.PodGroupReasonUnschedulable).
	ReasonUnschedulable = schedulingv1beta1.PodGroupReasonUnschedulable
	// ReasonNotScheduled: fewer than minMember members are placed.
	ReasonNotScheduled = "NotScheduled"
	// ReasonInvalidPodGroup: the PodGroup's spec cannot be honoured
	// (minMember below 1); the message names the field and the fix. The
	// scheduler holds the members and records an Event of the same reason;
	// the controller judges no quorum until the spec is fixed.
	ReasonInvalidPodGroup = scheduling.ReasonInvalidPodGroup
	// ReasonMembersLost: the gang runs below minMember and no replacement
	// exists yet.
	ReasonMembersLost = "MembersLost"
	// ReasonReplacementsPending: the gang runs below minMember and
	// replacements wait for a node.
	ReasonReplacementsPending = "ReplacementsPending"
	// ReasonAtLeastMinMember: the running gang has minMember placed.
	ReasonAtLeastMinMember = "AtLeastMinMember"
	// ReasonNotRunning: no member of the gang holds a node any more.
	ReasonNotRunning = "NotRunning"
)

// maxMessage bounds a condition message copied from a pod's condition; a
// scheduler's message lists node counts and can be long.
const maxMessage = 1024

// setCondition sets one condition of a status; see conditionSetter.
type setCondition func(condType string, status metav1.ConditionStatus, reason, message string)

// conditionSetter returns a setCondition on conds for an object of the given
// generation at now. A condition's lastTransitionTime moves only when its
// status does (meta.SetStatusCondition keeps it otherwise).
func conditionSetter(conds *[]metav1.Condition, generation int64, now time.Time) setCondition {
	return func(condType string, status metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(conds, metav1.Condition{
			Type: condType, Status: status, Reason: reason, Message: message,
			ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now),
		})
	}
}

// observedAt records on the conditions of the given types that they were
// checked against generation, those kept as they were included.
func observedAt(conds []metav1.Condition, generation int64, types ...string) {
	for i := range conds {
		if slices.Contains(types, conds[i].Type) {
			conds[i].ObservedGeneration = generation
		}
	}
}

// scheduledCondition is how an API says its gang was placed: the
// condition's type, and its reason when True.
type scheduledCondition struct {
	condType   string
	trueReason string
}

// scheduled sets sc from the quorum: True once minMember members are placed
// (gang.QuorumOf, as the scheduler decides it); until then False, with
// reason WaitingForMembers while fewer than minMember exist, Unschedulable
// with the scheduler's message once it could not place a member, or
// NotScheduled.
func scheduled(sc scheduledCondition, m members, set setCondition) {
	placed, minMember := m.placed(), m.minMember
	switch {
	case m.quorum.Placed:
		set(sc.condType, metav1.ConditionTrue, sc.trueReason,
			fmt.Sprintf("%d/%d members bound to nodes", placed, minMember))
	case !m.quorum.Gathered:
		set(sc.condType, metav1.ConditionFalse, ReasonWaitingForMembers,
			fmt.Sprintf("%d/%d members bound; the scheduler starts placing members once %d exist", placed, minMember, minMember))
	default:
		if pod, msg, ok := unschedulable(m.present); ok {
			set(sc.condType, metav1.ConditionFalse, ReasonUnschedulable,
				truncate(fmt.Sprintf("%d/%d members bound; pod %s: %s", placed, minMember, pod, msg), maxMessage))
		} else {
			set(sc.condType, metav1.ConditionFalse, ReasonNotScheduled,
				fmt.Sprintf("%d/%d members bound", placed, minMember))
		}
	}
}

// invalidSpec says on sc, False with reason InvalidPodGroup, why the spec
// cannot be honoured and what fixes it: the scheduler holds the members of
// such a gang.
func invalidSpec(sc scheduledCondition, err error, set setCondition) {
	set(sc.condType, metav1.ConditionFalse, ReasonInvalidPodGroup, truncate(err.Error(), maxMessage))
}

// membersCreated sets ConditionMembersCreated, for PodGroups of every API:
// True once the quorum gathered (minMember members exist); False while it
// has not, with reason MembersMissing and hint() once no member has been
// created for grace. It returns how long until that grace runs out, if the
// condition turns on it.
//
// Once a gang has started, its members finishing or being cleaned up is not
// a gang waiting for members: MembersCreated keeps what it said when the
// gang started.
func membersCreated(conds []metav1.Condition, started bool, m members, now time.Time, grace time.Duration,
	hint func() string, set setCondition) (recheckAfter time.Duration) {
	have, minMember := m.gathered(), m.minMember
	if started {
		if !meta.IsStatusConditionTrue(conds, ConditionMembersCreated) {
			set(ConditionMembersCreated, metav1.ConditionTrue, ReasonEnoughMembers,
				fmt.Sprintf("the gang started with at least minMember (%d) members", minMember))
		}
		return 0
	}
	switch {
	case m.quorum.Gathered:
		set(ConditionMembersCreated, metav1.ConditionTrue, ReasonEnoughMembers,
			fmt.Sprintf("%d members exist; minMember is %d", have, minMember))
	case have > 0 && now.Sub(m.lastCreated) >= grace:
		set(ConditionMembersCreated, metav1.ConditionFalse, ReasonMembersMissing,
			fmt.Sprintf("%d/%d members exist and no member has been created for %s; the scheduler holds these %d until %d exist, so they wait for members that are not coming. %s",
				have, minMember, grace, have, minMember, hint()))
	default:
		set(ConditionMembersCreated, metav1.ConditionFalse, ReasonWaitingForMembers,
			fmt.Sprintf("waiting for members: %d/%d present", have, minMember))
		if have > 0 {
			return m.lastCreated.Add(grace).Sub(now)
		}
	}
	return 0
}

// belowMinMember sets ConditionBelowMinMember on a gang that ran, for
// PodGroups of every API: True while it has fewer than minMember members
// placed, with the counts and the missing members. conds are the status's
// conditions before this call.
func belowMinMember(conds []metav1.Condition, ran bool, m members, pods []corev1.Pod, lost []lostMember, set setCondition) {
	c, minMember := m.census, m.minMember
	setBelow(conds, ran, c, m.quorum.Placed, set,
		func() string {
			return fmt.Sprintf("%d of minMember %d placed (%d bound, %d succeeded)", c.Placed(), minMember, c.Bound, c.Succeeded)
		},
		func() string {
			return fmt.Sprintf("%d of minMember %d placed (%d bound, %d succeeded); %d replacement(s) waiting for a node; missing: %s",
				c.Placed(), minMember, c.Bound, c.Succeeded, c.Waiting, describeMissing(pods, lost, m.quorum.Missing))
		})
}

// setBelow sets ConditionBelowMinMember on a group that ran, from its
// members' census and whether its quorum is placed: False (reason
// NotRunning) once no member holds a node; False (AtLeastMinMember, with
// enough()) at quorum; otherwise True, with short(), reason
// ReplacementsPending while replacements wait for a node, else
// MembersLost. conds are the status's conditions before this call.
func setBelow(conds []metav1.Condition, ran bool, c gang.Census, placed bool, set setCondition, enough, short func() string) {
	if !ran {
		return
	}
	switch {
	case c.Bound == 0:
		if meta.IsStatusConditionTrue(conds, ConditionBelowMinMember) || meta.FindStatusCondition(conds, ConditionBelowMinMember) == nil {
			set(ConditionBelowMinMember, metav1.ConditionFalse, ReasonNotRunning,
				fmt.Sprintf("no member holds a node (%d succeeded, %d failed)", c.Succeeded, c.Failed))
		}
	case placed:
		set(ConditionBelowMinMember, metav1.ConditionFalse, ReasonAtLeastMinMember, enough())
	default:
		reason := ReasonMembersLost
		if c.Waiting > 0 {
			reason = ReasonReplacementsPending
		}
		set(ConditionBelowMinMember, metav1.ConditionTrue, reason, truncate(short(), maxMessage))
	}
}
