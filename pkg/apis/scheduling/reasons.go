package scheduling

// Reasons that the scheduler plugin and the PodGroup status controller both
// write: the plugin as the reasons of its Events, the controller as the
// reasons of PodGroup conditions (and of its own InvalidPodGroup Event). A
// reason means one situation wherever it appears, so a person who finds it
// on an Event finds it on the condition too. Reasons only one of them
// writes stay with it.
const (
	// ReasonWaitingForMembers: fewer than minMember members exist; the
	// quorum has not gathered (gang.QuorumOf), and the scheduler holds the
	// members that do.
	ReasonWaitingForMembers = "WaitingForMembers"
	// ReasonInvalidPodGroup: the PodGroup's spec cannot be honoured (a
	// minMember below 1, a topology constraint that names no configured
	// level, an annotation that does not parse); the message names the
	// field and the fix. The scheduler holds the members until it is
	// fixed, unless the message says what it assumes meanwhile (a
	// malformed movable annotation counts as not movable).
	ReasonInvalidPodGroup = "InvalidPodGroup"
)
