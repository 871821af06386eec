package coscheduling

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
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
// members and whose admission unit (the ledger's key for its reservations)
// is unit: the gang itself, or the gang composite above a PodGroup; ok is
// false for a gang without segments or a composite unit (whose PodGroups
// are its units of growth). Segments that cannot be honoured get
// segmentsOf's Event and the status to reject with.
func (pl *Plugin) viewSegments(unit gang.Key, spec *gang.Spec, members []*v1.Pod) (v segmentView, ok bool, status *fwk.Status) {
	if spec.Key.API == gang.Composite || len(members) == 0 {
		return segmentView{}, false, nil
	}
	// Most gangs have no segments: learn that from the first member alone
	// (Kueue's annotations are read from it) before sorting them all.
	first := members[0]
	for _, p := range members[1:] {
		if gang.RankOf(p).Less(gang.RankOf(first)) {
			first = p
		}
	}
	if seg, err := gang.SegmentsOf(spec, first); err == nil && seg.Size == 0 {
		return segmentView{}, false, nil
	}
	sorted := slices.Clone(members)
	gang.SortByRank(sorted)
	seg, status := pl.segmentsOf(spec, sorted, pl.policyOf(spec, sorted))
	if status != nil || seg.Size == 0 {
		return segmentView{}, status != nil, status
	}
	reserved := pl.ledger.Claims.Reservations(unit)
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

// startSegments is toPlan for a segmented gang, on its own or a PodGroup
// under a gang composite (unit, see viewSegments): the pending members of
// the whole segments that bring it to quorum (gang.Segments.Start). ok is
// false for a gang without segments.
func (pl *Plugin) startSegments(unit gang.Key, spec *gang.Spec, members []*v1.Pod, missing int32) (batch []*v1.Pod, status *fwk.Status, ok bool) {
	v, ok, status := pl.viewSegments(unit, spec, members)
	if !ok || status != nil {
		return nil, status, ok
	}
	pick, whole := v.seg.Start(v.members, v.where, missing)
	if !whole {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, v.waiting(spec.Key, missing)), true
	}
	return v.pods(pick), nil, true
}

// shownSegments is how many segments that are not whole a message names.
const shownSegments = 4

// waiting says why whole segments cannot supply missing members yet: which
// segments lack members, and how many of each are present.
func (v segmentView) waiting(key gang.Key, missing int32) string {
	var short []string
	for _, c := range v.seg.Counts(v.members, v.where) {
		if !c.Whole {
			short = append(short, fmt.Sprintf("segment %d (ranks %d–%d): %d/%d present", c.Index, c.First, c.Last, c.Present, v.seg.Size))
		}
	}
	msg := fmt.Sprintf("waiting for members of PodGroup %s: %d more must be placed, in whole segments of %d consecutive ranks", key, missing, v.seg.Size)
	switch {
	case len(short) == 0:
		return msg + ", but its members present make up no more whole segments"
	case len(short) > shownSegments:
		return fmt.Sprintf("%s; %s and %d more segments lack members", msg, strings.Join(short[:shownSegments], ", "), len(short)-shownSegments)
	}
	return msg + "; " + strings.Join(short, ", ")
}

// waitForSegments holds a member of a segmented gang whose segments cannot
// take it yet, with an Event that says which segments lack members: before
// the gang runs, one that has quorum of members but not enough whole
// segments to start (gang.Segments.Start); once it runs, one whose segment
// has not started and is not whole (gang.Segments.Join). The members that
// complete the segments release it through the pod informer's handlers
// (onPodAdd, and onPodUpdate for a member whose scheduling gates were
// removed), never from here: PreEnqueue runs under the scheduling queue's
// lock, which activating pods takes.
func (pl *Plugin) waitForSegments(ctx context.Context, pod *v1.Pod, spec *gang.Spec, members []*v1.Pod, q gang.GroupQuorum, running bool) *fwk.Status {
	v, ok, status := pl.viewSegments(spec.Key, spec, members)
	if !ok || status != nil {
		return status
	}
	var msg string
	switch i := v.index(pod); {
	case running && i >= 0:
		if _, _, whole := v.seg.Join(v.members, v.where, i); !whole {
			msg = v.joinWaiting(spec.Key, pod, i)
		}
	case !running:
		if _, whole := v.seg.Start(v.members, v.where, q.Missing); !whole {
			msg = v.waiting(spec.Key, q.Missing)
		}
	}
	if msg == "" {
		return nil
	}
	pl.events.gang(spec, pod, v1.EventTypeNormal, ReasonWaitingForMembers, "%s", msg)
	klog.FromContext(ctx).V(5).Info("Segment lacks members", "pod", klog.KObj(pod), "podGroup", spec.Key, "running", running, "segmentSize", v.seg.Size)
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
}

// joinWaiting says what members[i] of a running gang waits for: the rest
// of its segment, which joins whole.
func (v segmentView) joinWaiting(key gang.Key, pod *v1.Pod, i int) string {
	c := v.seg.CountOf(v.members, v.where, i)
	return fmt.Sprintf("waiting for members of PodGroup %s: %s joins the running gang with its whole segment of %d consecutive ranks, of which %d are present: segment %d (ranks %d–%d)",
		key, pod.Name, v.seg.Size, c.Present, c.Index, c.First, c.Last)
}

// joinSegment is joining for a member of a running segmented gang: the
// member alone when its segment runs already, else its whole segment
// (gang.Segments.Join). ok is false for a gang without segments, or a pod
// the gang's members do not show yet.
func (pl *Plugin) joinSegment(spec *gang.Spec, members []*v1.Pod, pod *v1.Pod) (batch []*v1.Pod, status *fwk.Status, ok bool) {
	v, ok, status := pl.viewSegments(spec.Key, spec, members)
	if !ok || status != nil {
		return nil, status, ok
	}
	i := v.index(pod)
	if i < 0 {
		return nil, nil, false
	}
	pick, _, whole := v.seg.Join(v.members, v.where, i)
	if !whole {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, v.joinWaiting(spec.Key, pod, i)), true
	}
	return v.pods(pick), nil, true
}

// segmentReady reports whether a member of a running gang may bind: its
// segment runs already, or all of it holds a node (gang.Segments.Ready).
// Members of gangs without segments may. When it may not, wait says what
// its segment awaits, for its Permit status.
func (pl *Plugin) segmentReady(spec *gang.Spec, members []*v1.Pod, pod *v1.Pod) (ready bool, wait string) {
	v, ok, status := pl.viewSegments(spec.Key, spec, members)
	if !ok || status != nil {
		// PreFilter turned away the members of invalid segments; a member
		// placed before its PodGroup changed binds as it would have.
		return true, ""
	}
	i := v.index(pod)
	if i < 0 {
		return true, ""
	}
	// Permit runs on the assumed pod: the informer does not show it on its
	// node, the ledger shows its reservation.
	if v.seg.Ready(v.members, v.where, i) {
		return true, ""
	}
	c := v.seg.CountOf(v.members, v.where, i)
	return false, fmt.Sprintf("waiting for gang %s: segment %d (ranks %d–%d), which joins the running gang whole: %d/%d members hold a node",
		spec.Key, c.Index, c.First, c.Last, c.Placed, v.seg.Size)
}
