package dra

import (
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// Mark is what gpu-gang writes on a claim whose allocation it wrote: the
// gang it was written for and a token of the write. The annotations of
// pkg/apis/scheduling carry it.
type Mark struct {
	// Gang is the gang the allocation was written for; its namespace is the
	// claim's.
	Gang gang.Key
	// Attempt is the write's token, new for every allocation written.
	Attempt string
}

// Resources of the gang APIs, as a mark names them.
const (
	xk8sPodGroups   = "podgroups.scheduling.x-k8s.io"
	nativePodGroups = "podgroups.scheduling.k8s.io"
	compositeGroups = "compositepodgroups.scheduling.k8s.io"
)

// MarkOf reads the mark on claim. ok is false when the claim carries none
// (gpu-gang did not write its allocation); err says why a mark it carries
// cannot be read.
func MarkOf(claim *resourceapi.ResourceClaim) (m Mark, ok bool, err error) {
	owner, hasOwner := claim.Annotations[scheduling.AnnotationClaimAllocatedFor]
	token, hasToken := claim.Annotations[scheduling.AnnotationClaimAllocationAttempt]
	if !hasOwner && !hasToken {
		return Mark{}, false, nil
	}
	resource, name, found := strings.Cut(owner, "/")
	if !found || name == "" || token == "" {
		return Mark{}, true, fmt.Errorf("ResourceClaim %s/%s: annotations %s=%q and %s=%q do not name a gang and an attempt",
			claim.Namespace, claim.Name, scheduling.AnnotationClaimAllocatedFor, owner, scheduling.AnnotationClaimAllocationAttempt, token)
	}
	key := gang.Key{Namespace: claim.Namespace, Name: name}
	switch resource {
	case xk8sPodGroups:
		key.API = gang.XK8s
	case nativePodGroups:
		key.API = gang.Native
	case compositeGroups:
		key.API = gang.Composite
	default:
		return Mark{}, true, fmt.Errorf("ResourceClaim %s/%s: annotation %s=%q names no PodGroup resource (%s, %s or %s)",
			claim.Namespace, claim.Name, scheduling.AnnotationClaimAllocatedFor, owner, xk8sPodGroups, nativePodGroups, compositeGroups)
	}
	return Mark{Gang: key, Attempt: token}, true, nil
}

// Annotate writes the mark on claim's annotations (claim is the caller's
// copy).
func (m Mark) Annotate(claim *resourceapi.ResourceClaim) {
	if claim.Annotations == nil {
		claim.Annotations = map[string]string{}
	}
	claim.Annotations[scheduling.AnnotationClaimAllocatedFor] = m.owner()
	claim.Annotations[scheduling.AnnotationClaimAllocationAttempt] = m.Attempt
}

// Clear removes any mark from claim's annotations (claim is the caller's
// copy).
func Clear(claim *resourceapi.ResourceClaim) {
	delete(claim.Annotations, scheduling.AnnotationClaimAllocatedFor)
	delete(claim.Annotations, scheduling.AnnotationClaimAllocationAttempt)
}

func (m Mark) owner() string {
	resource := xk8sPodGroups
	switch m.Gang.API {
	case gang.Native:
		resource = nativePodGroups
	case gang.Composite:
		// A hierarchy's attempt is its root's, which may be a composite.
		resource = compositeGroups
	}
	return resource + "/" + m.Gang.Name
}
