package scheduling

// Annotations gpu-gang writes on a ResourceClaim whose allocation it wrote
// itself (a claim several members of one gang share, or a PodGroup's
// claim). They make the allocation's owner durable: a scheduler that
// restarts, or a new leader, reads from the claim which gang and which
// attempt the allocation was made for, and gives back an allocation no pod
// ever came to use. A person reads the same with kubectl.
const (
	// AnnotationClaimAllocatedFor names the gang the allocation was
	// written for, as "<resource>.<group>/<name>" in the claim's namespace:
	// podgroups.scheduling.x-k8s.io/train, podgroups.scheduling.k8s.io/train,
	// or compositepodgroups.scheduling.k8s.io/job for the root of a
	// hierarchy of PodGroups.
	AnnotationClaimAllocatedFor = "gpu-gang.x-k8s.io/allocated-for"
	// AnnotationClaimAllocationAttempt is an opaque token, new for every
	// allocation gpu-gang writes. A release gives back an allocation only
	// when the claim still carries its own token, so that it never takes
	// away the allocation a later attempt wrote.
	AnnotationClaimAllocationAttempt = "gpu-gang.x-k8s.io/allocation-attempt"
)
