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

// Event reasons for DRA input only a gang's owner can fix, and for claims
// that change under a waiting gang. The gang plugin records them; they are
// its reasons too.
const (
	// ReasonInvalidResourceClaim: a member's ResourceClaim cannot be
	// satisfied as written (it names a DeviceClass that does not exist).
	ReasonInvalidResourceClaim = "InvalidResourceClaim"
	// ReasonDevicesUnavailable: a member asks for devices that no node
	// publishes at all.
	ReasonDevicesUnavailable = "DevicesUnavailable"
	// ReasonDeviceClassConflict: two DeviceClasses map the extended
	// resource a member asks for; kube-scheduler uses the newer.
	ReasonDeviceClassConflict = "DeviceClassConflict"
	// ReasonClaimDeleted: a ResourceClaim of a member that waited in
	// Permit was deleted; the attempt fails and the gang plans again.
	ReasonClaimDeleted = "ClaimDeleted"
	// ReasonDeviceClassSelectorError: a CEL selector of a DeviceClass, or
	// of a claim's request, fails to compile or to evaluate on devices, so
	// a member's devices cannot be counted; the Event names the class, the
	// expression and the error.
	ReasonDeviceClassSelectorError = "DeviceClassSelectorError"
)
