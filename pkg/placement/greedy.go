package placement

import (
	"context"
	"fmt"
	"sort"
)

// Greedy places members largest first, each on the eligible node where it
// leaves the least spare capacity (best fit). It knows nothing of topology,
// so it is the planner used when no topology levels are configured, and the
// yardstick the topology planner is measured against.
type Greedy struct{}

var _ Planner = Greedy{}

// Plan implements Planner.
func (Greedy) Plan(ctx context.Context, req *Request) (*Plan, error) {
	free := make([]Vector, len(req.Nodes))
	for i := range req.Nodes {
		free[i] = req.Nodes[i].Free.Clone()
	}
	scale := maxAllocatable(req)

	order := make([]int, len(req.Members))
	size := make([]float64, len(req.Members))
	for i := range req.Members {
		order[i] = i
		size[i] = normalized(req.Members[i].Request, scale)
	}
	// Largest first packs best; the stable sort keeps rank order among equals.
	sort.SliceStable(order, func(a, b int) bool { return size[order[a]] > size[order[b]] })

	plan := &Plan{NodeOf: make([]int, len(req.Members))}
	used := make(map[int]bool)
	for placed, mi := range order {
		if placed%64 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		m := &req.Members[mi]
		best, bestSpare := -1, 0.0
		for ni := range free {
			if !m.EligibleOn(ni) || !m.Request.FitsIn(free[ni]) {
				continue
			}
			spare := spareAfter(m.Request, free[ni], scale)
			if best < 0 || spare < bestSpare {
				best, bestSpare = ni, spare
			}
		}
		if best < 0 {
			return nil, &FitError{
				Placed: placed,
				Wanted: len(req.Members),
				Reason: fmt.Sprintf("no node has %s free for %s", Describe(req.Resources, m.Request), m.Name),
			}
		}
		free[best].Sub(m.Request)
		plan.NodeOf[mi] = best
		used[best] = true
	}
	plan.Summary = fmt.Sprintf("%d pods on %d nodes", len(req.Members), len(used))
	plan.Spans = []Span{{Level: "kubernetes.io/hostname", Domains: len(used)}}
	return plan, nil
}

// maxAllocatable is, per dimension, the largest allocatable of any node. It
// puts dimensions with different units on one scale.
func maxAllocatable(req *Request) Vector {
	scale := make(Vector, len(req.Resources))
	for i := range req.Nodes {
		for d, q := range req.Nodes[i].Allocatable {
			if q > scale[d] {
				scale[d] = q
			}
		}
	}
	return scale
}

func normalized(v, scale Vector) float64 {
	var s float64
	for d, q := range v {
		if scale[d] > 0 {
			s += float64(q) / float64(scale[d])
		}
	}
	return s
}

// spareAfter scores what placing request on a node leaves free, counting only
// the dimensions the request uses: the smaller, the tighter the fit.
func spareAfter(request, free, scale Vector) float64 {
	var s float64
	for d, q := range request {
		if q > 0 && scale[d] > 0 {
			s += float64(free[d]-q) / float64(scale[d])
		}
	}
	return s
}
