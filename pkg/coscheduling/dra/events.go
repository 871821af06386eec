package dra

// Reasons of the Events gpu-gang records on the claims it allocates.
const (
	// ReasonClaimReleased: gpu-gang gave back an allocation it wrote, when
	// the attempt it was written for ended, or when the reconciler found
	// that no pod of its gang came to use it.
	ReasonClaimReleased = "ClaimReleased"
	// ReasonClaimReleaseFailed: gpu-gang could not give back an allocation
	// it wrote; the claim keeps its mark and the release is tried again.
	ReasonClaimReleaseFailed = "ClaimReleaseFailed"
	// ReasonInvalidClaimMark: a claim carries gpu-gang's annotations, but
	// they do not name a gang and an attempt; the reconciler leaves it.
	ReasonInvalidClaimMark = "InvalidClaimMark"
)
