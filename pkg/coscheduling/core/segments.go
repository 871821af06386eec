package core

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// A gang's placement hierarchy (placement.Request.Hierarchy) has two
// sources, and one builder, shapeRequest, for the planner and for
// preemption alike:
//   - segments (gang.SegmentsOf): K consecutive ranks inside one domain of
//     the segment level, the gang's own policy for the whole, and the
//     members the segments do not cover (a launcher) in a subgroup of
//     their own under that policy;
//   - members that share a ResourceClaim, inside one node (dra/shared.go).
//
// Sharers nest inside their segment. A running gang's placed members are
// anchors in their own segment's leaf, so that a replacement or a late
// elastic member returns to the domain its segment already uses.

// shapeRequest sets what the unit spec names itself asks of req, beyond
// its members and nodes: its policy, the nodes its placed members hold
// (anchors), and its hierarchy, as the unit's kind shapes them
// (gang.Unit.Shape): one tree for a composite (shapeTree), the gang's own
// otherwise (shapeGang). members are the members req plans, in rank order.
func (pl *Planner) shapeRequest(spec *gang.Spec, members []*v1.Pod, d *dra.PassDemand, req *placement.Request, nodeInfos []fwk.NodeInfo) *fwk.Status {
	u, err := pl.gangs.Unit(spec.Key)
	if err != nil {
		return fwk.AsStatus(err)
	}
	return UnitStatus(u.Shape(&requestShaper{pl: pl, spec: spec, all: u.Members(), members: members, d: d, req: req, nodeInfos: nodeInfos}))
}

// requestShaper shapes one request (shapeRequest's arguments) as the
// unit's kind asks (gang.Shaper).
type requestShaper struct {
	pl   *Planner
	spec *gang.Spec
	// all are the unit's live members; members those req plans.
	all, members []*v1.Pod
	d            *dra.PassDemand
	req          *placement.Request
	nodeInfos    []fwk.NodeInfo
}

var _ gang.Shaper = &requestShaper{}

func (s *requestShaper) ShapeGang() error { return AsError(s.pl.shapeGang(s)) }

func (s *requestShaper) ShapeTree(t *gang.Tree) error { return AsError(s.pl.shapeTree(t, s)) }

// shapeGang is shapeRequest for a PodGroup's unit. A gang whose segments
// are invalid gets an InvalidPodGroup Event naming the fix, and the status
// to reject with.
func (pl *Planner) shapeGang(s *requestShaper) *fwk.Status {
	spec, members, req := s.spec, s.members, s.req
	req.Policy = pl.policyOf(spec, members)
	all, anchorOf := pl.anchorRequest(spec.Key, s.all, members, req, s.nodeInfos)
	seg, status := pl.segmentsOf(spec, all, req.Policy)
	if status != nil {
		return status
	}
	h, err := gangHierarchy(spec.Key.String(), seg, req.Policy, all, members, anchorOf, s.d)
	if err != nil {
		pl.reporter.GangEvent(spec, nil, v1.EventTypeWarning, scheduling.ReasonInvalidPodGroup, "%v", err)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gang %s: %v", spec.Key, err))
	}
	req.Hierarchy = h
	return nil
}

// anchorRequest sets req's anchors, the nodes of the unit's placed members
// (anchors), and returns the unit's members (live, as the informer lists
// them) with those being planned, in rank order (withMembers), and the
// anchor of each placed member.
func (pl *Planner) anchorRequest(key gang.Key, live, members []*v1.Pod, req *placement.Request, nodeInfos []fwk.NodeInfo) ([]*v1.Pod, map[types.UID]int) {
	var anchorOf map[types.UID]int
	req.Anchors, anchorOf = anchors(nodeInfos, pl.placedMembers(key))
	return withMembers(live, members), anchorOf
}

// withMembers returns the gang's members (all, as the informer lists them)
// with the members being planned added where the informer does not have
// them yet, in rank order.
func withMembers(all, planned []*v1.Pod) []*v1.Pod {
	out := slices.Clone(all)
	for _, p := range planned {
		if !slices.ContainsFunc(out, func(q *v1.Pod) bool { return q.UID == p.UID }) {
			out = append(out, p)
		}
	}
	gang.SortByRank(out)
	return out
}

// SegmentsOf reads the gang's segments, as a plan of members (all of them,
// in rank order) reads them: checked against its members and its policy
// (policyOf). Invalid segments get an InvalidPodGroup Event and the status
// to reject with.
func (pl *Planner) SegmentsOf(spec *gang.Spec, members []*v1.Pod) (gang.Segments, *fwk.Status) {
	return pl.segmentsOf(spec, members, pl.policyOf(spec, members))
}

// segmentsOf reads the gang's segments and checks them against its
// members (all of them, in rank order) and its policy; gang.Segments owns
// both rules, which members the segments cover (a launcher or master
// beside sliced workers is outside them), and the messages. Invalid
// segments get an InvalidPodGroup Event and the status to reject with: no
// plan can honour them until someone changes the PodGroup or its pods.
func (pl *Planner) segmentsOf(spec *gang.Spec, all []*v1.Pod, policy placement.Policy) (gang.Segments, *fwk.Status) {
	seg, err := gang.SegmentsOf(spec, all)
	if err == nil {
		err = seg.Validate(pl.levels, policy, all, spec.MinMember)
	}
	if err != nil {
		pl.reporter.GangEvent(spec, nil, v1.EventTypeWarning, scheduling.ReasonInvalidPodGroup, "PodGroup %s has invalid segments: %v", spec.Key, err)
		return gang.Segments{}, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gang %s has invalid segments: %v", spec.Key, err))
	}
	return seg, nil
}

// gangHierarchy builds the hierarchy of a gang named name under policy: its
// segments (seg.Hierarchy over all its members, in rank order), and inside
// them each group of planned members that share a claim, on one node. nil
// for a flat gang. planned are Request.Members' pods; anchorOf gives the
// Request.Anchors index of each placed member that topology binds. The
// error says which sharers straddle segments: one node cannot sit in two
// segments' domains, so the claim must be shared inside one segment.
func gangHierarchy(name string, seg gang.Segments, policy placement.Policy, all, planned []*v1.Pod, anchorOf map[types.UID]int, d *dra.PassDemand) (*placement.Subgroup, error) {
	index := make(map[types.UID]int, len(planned))
	for i, p := range planned {
		index[p.UID] = i
	}
	groups, claims, err := sharersAmong(d, all, planned, index)
	if err != nil {
		return nil, err
	}
	if seg.Size == 0 && len(groups) == 0 {
		return nil, nil
	}
	slots := make([]gang.Slot, len(all))
	for i, p := range all {
		slots[i] = gang.Slot{Member: -1, Anchor: -1}
		if j, ok := index[p.UID]; ok {
			slots[i].Member = j
		}
		if a, ok := anchorOf[p.UID]; ok {
			slots[i].Anchor = a
		}
	}
	root := seg.Hierarchy(name, policy, all, slots)
	if root == nil {
		// No segments: the whole gang is the one leaf the sharers split.
		root = &placement.Subgroup{Name: name, Policy: policy}
		for _, s := range slots {
			if s.Member >= 0 {
				root.Members = append(root.Members, s.Member)
			}
			if s.Anchor >= 0 {
				root.Anchors = append(root.Anchors, s.Anchor)
			}
		}
		slices.Sort(root.Members)
		splitSharers(root, groups, claims)
		return root, nil
	}
	for g, group := range groups {
		leaf := slices.IndexFunc(root.Children, func(c placement.Subgroup) bool { return slices.Contains(c.Members, group[0]) })
		for _, i := range group[1:] {
			if !slices.Contains(root.Children[leaf].Members, i) {
				return nil, fmt.Errorf("members %s share ResourceClaim %s, which puts them on one node, but they are in different segments of %d ranks (%s and another): "+
					"share a claim only among the members of one segment, or change the segment size", dra.MemberNames(planned, group), claims[g][0], seg.Size, root.Children[leaf].Name)
			}
		}
	}
	for c := range root.Children {
		var inside [][]int
		var named [][]types.NamespacedName
		for g, group := range groups {
			if slices.Contains(root.Children[c].Members, group[0]) {
				inside, named = append(inside, group), append(named, claims[g])
			}
		}
		splitSharers(&root.Children[c], inside, named)
	}
	return root, nil
}

// sharersAmong returns the groups of planned members that share claims
// (PassDemand.Sharers) among the gang's members all: a composite's request plans the
// members of several PodGroups, and each PodGroup's leaf holds its own
// sharers. index gives each planned member's place in the request. The
// error names a claim shared across PodGroups, which no one node can honour
// with each PodGroup in its own domain.
func sharersAmong(d *dra.PassDemand, all, planned []*v1.Pod, index map[types.UID]int) ([][]int, [][]types.NamespacedName, error) {
	groups, claims := d.Sharers()
	mine := make(map[int]bool, len(all))
	for _, p := range all {
		if i, ok := index[p.UID]; ok {
			mine[i] = true
		}
	}
	var outG [][]int
	var outC [][]types.NamespacedName
	for g, group := range groups {
		n := 0
		for _, i := range group {
			if mine[i] {
				n++
			}
		}
		switch n {
		case 0:
		case len(group):
			outG, outC = append(outG, group), append(outC, claims[g])
		default:
			return nil, nil, fmt.Errorf("members %s share ResourceClaim %s, which puts them on one node, but they belong to different PodGroups: share a claim only among the members of one PodGroup",
				dra.MemberNames(planned, group), claims[g][0])
		}
	}
	return outG, outC, nil
}

// splitSharers turns leaf into an inner subgroup when some of its members
// share claims: one child per group of sharers, inside one node, and one
// for its other members and its anchors.
func splitSharers(leaf *placement.Subgroup, groups [][]int, claims [][]types.NamespacedName) {
	if len(groups) == 0 {
		return
	}
	grouped := map[int]bool{}
	for g, members := range groups {
		for _, i := range members {
			grouped[i] = true
		}
		leaf.Children = append(leaf.Children, placement.Subgroup{
			Name:    fmt.Sprintf("sharers of ResourceClaim %s", claims[g][0]),
			Policy:  placement.Policy{Level: scheduling.HostnameKey, Required: true},
			Members: members,
		})
	}
	rest := placement.Subgroup{Name: "members", Anchors: leaf.Anchors}
	for _, i := range leaf.Members {
		if !grouped[i] {
			rest.Members = append(rest.Members, i)
		}
	}
	if len(rest.Members)+len(rest.Anchors) > 0 {
		leaf.Children = append(leaf.Children, rest)
	}
	leaf.Members, leaf.Anchors = nil, nil
}

// anchors are the positions, in nodeInfos, of the placed members that
// topology binds, one entry per member, in node order and then by member
// name; anchorOf gives each such member's entry.
func anchors(nodeInfos []fwk.NodeInfo, placed []*v1.Pod) (out []int, anchorOf map[types.UID]int) {
	if len(placed) == 0 {
		return nil, nil
	}
	index := make(map[string]int, len(nodeInfos))
	for i, ni := range nodeInfos {
		index[ni.Node().Name] = i
	}
	type anchor struct {
		node int
		pod  *v1.Pod
	}
	var as []anchor
	for _, p := range placed {
		// A member that took devices through DRA is bound by topology like
		// one that asked for an accelerator.
		if i, ok := index[p.Spec.NodeName]; ok && (dra.UsesAccelerators(capacity.PodAmounts(p)) || len(p.Spec.ResourceClaims) > 0) {
			as = append(as, anchor{i, p})
		}
	}
	slices.SortFunc(as, func(a, b anchor) int {
		if a.node != b.node {
			return a.node - b.node
		}
		return dra.CompareNames(types.NamespacedName{Namespace: a.pod.Namespace, Name: a.pod.Name}, types.NamespacedName{Namespace: b.pod.Namespace, Name: b.pod.Name})
	})
	anchorOf = make(map[types.UID]int, len(as))
	for i, a := range as {
		out = append(out, a.node)
		anchorOf[a.pod.UID] = i
	}
	return out, anchorOf
}
