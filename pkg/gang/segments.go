package gang

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Segments cut a gang's members into groups of Size consecutive ranks, each
// inside one domain of its Policy's level, while the gang's own policy
// (PolicyOf) holds for the whole: tensor-parallel ranks in one NVLink
// domain, the job in one spine. The zero value is a gang without segments.
type Segments struct {
	// Size is K, the members per segment; 0 means no segments.
	Size int32
	// Policy is each segment's topology constraint.
	Policy placement.Policy

	// sizeKey and levelKey are the annotations Size and Policy were read
	// from, and from says whose they are, for messages.
	sizeKey, levelKey, from string
	// cover says which members the segments cover.
	cover coverage
}

// SegmentsOf reads a gang's segments: from the gang's own annotations
// (scheduling.AnnotationSegmentSize with AnnotationSegmentTopologyRequired or
// -Preferred), or, when it sets none of them, from Kueue's pod-template
// annotations on its members (scheduling.KueueSliceSizeAnnotation with
// KueueSliceRequiredTopologyAnnotation), which slice the role whose members
// carry them. members are the gang's members, every one that exists, in any
// order. Required wins over preferred when both are set. Which members the
// segments cover is decided here (see coverage): a launcher, master or chief
// outside them sits in no segment. The error says what the annotations
// alone show to be wrong (a size that is not a positive integer, a size
// without a level or a level without a size, slices on two roles) and how
// to fix it; Validate checks the rest against the gang.
func SegmentsOf(s *Spec, members []*v1.Pod) (Segments, error) {
	a := s.Annotations
	required, preferred := a[scheduling.AnnotationSegmentTopologyRequired], a[scheduling.AnnotationSegmentTopologyPreferred]
	if size, ok := a[scheduling.AnnotationSegmentSize]; ok || required != "" || preferred != "" {
		seg := Segments{sizeKey: scheduling.AnnotationSegmentSize, from: "the PodGroup's annotation"}
		switch {
		case required != "":
			seg.Policy, seg.levelKey = placement.Policy{Level: required, Required: true}, scheduling.AnnotationSegmentTopologyRequired
		case preferred != "":
			seg.Policy, seg.levelKey = placement.Policy{Level: preferred}, scheduling.AnnotationSegmentTopologyPreferred
		}
		seg, err := seg.parse(size, ok, scheduling.AnnotationSegmentTopologyRequired+" (or "+scheduling.AnnotationSegmentTopologyPreferred+")")
		if err == nil {
			seg.cover.leadersOut = leadersOutside(members, s.MinMember, seg.Size)
		}
		return seg, err
	}
	first, leaderCopies, err := slicedBy(members)
	if err != nil || first == nil {
		return Segments{}, err
	}
	a = first.Annotations
	size, ok := a[scheduling.KueueSliceSizeAnnotation]
	level := a[scheduling.KueueSliceRequiredTopologyAnnotation]
	seg := Segments{
		sizeKey: scheduling.KueueSliceSizeAnnotation, levelKey: scheduling.KueueSliceRequiredTopologyAnnotation,
		from:  fmt.Sprintf("the annotation of pod %s/%s (the first of the members it slices)", first.Namespace, first.Name),
		cover: coverage{leadersOut: true, kueue: true, size: size, level: level},
	}
	if level != "" {
		seg.Policy = placement.Policy{Level: level, Required: true}
	}
	seg, err = seg.parse(size, ok, scheduling.KueueSliceRequiredTopologyAnnotation)
	if err == nil && leaderCopies {
		// The leaders' templates carry the workers' very annotations: read
		// them as the PodGroup's own would be read (see coverage).
		seg.cover.leadersOut = leadersOutside(members, s.MinMember, seg.Size)
	}
	return seg, err
}

// parse reads the size annotation's value (set: whether it is there) and
// checks that size and level come together; levelKeys names the level
// annotations for the message.
func (seg Segments) parse(size string, set bool, levelKeys string) (Segments, error) {
	if !set {
		return Segments{}, fmt.Errorf("%s %s is set without %s: set it to the number of consecutive ranks that share a domain", seg.from, seg.levelKey, seg.sizeKey)
	}
	k, err := strconv.ParseInt(size, 10, 32)
	if err != nil || k < 1 {
		return Segments{}, fmt.Errorf("%s %s is %q: set it to the number of consecutive ranks that share a domain, an integer of at least 1", seg.from, seg.sizeKey, size)
	}
	if seg.Policy.Level == "" {
		return Segments{}, fmt.Errorf("%s %s is set without a segment level: set %s to the level each segment must sit inside", seg.from, seg.sizeKey, levelKeys)
	}
	seg.Size = int32(k)
	return seg, nil
}

func from(seg Segments) string { return seg.from }

// Validate checks the segments against the gang, whose members are members
// (those that exist, placed or not, in any order) with quorum minMember
// and whose own policy is policy, and against this scheduler's levels
// (tightest first). Only the members the segments cover count, and the
// quorum less those outside them (a launcher, a master: Covers). Every
// problem is reported, each with its fix:
//   - a segment level that is not one of levels;
//   - a segment level looser than the gang's (a segment is part of the
//     gang, so its domain is inside the gang's);
//   - a size that does not divide the covered members, for a gang that
//     needs every member (its quorum at least their count);
//   - an elastic gang (quorum below the member count) whose quorum is not
//     a whole number of segments.
//
// An elastic gang's member count changes as its job grows, shrinks and
// finishes, and its members are created one by one: there a segment whose
// members are not all there yet waits for them (Start, Join), which its
// members' status says, rather than the gang being invalid.
//
// Gangs without segments are valid.
func (seg Segments) Validate(levels []scheduling.Level, policy placement.Policy, all []*v1.Pod, minMember int32) error {
	if seg.Size == 0 {
		return nil
	}
	out, outside := outsideOf(all, seg)
	members := int32(len(all)) - out
	if out > 0 {
		minMember = max(minMember-out, 0)
	}
	var errs []error
	rank, err := scheduling.LevelRank(levels, seg.Policy.Level)
	if err != nil {
		errs = append(errs, fmt.Errorf("%s %s: %w; name a configured level's label key, or %s for one node", seg.from, seg.levelKey, err, scheduling.HostnameKey))
	} else if policy.Level != "" {
		if gangRank, err := scheduling.LevelRank(levels, policy.Level); err == nil && rank > gangRank {
			errs = append(errs, fmt.Errorf("%s %s is %s, looser than the gang's level %s: a segment is part of the gang, so its domain must be at or below the gang's; "+
				"set the segment level to %s or a tighter one, or loosen the gang's", seg.from, seg.levelKey, seg.Policy.Level, policy.Level, policy.Level))
		}
	}
	k := seg.Size
	if members > 0 && minMember >= members && members%k != 0 {
		what := fmt.Sprintf("the gang's %d members", members)
		if out > 0 {
			what = fmt.Sprintf("the %d members its segments cover (%s, outside them, is not counted)", members, outside)
		}
		errs = append(errs, fmt.Errorf("%s %s is %d, which does not divide %s: %s, or make the member count a multiple of %d",
			seg.from, seg.sizeKey, k, what, divisorHint(members, k), k))
	}
	if minMember < members && minMember%k != 0 {
		errs = append(errs, fmt.Errorf("the gang is elastic (quorum %d of %d members) and its quorum is not a whole number of segments of %d: "+
			"set the quorum to a multiple of %d, so that the gang starts with whole segments and grows by whole segments", minMember, members, k, k))
	}
	return errors.Join(errs...)
}

// divisorHint suggests the divisors of n nearest to k.
func divisorHint(n, k int32) string {
	below, above := int32(0), int32(0)
	for d := int32(1); d <= n; d++ {
		if n%d != 0 {
			continue
		}
		if d < k {
			below = d
		} else if above == 0 {
			above = d
		}
	}
	switch {
	case below > 1 && above > 0:
		return fmt.Sprintf("set a size that divides %d, such as %d or %d", n, below, above)
	case above > 0:
		return fmt.Sprintf("set a size that divides %d, such as %d", n, above)
	default:
		return fmt.Sprintf("set a size that divides %d, such as %d", n, below)
	}
}

// Assign returns the segment of each member, -1 for a member the segments
// do not cover (Covers): members are the gang's members in rank order
// (SortByRank), every member that exists, placed or not. Segment i holds
// the covered members of ordinals i*Size to (i+1)*Size-1, where a member's
// ordinal is its place among the covered members:
//   - when every member carries a rank index (RankOf) and no two of one role
//     share one, the ordinal is the index, counted after the members of
//     the roles before it (a launcher or master before the workers): a
//     member lost and not yet replaced then leaves a gap instead of moving
//     the ranks after it into other segments, so that a replacement, and
//     every member planned beside it, returns to its own segment;
//   - otherwise it is the member's position in rank order.
//
// A gang without segments has every member in segment 0.
func (seg Segments) Assign(members []*v1.Pod) []int {
	out := make([]int, len(members))
	if seg.Size == 0 {
		return out
	}
	var covered []*v1.Pod
	var at []int // covered[j] is members[at[j]]
	for i, p := range members {
		out[i] = -1
		if seg.Covers(p) {
			covered, at = append(covered, p), append(at, i)
		}
	}
	for j, o := range ordinals(covered) {
		out[at[j]] = o / int(seg.Size)
	}
	return out
}

// ordinals returns each member's ordinal; see Assign.
func ordinals(members []*v1.Pod) []int {
	out := make([]int, len(members))
	ranks := make([]Rank, len(members))
	seen := make(map[[2]int]bool, len(members))
	top := map[int]int{} // the highest index of each role
	indexed := true
	for i, p := range members {
		out[i] = i
		r := RankOf(p)
		ranks[i] = r
		id := [2]int{r.role, r.index}
		if r.index < 0 || seen[id] {
			indexed = false
		}
		seen[id] = true
		top[r.role] = max(top[r.role], r.index)
	}
	if !indexed {
		return out
	}
	for i, r := range ranks {
		base := 0
		if r.role > 0 {
			if t, ok := top[0]; ok {
				base = t + 1
			}
		}
		out[i] = base + r.index
	}
	return out
}

// Slot says where one member of a gang is in the placement.Request being
// planned.
type Slot struct {
	// Member is the member's index in Request.Members when it is planned
	// now; -1 otherwise.
	Member int
	// Anchor is the index in Request.Anchors of the node of a placed member
	// that topology binds; -1 otherwise.
	Anchor int
}

// Hierarchy returns the placement hierarchy of a segmented gang: a root,
// named name, under the gang's policy, whose children are its segments,
// each under the segment policy, in segment order, and last the members the
// segments do not cover (a launcher, a master), under the gang's policy
// alone. members are the gang's members in rank order (as for Assign) and
// slots[i] says where members[i] is in the Request; a segment without a
// member planned now or an anchor is left out. A replacement or a late
// member thus plans inside the segment whose anchors it shares. Nil for a
// gang without segments: a flat gang.
func (seg Segments) Hierarchy(name string, policy placement.Policy, members []*v1.Pod, slots []Slot) *placement.Subgroup {
	if seg.Size == 0 {
		return nil
	}
	of := seg.Assign(members)
	root := &placement.Subgroup{Name: name, Policy: policy}
	// Ordinals grow with rank order, so segments come in order.
	bySegment := map[int]int{} // segment -> index in root.Children
	apart := placement.Subgroup{Name: name + " outside segments"}
	for i, s := range slots {
		if s.Member < 0 && s.Anchor < 0 {
			continue
		}
		child := &apart
		if of[i] >= 0 {
			c, ok := bySegment[of[i]]
			if !ok {
				c = len(root.Children)
				bySegment[of[i]] = c
				first := of[i] * int(seg.Size)
				root.Children = append(root.Children, placement.Subgroup{
					Name:   fmt.Sprintf("%s segment %d (ranks %d-%d)", name, of[i], first, first+int(seg.Size)-1),
					Policy: seg.Policy,
				})
			}
			child = &root.Children[c]
		}
		if s.Member >= 0 {
			child.Members = append(child.Members, s.Member)
		}
		if s.Anchor >= 0 {
			child.Anchors = append(child.Anchors, s.Anchor)
		}
	}
	if len(apart.Members)+len(apart.Anchors) > 0 {
		slices.Sort(apart.Members)
		slices.Sort(apart.Anchors)
		root.Children = append(root.Children, apart)
	}
	return root
}
