package topology

import (
	"cmp"
	"context"
	"errors"

	"k8s.io/klog/v2"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// rank is how a plan made inside one group of nodes compares with plans
// made inside the others: by the planner's own rules for domains, the
// lowest level first, then the fewest spans (compared on the Result), then
// the least room.
type rank struct {
	// level is the tree level of the domain that holds the bound members.
	level int
	// room is that domain's room for the gang (see usage.room).
	room int64
}

// compareGroupPlans orders two plans made in different groups: -1 when a
// is better. Equal plans compare 0; the caller keeps the lower group.
func compareGroupPlans(a *Result, ra rank, b *Result, rb rank) int {
	if c := cmp.Compare(ra.level, rb.level); c != 0 {
		return c
	}
	// Spans count domains per level, loosest first, so comparing them in
	// order compares what the planner's cost weights compare.
	for i := range min(len(a.Spans), len(b.Spans)) {
		if c := cmp.Compare(a.Spans[i].Domains, b.Spans[i].Domains); c != 0 {
			return c
		}
	}
	return cmp.Compare(ra.room, rb.room)
}

// planGroups plans a gang whose nodes req.Groups splits into groups that its
// bound members must not mix. Each group is an extra, outermost domain: the
// gang is planned inside every group, as if the group's nodes were the whole
// cluster for its bound members, and the best plan is kept by the rules the
// planner applies to any domain (lowest level, fewest spans, least room),
// ties going to the lower group. A running gang's new members are planned
// only in the group that holds most of its members (Request.AnchorGroup),
// so a gang never mixes groups, even to heal. Members not bound by topology
// are not grouped.
//
// Planning every group costs one plan per group; groups that cannot hold
// the gang's shapes fail on their slot counts, before any packing. planIn
// plans the gang inside group k on tree t, for flat and hierarchical gangs
// alike; at are the group's depth-first positions on t, ascending, and sc
// the slot arrays the groups' counts share (slotScratch).
func (p *Planner) planGroups(ctx context.Context, req *placement.Request, planIn func(t *Tree, k int, at []int32, sc *slotScratch) (*Result, rank, error)) (*Result, error) {
	g := req.Groups
	if !p.layouts.validated(g, len(req.Nodes)) {
		if err := g.Validate(len(req.Nodes)); err != nil {
			return nil, err
		}
	}
	// The groups share the nodes: checked once here, not per group.
	if err := validateNodes(req); err != nil {
		return nil, err
	}
	logger := klog.FromContext(ctx)
	// Groups narrow eligibility only: every group plans on the same tree.
	t := p.Tree(req)
	lay := p.layouts.of(t, g)
	at := lay.at
	var sc slotScratch
	if sc.kept = p.kept.lease(lay, req); sc.kept != nil {
		defer sc.kept.release()
	}
	tries := make([]*placement.FitError, len(g.Names))
	var best *Result
	var bestRank rank
	bestGroup := -1
	try := func(k int) error {
		sc.next, sc.nextAt, sc.group, sc.nodes = lay.above[k], at[k], k, lay.indices[k]
		res, rk, err := planIn(t, k, at[k], &sc)
		sc.reset()
		var fe *placement.FitError
		switch {
		case errors.As(err, &fe):
			tries[k] = fe
			logger.V(5).Info("Group of nodes does not hold the gang", "gang", req.Gang, "group", g.Names[k], "reason", fe.Reason)
			return nil
		case err != nil:
			return err
		}
		if best == nil || compareGroupPlans(res, rk, best, bestRank) < 0 {
			if best != nil {
				logger.V(4).Info("Group of nodes lost", "gang", req.Gang, "group", g.Names[bestGroup], "to", g.Names[k])
			}
			best, bestRank, bestGroup = res, rk, k
		} else {
			logger.V(4).Info("Group of nodes lost", "gang", req.Gang, "group", g.Names[k], "to", g.Names[bestGroup])
		}
		return nil
	}
	if k := req.AnchorGroup(); k >= 0 {
		if err := try(k); err != nil {
			return nil, err
		}
	} else {
		for k := range g.Names {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if err := try(k); err != nil {
				return nil, err
			}
		}
	}
	if best == nil {
		return nil, g.NoGroupFits(len(req.Members), tries)
	}
	best.Group = g.Names[bestGroup]
	best.Plan.Summary += "; group " + best.Group
	return best, nil
}

// groupPositions lists, for each group of g, the depth-first positions of
// its nodes on t, ascending: where planIn counts the group's slots.
func groupPositions(t *Tree, g *placement.Groups) [][]int32 {
	size := make([]int, len(g.Names))
	for _, k := range g.Of {
		size[k]++
	}
	at := make([][]int32, len(g.Names))
	for k, n := range size {
		at[k] = make([]int32, 0, n)
	}
	for p, i := range t.node {
		k := g.Of[i]
		at[k] = append(at[k], int32(p))
	}
	return at
}

// nodesAt lists the indices in the Request of the nodes at depth-first
// positions at: a group's nodes, for Request.InGroupAt.
func (t *Tree) nodesAt(at []int32) []int {
	out := make([]int, len(at))
	for j, p := range at {
		out[j] = int(t.node[p])
	}
	return out
}

// anyBound reports whether some member is bound by topology, and so by
// groups.
func anyBound(req *placement.Request) bool {
	for i := range req.Members {
		if req.Members[i].Accelerated {
			return true
		}
	}
	return false
}
