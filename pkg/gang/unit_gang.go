package gang

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// gangUnitOf decides whether a PodGroup is a plain or a segmented gang.
// Most gangs have no segments: SegmentsOf learns that in one pass over the
// members, before anything sorts them. Segments that cannot be read make a
// segmented gang too, whose decisions then report why (View.Segments).
func gangUnitOf(spec *Spec, members []*v1.Pod) Unit {
	plain := &plainUnit{spec: spec, members: members}
	if len(members) == 0 {
		return plain
	}
	if seg, err := SegmentsOf(spec, members); err == nil && seg.Size == 0 {
		return plain
	}
	return &segmentedUnit{plainUnit: plain}
}

// plainUnit is a PodGroup whose members are alike: any pending member may
// go in the next batch, and a member of the running gang binds at once.
type plainUnit struct {
	spec    *Spec
	members []*v1.Pod
}

func (u *plainUnit) Key() Key              { return u.spec.Key }
func (u *plainUnit) Spec() *Spec           { return u.spec }
func (u *plainUnit) Members() []*v1.Pod    { return u.members }
func (u *plainUnit) Validate() error       { return u.spec.Validate() }
func (u *plainUnit) Shape(s Shaper) error  { return s.ShapeGang() }
func (u *plainUnit) NoSlot(*v1.Pod) string { return "" }

func (u *plainUnit) Quorum(v View) GroupQuorum {
	c := v.Census(u.spec.Key, u.members)
	return GroupQuorum{Quorum: QuorumOf(u.spec.MinMember, c), Need: u.spec.MinMember, Census: c}
}

func (u *plainUnit) QuorumWith(v View, minMember int32) Quorum {
	return QuorumOf(minMember, v.Census(u.spec.Key, u.members))
}

func (u *plainUnit) NextBatch(v View, q GroupQuorum) ([]*v1.Pod, error) {
	pending := pendingOf(v, u.members)
	if len(pending) < int(q.Missing) {
		return nil, waitFor("waiting for members of PodGroup %s: %d more must be placed but %d are pending", u.spec.Key, q.Missing, len(pending))
	}
	SortByRank(pending)
	return pending[:q.Missing], nil
}

func (u *plainUnit) Joining(_ View, pod *v1.Pod) ([]*v1.Pod, error) { return []*v1.Pod{pod}, nil }

func (u *plainUnit) Ready(View, *v1.Pod) bool { return true }

func (u *plainUnit) VictimUnits(_ View, pods []*v1.Pod) map[Key][]*v1.Pod {
	return map[Key][]*v1.Pod{u.spec.Key: pods}
}

// Disruption: a gang that may only be disrupted whole (a native PodGroup's
// disruptionMode all) offers no members above minMember, and one member is
// always left to stand for it.
func (u *plainUnit) Disruption(v View, pods []*v1.Pod) (int32, int) {
	minMember := u.spec.MinMember
	if u.spec.Disruption == DisruptionAll {
		return minMember, 0
	}
	return minMember, min(int(SurplusOf(minMember, v.Census(u.spec.Key, u.members))), len(pods)-1)
}

func (u *plainUnit) Gathering(q GroupQuorum) Gathering {
	// The count is the quorum's own, not the census's (Counted).
	present, _ := q.Counted(u.spec.MinMember)
	return Gathering{
		Event:  fmt.Sprintf("waiting for members: %d/%d present", present, u.spec.MinMember),
		Status: fmt.Sprintf("waiting for members of PodGroup %s: %d/%d present", u.spec.Key, present, u.spec.MinMember),
	}
}

func (u *plainUnit) WaitingToBind(q GroupQuorum) string {
	return fmt.Sprintf("waiting for gang %s: %d/%d members placed", u.spec.Key, q.Census.Placed(), u.spec.MinMember)
}

func (u *plainUnit) Scheduled(c Census, summary string) string {
	return fmt.Sprintf("%d/%d members reserved, binding: %s", c.Placed(), u.spec.MinMember, summary)
}

func (u *plainUnit) Lost(pod *v1.Pod, how string, q GroupQuorum) (bool, string) {
	c := q.Census
	if q.Placed {
		return false, fmt.Sprintf("member %s on node %s %s; the gang still has %d of minMember %d placed", pod.Name, pod.Spec.NodeName, how, c.Placed(), u.spec.MinMember)
	}
	return true, fmt.Sprintf("member %s on node %s %s: the gang runs below minMember with %d of %d placed (%d running, %d succeeded) and %d replacement(s) waiting; "+
		"replacements schedule next to the gang as they appear",
		pod.Name, pod.Spec.NodeName, how, c.Placed(), u.spec.MinMember, c.Bound+c.Reserved, c.Succeeded, c.Waiting)
}

// segmentedUnit is a PodGroup whose members start, grow and bind by whole
// segments of consecutive ranks. Its segments are read afresh for each
// decision, from its members in rank order: a gang whose segments turn out
// to be none decides as a plain gang.
type segmentedUnit struct {
	*plainUnit
}

// segmentView is the gang's members in rank order, every member that
// exists, with where each is.
type segmentView struct {
	seg     Segments
	members []*v1.Pod
	where   []Where
}

// view reads the gang's segments (View.Segments) and where each member is.
// ok is false when the gang has no segments after all; err is the
// segments' own.
func (u *segmentedUnit) view(v View) (sv segmentView, ok bool, err error) {
	sorted := slices.Clone(u.members)
	SortByRank(sorted)
	seg, err := v.Segments(u.spec, sorted)
	if err != nil || seg.Size == 0 {
		return segmentView{}, err != nil, err
	}
	where := make([]Where, len(sorted))
	for i, p := range sorted {
		switch {
		case p.Spec.NodeName != "":
			where[i] = Bound
		case v.Reserved(p.UID):
			where[i] = Reserved
		case len(p.Spec.SchedulingGates) > 0:
			where[i] = Held
		default:
			where[i] = Pending
		}
	}
	return segmentView{seg: seg, members: sorted, where: where}, true, nil
}

// pods returns the members at indices.
func (sv segmentView) pods(indices []int) []*v1.Pod {
	out := make([]*v1.Pod, len(indices))
	for j, i := range indices {
		out[j] = sv.members[i]
	}
	return out
}

// index returns pod's index in the view, or -1.
func (sv segmentView) index(pod *v1.Pod) int {
	return slices.IndexFunc(sv.members, func(p *v1.Pod) bool { return p.UID == pod.UID })
}

// NextBatch: the pending members of the whole segments that bring the gang
// to quorum (Segments.Start).
func (u *segmentedUnit) NextBatch(v View, q GroupQuorum) ([]*v1.Pod, error) {
	sv, ok, err := u.view(v)
	if err != nil {
		return nil, err
	}
	if !ok {
		return u.plainUnit.NextBatch(v, q)
	}
	pick, whole := sv.seg.Start(sv.members, sv.where, q.Missing)
	if !whole {
		return nil, waitFor("waiting for members of PodGroup %s: %d more must be placed, in whole segments of %d consecutive ranks, "+
			"but its members present do not make up enough whole segments", u.spec.Key, q.Missing, sv.seg.Size)
	}
	return sv.pods(pick), nil
}

// Joining: the member alone when its segment runs already, else its whole
// segment (Segments.Join). A pod the members do not show yet joins alone.
func (u *segmentedUnit) Joining(v View, pod *v1.Pod) ([]*v1.Pod, error) {
	sv, ok, err := u.view(v)
	if err != nil {
		return nil, err
	}
	i := -1
	if ok {
		i = sv.index(pod)
	}
	if i < 0 {
		return u.plainUnit.Joining(v, pod)
	}
	pick, present, whole := sv.seg.Join(sv.members, sv.where, i)
	if !whole {
		return nil, waitFor("waiting for members of PodGroup %s: %s joins the running gang with its whole segment of %d consecutive ranks, of which %d are present",
			u.spec.Key, pod.Name, sv.seg.Size, present)
	}
	return sv.pods(pick), nil
}

// Ready: its segment runs already, or all of it holds a node
// (Segments.Ready). The scheduler turned away the members of invalid
// segments before they were placed; a member placed before its PodGroup
// changed binds as it would have.
func (u *segmentedUnit) Ready(v View, pod *v1.Pod) bool {
	sv, ok, err := u.view(v)
	if !ok || err != nil {
		return true
	}
	i := sv.index(pod)
	if i < 0 {
		return true
	}
	// Permit runs on the assumed pod: the API does not show it on its
	// node, the View shows its reservation.
	return sv.seg.Ready(sv.members, sv.where, i)
}
