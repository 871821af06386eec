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
	api, known := gang.APIOfResource(resource)
	if !known {
		return Mark{}, true, fmt.Errorf("ResourceClaim %s/%s: annotation %s=%q names no PodGroup resource (%s)",
			claim.Namespace, claim.Name, scheduling.AnnotationClaimAllocatedFor, owner, oneOf(gang.Resources()))
	}
	key := gang.Key{API: api, Namespace: claim.Namespace, Name: name}
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

// owner names the gang in the mark. A hierarchy's attempt is its root's,
// which may be a composite.
func (m Mark) owner() string { return m.Gang.API.Resource() + "/" + m.Gang.Name }

// oneOf lists names as "a, b or c".
func oneOf(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
