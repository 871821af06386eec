package coscheduling

import (
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// The gang as the plugin reads it: its members from the pod informer's
// index (gang.Members), its Spec from the gang sources (gang.Sources), its
// census and whether it runs. Quorum itself is pkg/gang's to decide.

// members lists a gang's live members (gang.Members). newPlugin adds the
// index or fails, so the lookup cannot miss it.
// A composite unit's members are those of every PodGroup of its tree.
func (pl *Plugin) members(key gang.Key) ([]*v1.Pod, error) {
	if key.API == gang.Composite {
		tree, err := pl.sources.Tree(key)
		if err != nil {
			return nil, err
		}
		return pl.treeMembers(tree)
	}
	return gang.Members(pl.podIndex, key)
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
	reserved := pl.ledger.Claims.Reservations(unit)
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
		pl.ledger.Claims.DropAdmission(key)
		return false
	}
	return pl.ledger.Claims.Admitted(key) || q.Placed
}

// spec fetches and checks a member's gang. On a problem it records an Event
// saying what would fix it and returns the status to reject with.
func (pl *Plugin) spec(pod *v1.Pod, key gang.Key) (*gang.Spec, *fwk.Status) {
	if key.API == gang.Composite {
		_, spec, status := pl.compositeSpec(pod, key)
		return spec, status
	}
	spec, err := pl.sources.Spec(key)
	switch {
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
	if err := spec.Validate(); err != nil {
		pl.events.gang(spec, nil, v1.EventTypeWarning, ReasonInvalidPodGroup, "%v", err)
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("PodGroup %s has minMember %d; it must be at least 1", key, spec.MinMember))
	}
	if status := pl.checkParent(pod, spec); status != nil {
		return nil, status
	}
	return spec, nil
}

// lookup returns a gang's Spec if its object exists. Callers that only say
// something about a gang (an Event, a metric) use it; admission uses spec.
func (pl *Plugin) lookup(key gang.Key) (*gang.Spec, bool) {
	if key.API == gang.Composite {
		t, err := pl.sources.Tree(key)
		if err != nil {
			return nil, false
		}
		return t.Spec(), true
	}
	s, err := pl.sources.Spec(key)
	return s, err == nil
}

// timeout is how long an attempt of the gang may take: its own timeout, or
// the plugin default.
func (pl *Plugin) timeout(spec *gang.Spec) time.Duration {
	if spec.Timeout > 0 {
		return spec.Timeout
	}
	return time.Duration(pl.args.PermitWaitingTimeSeconds) * time.Second
}
