package coscheduling

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
)

// Admission units. The plugin gathers, plans, holds and releases one unit
// at a time, and the ledger keeps its state (claims, reservations, the head
// hold, backoff, gated members) under the unit's key:
//   - a gang (a PodGroup of either API) is its own unit;
//   - a native PodGroup under a gang CompositePodGroup belongs to the unit
//     of the highest gang composite above it (gang.RootOf): the whole tree
//     starts together, at least minGroupCount children each with at least
//     its own quorum (gang.TreeQuorumOf, gang.Admit), in one plan whose
//     hierarchy (gang.Tree.Hierarchy) holds the composite's topology for the
//     whole and each child's for itself;
//   - under basic composites only, each PodGroup is its own unit, as
//     kube-scheduler lets such children go independently.
//
// A unit rooted at a composite has a Spec of its own (gang.Tree.Spec): its
// Events go to the composite, its quorum counts children. What differs
// between a plain gang, a segmented gang and a composite (members, quorum,
// the next batch, a late member's batch and readiness, the request's
// shape, victim units) is each kind's own in pkg/gang (gang.Unit, built by
// gang.UnitOf); the extension points ask the unit and do not branch on it.

// unitOf returns the key of the admission unit the pod belongs to, if it
// belongs to a gang: the one answer every extension point keys its state by.
func (pl *Plugin) unitOf(pod *v1.Pod) (gang.Key, bool) {
	key, ok := gang.Of(pod)
	if !ok {
		return key, false
	}
	return pl.unitOfGang(key), true
}

// unitOfGang returns the unit of the gang key names. A PodGroup whose
// hierarchy cannot be read (a missing parent, a cycle) is its own unit
// until it can: unit then holds its members back with an Event that names
// the fix.
func (pl *Plugin) unitOfGang(key gang.Key) gang.Key {
	if key.API != gang.Native {
		return key
	}
	root, err := pl.sources.RootOf(key)
	if err != nil {
		return key
	}
	return root
}

// checkParent checks the hierarchy above a native PodGroup that names a
// parent but is its own unit: either only basic composites are above it,
// or its hierarchy is broken, which its members must not run past.
func (pl *Plugin) checkParent(pod *v1.Pod, spec *gang.Spec) *fwk.Status {
	if spec.Parent == "" {
		return nil
	}
	if _, err := pl.sources.RootOf(spec.Key); err != nil {
		return pl.badHierarchy(pod, spec.Key, spec.Ref, err)
	}
	return nil
}

// badHierarchy records why a hierarchy cannot be admitted, on the object
// that names the fix (ref; else the composite key names, else the pod),
// and returns the status to reject its members with. Nothing is lost: the
// members wait, and the change that fixes the hierarchy releases them.
func (pl *Plugin) badHierarchy(pod *v1.Pod, key gang.Key, ref *v1.ObjectReference, err error) *fwk.Status {
	reason := ReasonInvalidPodGroup
	switch {
	case errors.Is(err, gang.ErrMissingParent), apierrors.IsNotFound(err):
		reason = ReasonPodGroupNotFound
	case errors.Is(err, gang.ErrNotWatched):
		reason = ReasonNativePodGroupsIgnored
	case !errors.Is(err, gang.ErrInvalidHierarchy):
		return fwk.AsStatus(err)
	}
	if ref == nil {
		// Only a composite unit's tree comes without the object to
		// record on (unit): the composite key names.
		if c, cerr := pl.sources.Composite(key); cerr == nil {
			ref = c.Ref
		}
	}
	msg := fmt.Sprintf("%v; until then the members of %s wait", err, key)
	if ref != nil {
		pl.events.Record("hierarchy/"+string(ref.UID)+"/"+reason, ref, pod, v1.EventTypeWarning, reason, msg)
	} else {
		pl.events.pod(pod, v1.EventTypeWarning, reason, "%s", msg)
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("hierarchy of %s: %v", key, err))
}

// ownerOf names the pod's admission unit in the ledger's preemptions
// (ledger.GangOwner), or the pod itself outside gangs: a composite
// preempts, and waits for its victims, as one.
func (pl *Plugin) ownerOf(pod *v1.Pod) string {
	if key, ok := pl.unitOf(pod); ok {
		return ledger.GangOwner(key)
	}
	return ledger.PodOwner(pod)
}
