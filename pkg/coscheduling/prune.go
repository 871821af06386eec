package coscheduling

import (
	"context"
	"slices"
	"sync"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Running every Filter plugin on every node, for each template, is what a
// plan costs most on a large cluster (issue 18). Most of those nodes
// cannot take a single member anyway: their free capacity, less what other
// gangs hold and nominated pods ask for, is short of every member's
// request. Whether a member may run on such a node changes no plan: the
// planners count a node's slots only where a member fits (topology's
// fitCount), and place members only there. So a plan is first made with
// Filter run on the roomy nodes alone, the others read as not eligible.
//
// A plan that succeeds that way is the plan the full scan gives: every node
// it uses is roomy, and no node it skipped had a slot to count. When it
// does not succeed, or a template finds no eligible node, the explanation
// and the head hold need every node's verdict (explainIneligible,
// explainNoFit count the capacity that can free up): Filter then runs on
// the rest and the gang is planned again, as if the first pass had been
// whole. Plans that are verified member by member (relational templates)
// learn lessons from each failure and are not pruned: their history would
// differ between the passes.

// roomyFirst runs the templates' Filter plugins on the roomy nodes of req
// (see roomy) and returns what runs them on the rest. It runs them on every
// node and returns nil when pruning does not apply: no template left to
// Filter, a template whose plans are verified, or no node to spare. gens
// are nodeInfos' generations now, or nil (filterKnown).
//
// done ends the pass's use of what it found roomy: the caller calls it once
// it no longer calls rest.
func (pl *Plugin) roomyFirst(ctx context.Context, templates []*template, nodeInfos []fwk.NodeInfo, gens []int64, req *placement.Request) (rest, done func()) {
	if pl.noPrune || !prunable(templates) {
		pl.filterKnown(ctx, templates, nodeInfos, gens, nil)
		return nil, func() {}
	}
	room, done := pl.view.roomy.lend(req)
	spare := 0
	for _, ok := range room {
		if !ok {
			spare++
		}
	}
	if spare == 0 {
		pl.filterKnown(ctx, templates, nodeInfos, gens, nil)
		return nil, done
	}
	pl.filterKnown(ctx, templates, nodeInfos, gens, func(i int) bool { return room[i] })
	return func() {
		pl.filterKnown(ctx, templates, nodeInfos, gens, func(i int) bool { return !room[i] })
	}, done
}

// prunable reports whether the templates' Filter plugins may run on roomy
// nodes first: some are still to run, and none is verified member by
// member (feasiblePlan).
func prunable(templates []*template) bool {
	pending := false
	for _, t := range templates {
		if t.relational {
			return false
		}
		pending = pending || t.pending
	}
	return pending
}

// roomy says, node by node, whether one member of req fits in the node's
// free capacity: every resource the member asks for is there. A member that
// asks for nothing fits everywhere.
func roomy(req *placement.Request) []bool {
	out := make([]bool, len(req.Nodes))
	shapes := shapesOf(req)
	for i := range req.Nodes {
		out[i] = roomyOn(shapes, req.Nodes[i].Free)
	}
	return out
}

// shapesOf lists the distinct requests of req's members.
func shapesOf(req *placement.Request) []placement.Vector {
	var shapes []placement.Vector
	for i := range req.Members {
		r := req.Members[i].Request
		if !slices.ContainsFunc(shapes, func(s placement.Vector) bool { return slices.Equal(s, r) }) {
			shapes = append(shapes, r)
		}
	}
	return shapes
}

// roomyOn reports whether one of shapes fits in free once.
func roomyOn(shapes []placement.Vector, free placement.Vector) bool {
	for _, r := range shapes {
		if r.FitsIn(free) {
			return true
		}
	}
	return false
}

// roomyMemo keeps roomy's answer per node from one plan to the next, with
// the free vector it was read from (issue 18: reading every node's vector
// again cost a plan a memory load per node). A node is read again when its
// vector is another one: the node view never writes a vector it lent
// (placement.Request.StableFree), so the same vector holds the same
// capacity; the memo holds the vectors, so their memory is not reused.
// All of it starts over when the members ask for other shapes or the
// nodes are others in number. Safe for concurrent use.
type roomyMemo struct {
	mu sync.Mutex
	// leased is set while a plan reads room (lend); no one writes the
	// memo meanwhile.
	leased bool
	shapes []placement.Vector
	free   []placement.Vector
	room   []bool
}

// lend is roomy(req), read again only on nodes whose vector changed, when
// req's vectors are never written and no other plan holds the memo;
// otherwise roomy itself. The answer is the memo's own until done is
// called, and must not be written.
func (m *roomyMemo) lend(req *placement.Request) (room []bool, done func()) {
	if !req.StableFree {
		return roomy(req), func() {}
	}
	shapes := shapesOf(req)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.leased {
		return roomy(req), func() {}
	}
	if len(m.room) != len(req.Nodes) || !slices.EqualFunc(m.shapes, shapes, slices.Equal) {
		m.shapes = make([]placement.Vector, len(shapes))
		for i, r := range shapes {
			m.shapes[i] = slices.Clone(r)
		}
		m.free, m.room = make([]placement.Vector, len(req.Nodes)), make([]bool, len(req.Nodes))
	}
	for i := range req.Nodes {
		f := req.Nodes[i].Free
		if m.free[i] != nil && len(f) == len(m.free[i]) && (len(f) == 0 || &f[0] == &m.free[i][0]) {
			continue
		}
		m.free[i], m.room[i] = f, roomyOn(shapes, f)
	}
	m.leased = true
	return m.room, func() {
		m.mu.Lock()
		m.leased = false
		m.mu.Unlock()
	}
}

// someIneligible reports whether a template that PreFilter let through has
// no eligible node yet: before that is explained, Filter must have run on
// every node.
func someIneligible(templates []*template) bool {
	for _, t := range templates {
		if t.rejected == nil && !anyTrue(t.eligible) {
			return true
		}
	}
	return false
}
