package coscheduling

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/core"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/preempt"
	"github.com/gpu-gang/gpu-gang/pkg/dedupevents"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// Event reasons. Each names a situation a person would ask about; the note
// says what is wrong and what would fix it.
const (
	// ReasonPodGroupNotFound: a pod names a PodGroup that does not exist.
	ReasonPodGroupNotFound = "PodGroupNotFound"
	// ReasonInvalidPodGroup: the PodGroup's spec cannot be honoured. The
	// status controller says so too: the name is shared.
	ReasonInvalidPodGroup = scheduling.ReasonInvalidPodGroup
	// ReasonMixedSchedulerNames: members of one PodGroup name different
	// schedulers, so no single scheduler can start them together.
	ReasonMixedSchedulerNames = "MixedSchedulerNames"
	// ReasonWaitingForMembers: fewer members exist than minMember. The
	// status controller says so too: the name is shared.
	ReasonWaitingForMembers = scheduling.ReasonWaitingForMembers
	// ReasonGangTooLarge: see core.ReasonGangTooLarge.
	ReasonGangTooLarge = core.ReasonGangTooLarge
	// ReasonGangTimedOut: reserved members waited longer than the schedule
	// timeout for the rest of the gang.
	ReasonGangTimedOut = "GangTimedOut"
	// ReasonGangRejected: a member failed, so the whole gang gave back its
	// reservations.
	ReasonGangRejected = "GangRejected"
	// ReasonTopologyUnsatisfied: see core.ReasonTopologyUnsatisfied.
	ReasonTopologyUnsatisfied = core.ReasonTopologyUnsatisfied
	// ReasonGangScheduled: quorum is reserved and the gang is binding.
	ReasonGangScheduled = "GangScheduled"
	// ReasonMemberDeleted: a member was deleted while it waited in Permit;
	// its siblings give back their nodes and the gang plans again with its
	// replacement.
	ReasonMemberDeleted = "MemberDeleted"
	// ReasonMemberNotBound: a member let go with its gang failed to bind
	// (the API server refused the binding, or the pod went away); it is
	// tried again next to the gang.
	ReasonMemberNotBound = "MemberNotBound"
	// ReasonMemberPlaced: a running gang's replacement (or an elastic
	// gang's extra member) was placed next to the gang.
	ReasonMemberPlaced = "MemberPlaced"
	// ReasonMemberLost: a running gang lost a member that had not
	// finished; the note says whether the gang still has minMember placed.
	ReasonMemberLost = "MemberLost"
	// ReasonInvalidResourceClaim: see dra.ReasonInvalidResourceClaim.
	ReasonInvalidResourceClaim = dra.ReasonInvalidResourceClaim
	// ReasonDevicesUnavailable: see dra.ReasonDevicesUnavailable.
	ReasonDevicesUnavailable = dra.ReasonDevicesUnavailable
	// ReasonDeviceClassConflict: see dra.ReasonDeviceClassConflict.
	ReasonDeviceClassConflict = dra.ReasonDeviceClassConflict
	// ReasonClaimDeleted: see dra.ReasonClaimDeleted.
	ReasonClaimDeleted = dra.ReasonClaimDeleted
	// ReasonNoFeasibleNodes: see core.ReasonNoFeasibleNodes.
	ReasonNoFeasibleNodes = core.ReasonNoFeasibleNodes
	// ReasonFilterRejectsPlan: see core.ReasonFilterRejectsPlan.
	ReasonFilterRejectsPlan = core.ReasonFilterRejectsPlan
	// ReasonPermanentPodsInTheWay: see core.ReasonPermanentPodsInTheWay.
	ReasonPermanentPodsInTheWay = core.ReasonPermanentPodsInTheWay
	// ReasonGangHolding: see core.ReasonGangHolding.
	ReasonGangHolding = core.ReasonGangHolding
	// ReasonHoldExpired: see core.ReasonHoldExpired.
	ReasonHoldExpired = core.ReasonHoldExpired
	// ReasonNativePodGroupsIgnored: a pod names a native PodGroup
	// (scheduling.k8s.io/v1beta1) in spec.schedulingGroup, but this
	// scheduler does not schedule native PodGroups; the note says why.
	ReasonNativePodGroupsIgnored = "NativePodGroupsIgnored"
	// ReasonTwoPodGroups: a pod names a native PodGroup and carries the
	// scheduling.x-k8s.io/pod-group label of another; it belongs to the
	// native one alone.
	ReasonTwoPodGroups = "TwoPodGroups"
	// ReasonPodGroupDeleting: a native PodGroup is being deleted while
	// members still wait; the API server keeps it, and gpu-gang schedules
	// them as a gang, until no active pod names it.
	ReasonPodGroupDeleting = "PodGroupDeleting"
	// ReasonPreempted, ReasonPreempting and ReasonPreemptionFailed are
	// package preempt's Events.
	ReasonPreempted        = preempt.ReasonPreempted
	ReasonPreempting       = preempt.ReasonPreempting
	ReasonPreemptionFailed = preempt.ReasonPreemptionFailed
	// ReasonDeviceClassSelectorError: see dra.ReasonDeviceClassSelectorError.
	ReasonDeviceClassSelectorError = dra.ReasonDeviceClassSelectorError
)

// eventRecorder records Events on pods and gangs, once per distinct note
// (see pkg/dedupevents): PreEnqueue and PreFilter run on every retry, and a
// person needs one Event that says what is wrong, not one per retry.
type eventRecorder struct {
	*dedupevents.Recorder
}

func newEventRecorder(r events.EventRecorder, c clock.PassiveClock) *eventRecorder {
	return &eventRecorder{dedupevents.New(r, c)}
}

// pod records an Event regarding a pod.
func (er *eventRecorder) pod(pod *v1.Pod, eventType, reason, format string, args ...any) {
	er.Record("pod/"+string(pod.UID)+"/"+reason, pod, nil, eventType, reason, fmt.Sprintf(format, args...))
}

// gang records an Event regarding a gang's API object. A reference is
// passed rather than the object because the recorder's scheme does not
// know the PodGroup type. related, if not nil, is the member that prompted
// the Event: events.k8s.io folds Events with the same regarding and related
// objects and reason into one series that keeps its first note, so a note
// that changes as members arrive ("3/8 present") needs the member to show.
func (er *eventRecorder) gang(spec *gang.Spec, related *v1.Pod, eventType, reason, format string, args ...any) {
	er.gangObject(spec.Ref, related, eventType, reason, format, args...)
}

// gangObject records an Event regarding a gang's API object known only by
// reference (a spec's Ref, which carries its UID): an owner reference can
// name a PodGroup before the plugin's informer has it.
func (er *eventRecorder) gangObject(ref *v1.ObjectReference, related *v1.Pod, eventType, reason, format string, args ...any) {
	var rel runtime.Object
	if related != nil {
		rel = related
	}
	er.Record("gang/"+string(ref.UID)+"/"+reason, ref, rel, eventType, reason, fmt.Sprintf(format, args...))
}
