package core

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// A unit rooted at a composite (gang.Tree) is planned in one request whose
// hierarchy holds the composite's topology for the whole tree and each
// child PodGroup's for itself.

// shapeTree is shapeRequest for a composite unit, whose tree is tree: one
// hierarchy for the whole tree (gang.Tree.Hierarchy), with each PodGroup's
// own leaf built by gangHierarchy (its policy, its segments, its sharers),
// so that the composite's topology holds for the whole and each child's
// for itself. PodGroups with members placed already are in it too, so
// that their anchors stay in their own subgroup's domain.
func (pl *Planner) shapeTree(tree *gang.Tree, s *requestShaper) *fwk.Status {
	spec, members, req := s.spec, s.members, s.req
	req.Policy = *spec.Topology
	all, anchorOf := pl.anchorRequest(spec.Key, s.all, members, req, s.nodeInfos)
	of := gang.ByPodGroup(all)
	var plan []int
	for _, i := range tree.Leaves() {
		if slices.ContainsFunc(of[tree.Nodes[i].Key], func(p *v1.Pod) bool { return planned(p, members) || anchored(p, anchorOf) }) {
			plan = append(plan, i)
		}
	}
	var status *fwk.Status
	req.Hierarchy = tree.Hierarchy(plan, func(i int) placement.Subgroup {
		leaf := tree.Nodes[i].Spec
		mine := of[leaf.Key]
		gang.SortByRank(mine)
		policy := pl.policyOf(leaf, mine)
		seg, st := pl.segmentsOf(leaf, mine, policy)
		if st != nil {
			status = cmpStatus(status, st)
			return placement.Subgroup{Name: leaf.Key.String()}
		}
		h, err := gangHierarchy(leaf.Key.String(), seg, policy, mine, members, anchorOf, s.d)
		if err != nil {
			pl.reporter.GangEvent(spec, nil, v1.EventTypeWarning, scheduling.ReasonInvalidPodGroup, "%v", err)
			status = cmpStatus(status, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gang %s: %v", leaf.Key, err)))
		}
		if h == nil {
			h = flatLeaf(leaf.Key.String(), policy, mine, members, anchorOf)
		}
		return *h
	})
	return status
}

// cmpStatus keeps the first failure.
func cmpStatus(first, next *fwk.Status) *fwk.Status {
	if first != nil {
		return first
	}
	return next
}

// planned reports whether p is among the members a request plans.
func planned(p *v1.Pod, members []*v1.Pod) bool {
	return slices.ContainsFunc(members, func(q *v1.Pod) bool { return q.UID == p.UID })
}

// anchored reports whether p is a placed member the request anchors.
func anchored(p *v1.Pod, anchorOf map[types.UID]int) bool {
	_, ok := anchorOf[p.UID]
	return ok
}

// flatLeaf is the subgroup of a PodGroup without segments or sharers: its
// planned members and its anchors under its own policy.
func flatLeaf(name string, policy placement.Policy, mine, members []*v1.Pod, anchorOf map[types.UID]int) *placement.Subgroup {
	g := &placement.Subgroup{Name: name, Policy: policy}
	for _, p := range mine {
		if i := slices.IndexFunc(members, func(q *v1.Pod) bool { return q.UID == p.UID }); i >= 0 {
			g.Members = append(g.Members, i)
		}
		if a, ok := anchorOf[p.UID]; ok {
			g.Anchors = append(g.Anchors, a)
		}
	}
	slices.Sort(g.Members)
	slices.Sort(g.Anchors)
	return g
}
