package coscheduling

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/core"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
)

// The unit as the plugin reads it: its Spec from the gang sources
// (gang.Sources), its members from the pod informer's index (gang.Members),
// its kind from pkg/gang (gang.UnitOf), and what only the plugin knows, its
// reservations and finished members, through unitView. Quorum, the next
// batch and readiness are pkg/gang's to decide.

// listMembers lists a PodGroup's live members (gang.Members). newPlugin
// adds the index or fails, so the lookup cannot miss it.
func (pl *Plugin) listMembers(key gang.Key) ([]*v1.Pod, error) {
	return gang.Members(pl.podIndex, key)
}

// members lists a unit's live members (gang.Unit.Members) without reading
// the rest of it.
func (pl *Plugin) members(key gang.Key) ([]*v1.Pod, error) {
	return gang.MembersOf(pl.sources, pl.listMembers, key)
}

// readUnit reads the unit key names with its members (gang.UnitOf), for
// callers that only say something about it or look at its quorum;
// admission uses unit, which checks it.
func (pl *Plugin) readUnit(key gang.Key) (gang.Unit, error) {
	return gang.UnitOf(pl.sources, pl.listMembers, key)
}

// viewOf is what the plugin knows of the unit key names beyond the API,
// for the unit's decisions.
func (pl *Plugin) viewOf(key gang.Key) *unitView { return &unitView{pl: pl, key: key} }

// unitView implements gang.View over the plugin's ledger, its finished
// pods and its configuration. The unit's reservations are read once, at
// the first question, so a view belongs to one decision.
type unitView struct {
	pl       *Plugin
	key      gang.Key
	reserved map[types.UID]ledger.Reservation
	read     bool
}

var _ gang.View = &unitView{}

func (v *unitView) Census(leaf gang.Key, members []*v1.Pod) gang.Census {
	return v.pl.censusOf(v.key, leaf, members)
}

func (v *unitView) Reserved(uid types.UID) bool {
	if !v.read {
		v.reserved, v.read = v.pl.ledger.Reservations.ReservedBy(v.key), true
	}
	_, ok := v.reserved[uid]
	return ok
}

func (v *unitView) Segments(spec *gang.Spec, members []*v1.Pod) (gang.Segments, error) {
	seg, status := v.pl.core.SegmentsOf(spec, members)
	return seg, core.AsError(status)
}

// census counts a gang's members: the live ones (reserved ones apart), and
// the succeeded ones.
func (pl *Plugin) census(key gang.Key, members []*v1.Pod) gang.Census {
	return pl.censusOf(key, key, members)
}

// censusOf counts the members of the PodGroup leaf names, which belongs to
// unit: reserved as the unit's attempt reserved them, succeeded as the
// PodGroup's own finished pods show.
func (pl *Plugin) censusOf(unit, leaf gang.Key, members []*v1.Pod) gang.Census {
	reserved := pl.ledger.Reservations.ReservedBy(unit)
	live := make(map[types.UID]bool, len(members))
	var c gang.Census
	for _, p := range members {
		live[p.UID] = true
		if _, ok := reserved[p.UID]; ok && p.Spec.NodeName == "" {
			c.Reserved++
			continue
		}
		c.Add(p)
	}
	objs, _ := pl.finished.ByIndex(gang.MemberIndex, leaf.String())
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok && !live[p.UID] && p.Status.Phase == v1.PodSucceeded && p.DeletionTimestamp == nil {
			c.Succeeded++
		}
	}
	return c
}

// running reports whether a gang is running: it reached quorum (in this
// scheduler, or its placed members show it) and its run is live
// (gang.Census.HoldsNode, which counts the members this scheduler reserved).
// A running gang's members that appear schedule one by one. Once no member
// holds a node, the next members are a new run of the job and gather as a
// whole again.
func (pl *Plugin) running(key gang.Key, q gang.GroupQuorum) bool {
	if !q.Census.HoldsNode() {
		pl.ledger.Reservations.DropAdmission(key)
		return false
	}
	return pl.ledger.Reservations.Admitted(key) || q.Placed
}

// unit reads and checks a member's unit. On a problem it records an Event
// saying what would fix it and returns the status to reject with.
func (pl *Plugin) unit(pod *v1.Pod, key gang.Key) (gang.Unit, *fwk.Status) {
	u, err := pl.readUnit(key)
	var hierarchy *gang.HierarchyError
	switch {
	case errors.As(err, &hierarchy):
		return nil, pl.badHierarchy(pod, hierarchy.Root, nil, hierarchy.Err)
	case apierrors.IsNotFound(err):
		pl.events.pod(pod, v1.EventTypeWarning, ReasonPodGroupNotFound,
			"PodGroup %s does not exist: create it in namespace %s, or %s; until then the pod waits",
			key, key.Namespace, key.HowToLeave())
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("PodGroup %s not found", key))
	case errors.Is(err, gang.ErrNotWatched):
		pl.events.pod(pod, v1.EventTypeWarning, ReasonNativePodGroupsIgnored,
			"the pod names PodGroup %s in spec.schedulingGroup, but gpu-gang ignores native PodGroups: %s", key, err)
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("PodGroup %s: gpu-gang ignores native PodGroups", key))
	case err != nil:
		return nil, fwk.AsStatus(err)
	}
	spec := u.Spec()
	if err := u.Validate(); err != nil {
		pl.events.gang(spec, nil, v1.EventTypeWarning, ReasonInvalidPodGroup, "%v", err)
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("PodGroup %s has minMember %d; it must be at least 1", key, spec.MinMember))
	}
	if status := pl.checkParent(pod, spec); status != nil {
		return nil, status
	}
	return u, nil
}

// lookup returns a unit's Spec if its object exists. Callers that only say
// something about a unit (an Event, a metric) use it; admission uses unit.
func (pl *Plugin) lookup(key gang.Key) (*gang.Spec, bool) {
	s, err := gang.SpecOf(pl.sources, key)
	return s, err == nil
}
