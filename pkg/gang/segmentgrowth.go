package gang

import (
	"slices"

	v1 "k8s.io/api/core/v1"
)

// An elastic segmented gang (minMember below its member count) starts and
// grows by whole segments of the job's ranks: a segment is the members
// whose ordinal (Assign: the rank index when every member carries one,
// else the place in rank order among every member that exists) divided by
// Size is its index. Start picks the segments of the first attempt, Join
// those a member of the running gang brings with it, and Ready says when a
// member of a segment that joins may bind. A segment is never started in
// part: its members plan together and bind once all of them hold a node,
// and a member whose segment already runs (a replacement) plans alone,
// inside its segment's domain. A member the segments do not cover (a
// launcher, a master: Covers) belongs to no segment: the first attempt
// plans it with the first segments, and later it plans and binds alone.

// Where says where one of a gang's members is, for Start, Join and Ready.
type Where int8

const (
	// Held members exist but the scheduler may not plan them yet (they
	// carry scheduling gates): their segment cannot start.
	Held Where = iota
	// Pending members have no node and may be planned.
	Pending
	// Reserved members hold a node this scheduler reserved, not yet bound.
	Reserved
	// Bound members have a node on the API.
	Bound
)

// placed reports whether the member holds a node.
func (w Where) placed() bool { return w == Reserved || w == Bound }

// segment is one segment's members, as indices into the members Start,
// Join and Ready were given.
type segment struct {
	members                []int
	pending, placed, bound int
}

// cut groups members (in rank order, every member that exists) into their
// segments, in segment order; where[i] is members[i]'s place. of[i] is
// members[i]'s index in the result, -1 for a member outside the segments.
func (seg Segments) cut(members []*v1.Pod, where []Where) (segs []segment, of []int) {
	assign := seg.Assign(members)
	index := map[int]int{}
	of = make([]int, len(members))
	for i, s := range assign {
		if s < 0 {
			of[i] = -1
			continue
		}
		// Ordinals grow with rank order, so segments come in order.
		j, ok := index[s]
		if !ok {
			j = len(segs)
			index[s] = j
			segs = append(segs, segment{})
		}
		of[i] = j
		g := &segs[j]
		g.members = append(g.members, i)
		switch {
		case where[i] == Pending:
			g.pending++
		case where[i] == Bound:
			g.bound++
		}
		if where[i].placed() {
			g.placed++
		}
	}
	return segs, of
}

// whole reports whether the segment may start: all Size of its members
// exist and each is pending or placed.
func (g segment) whole(size int32) bool {
	return len(g.members) == int(size) && g.pending+g.placed == len(g.members)
}

// pendingOf appends the segment's pending members to out.
func (g segment) pendingOf(where []Where, out []int) []int {
	for _, i := range g.members {
		if where[i] == Pending {
			out = append(out, i)
		}
	}
	return out
}

// Start picks the members to plan for a segmented gang's attempt to reach
// quorum, missing more members placed: every pending member outside the
// segments (a launcher), then, in segment order, each whole segment (all
// Size of its members exist, none held) that has pending members gives all
// of them, until at least missing are picked. members
// are the gang's members in rank order, every member that exists, and
// where[i] is members[i]'s place; pick indexes members, in rank order. ok
// is false when whole segments cannot supply missing members: the gang
// waits for the members that complete its segments.
func (seg Segments) Start(members []*v1.Pod, where []Where, missing int32) (pick []int, ok bool) {
	if missing <= 0 {
		return nil, true
	}
	segs, of := seg.cut(members, where)
	for i := range members {
		if of[i] < 0 && where[i] == Pending {
			pick = append(pick, i)
		}
	}
	for _, g := range segs {
		if len(pick) >= int(missing) {
			break
		}
		if g.pending == 0 || !g.whole(seg.Size) {
			continue
		}
		pick = g.pendingOf(where, pick)
	}
	if len(pick) < int(missing) {
		return nil, false
	}
	slices.Sort(pick)
	return pick, true
}

// Join picks the members to plan when members[i], pending, asks for a node
// in a running segmented gang (see Start for members and where):
//   - its segment has started (a member is bound): members[i] alone, a
//     replacement that plans inside its segment's domain;
//   - else, once its segment is whole (all Size members exist, none held),
//     the segment's pending members, planned together beside those
//     already reserved;
//   - else nothing (ok is false): present of the segment's Size members
//     exist unheld, and the segment waits for the rest.
//
// A member outside the segments joins alone.
func (seg Segments) Join(members []*v1.Pod, where []Where, i int) (pick []int, present int, ok bool) {
	segs, of := seg.cut(members, where)
	if of[i] < 0 {
		return []int{i}, 1, true
	}
	g := segs[of[i]]
	switch {
	case g.bound > 0:
		return []int{i}, len(g.members), true
	case g.whole(seg.Size):
		return g.pendingOf(where, nil), len(g.members), true
	}
	return nil, g.pending + g.placed, false
}

// Ready reports whether members[i], which holds a node in a running
// segmented gang, may bind (see Start for members and where): its segment
// has started (a member is bound), or every one of its Size members holds
// a node. Until then a segment that joins waits for its members, as the
// gang's first segments waited for quorum. A member outside the segments
// may bind.
func (seg Segments) Ready(members []*v1.Pod, where []Where, i int) bool {
	segs, of := seg.cut(members, where)
	if of[i] < 0 {
		return true
	}
	g := segs[of[i]]
	return g.bound > 0 || g.placed >= int(seg.Size)
}
