package coscheduling

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// A segmented gang starts and grows by whole segments of the job's ranks
// (gang.Segments.Start, Join, Ready); the functions here give pkg/gang's
// rules the gang's members and where each is.

// segmentView is a segmented gang's members in rank order, every member
// that exists, with where each is.
type segmentView struct {
	seg     gang.Segments
	members []*v1.Pod
	where   []gang.Where
}

// viewSegments returns the view of the gang spec names, whose members are
// members; ok is false for a gang without segments or a composite unit
// (whose PodGroups are its units of growth). Segments that cannot be
// honoured get segmentsOf's Event and the status to reject with.
func (pl *Plugin) viewSegments(spec *gang.Spec, members []*v1.Pod) (v segmentView, ok bool, status *fwk.Status) {
	if spec.Key.API == gang.Composite || len(members) == 0 {
		return segmentView{}, false, nil
	}
	// Most gangs have no segments: learn that, in one pass over the
	// members, before sorting them all.
	if seg, err := gang.SegmentsOf(spec, members); err == nil && seg.Size == 0 {
		return segmentView{}, false, nil
	}
	sorted := slices.Clone(members)
	gang.SortByRank(sorted)
	seg, status := pl.segmentsOf(spec, sorted, pl.policyOf(spec, sorted))
	if status != nil || seg.Size == 0 {
		return segmentView{}, status != nil, status
	}
	reserved := pl.ledger.Claims.Reservations(spec.Key)
	where := make([]gang.Where, len(sorted))
	for i, p := range sorted {
		_, isReserved := reserved[p.UID]
		switch {
		case p.Spec.NodeName != "":
			where[i] = gang.Bound
		case isReserved:
			where[i] = gang.Reserved
		case len(p.Spec.SchedulingGates) > 0:
			where[i] = gang.Held
		default:
			where[i] = gang.Pending
		}
	}
	return segmentView{seg: seg, members: sorted, where: where}, true, nil
}

// pods returns the members at indices.
func (v segmentView) pods(indices []int) []*v1.Pod {
	out := make([]*v1.Pod, len(indices))
	for j, i := range indices {
		out[j] = v.members[i]
	}
	return out
}

// index returns pod's index in the view, or -1.
func (v segmentView) index(pod *v1.Pod) int {
	return slices.IndexFunc(v.members, func(p *v1.Pod) bool { return p.UID == pod.UID })
}

// startSegments is toPlan for a segmented gang: the pending members of the
// whole segments that bring it to quorum (gang.Segments.Start). ok is false
// for a gang without segments.
func (pl *Plugin) startSegments(spec *gang.Spec, members []*v1.Pod, missing int32) (batch []*v1.Pod, status *fwk.Status, ok bool) {
	v, ok, status := pl.viewSegments(spec, members)
	if !ok || status != nil {
		return nil, status, ok
	}
	pick, whole := v.seg.Start(v.members, v.where, missing)
	if !whole {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("waiting for members of PodGroup %s: %d more must be placed, in whole segments of %d consecutive ranks, but its members present do not make up enough whole segments",
				spec.Key, missing, v.seg.Size)), true
	}
	return v.pods(pick), nil, true
}

// joinSegment is joining for a member of a running segmented gang: the
// member alone when its segment runs already, else its whole segment
// (gang.Segments.Join). ok is false for a gang without segments, or a pod
// the gang's members do not show yet.
func (pl *Plugin) joinSegment(spec *gang.Spec, members []*v1.Pod, pod *v1.Pod) (batch []*v1.Pod, status *fwk.Status, ok bool) {
	v, ok, status := pl.viewSegments(spec, members)
	if !ok || status != nil {
		return nil, status, ok
	}
	i := v.index(pod)
	if i < 0 {
		return nil, nil, false
	}
	pick, present, whole := v.seg.Join(v.members, v.where, i)
	if !whole {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("waiting for members of PodGroup %s: %s joins the running gang with its whole segment of %d consecutive ranks, of which %d are present",
				spec.Key, pod.Name, v.seg.Size, present)), true
	}
	return v.pods(pick), nil, true
}

// segmentReady reports whether a member of a running gang may bind: its
// segment runs already, or all of it holds a node (gang.Segments.Ready).
// Members of gangs without segments may.
func (pl *Plugin) segmentReady(spec *gang.Spec, members []*v1.Pod, pod *v1.Pod) bool {
	v, ok, status := pl.viewSegments(spec, members)
	if !ok || status != nil {
		// PreFilter turned away the members of invalid segments; a member
		// placed before its PodGroup changed binds as it would have.
		return true
	}
	i := v.index(pod)
	if i < 0 {
		return true
	}
	// Permit runs on the assumed pod: the informer does not show it on its
	// node, the ledger shows its reservation.
	return v.seg.Ready(v.members, v.where, i)
}
