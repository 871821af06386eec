package placementtest

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Greedy places members largest first, each on the eligible node where it
// leaves the least spare capacity (BestFit). It knows nothing of topology.
// The scheduler never runs it: it is the yardstick the topology planner's
// tests measure against, and the planner of the gang plugin's tests that
// are not about topology.
type Greedy struct{}

var _ placement.Planner = Greedy{}

// Plan implements Planner.
func (g Greedy) Plan(ctx context.Context, req *placement.Request) (*placement.Plan, error) {
	if req.Groups.Split() {
		return g.planGroups(ctx, req)
	}
	return g.plan(ctx, req)
}

func (g Greedy) plan(ctx context.Context, req *placement.Request) (*placement.Plan, error) {
	nodeOf, placed, err := g.place(ctx, req)
	if err != nil {
		return nil, err
	}
	if placed < len(req.Members) {
		var m *placement.Member
		for i, n := range nodeOf {
			if n < 0 {
				m = &req.Members[i]
				break
			}
		}
		return nil, &placement.FitError{
			Placed: placed,
			Wanted: len(req.Members),
			Reason: fmt.Sprintf("no node has %s free for %s", placement.Describe(req.Resources, m.Request), m.Name),
		}
	}
	used := map[int]bool{}
	for _, n := range nodeOf {
		used[n] = true
	}
	return &placement.Plan{
		NodeOf:  nodeOf,
		Summary: fmt.Sprintf("%d pods on %d nodes", len(req.Members), len(used)),
		Spans:   []placement.Span{{Level: "kubernetes.io/hostname", Domains: len(used)}},
	}, nil
}

// place puts as many members as fit, largest first, and returns the node of
// each (-1 for those that found none) and how many were placed. It ignores
// req.Groups, which Plan applies.
func (Greedy) place(ctx context.Context, req *placement.Request) (nodeOf []int, placed int, err error) {
	free := make([]placement.Vector, len(req.Nodes))
	for i := range req.Nodes {
		free[i] = req.Nodes[i].Free.Clone()
	}
	fit := placement.NewBestFit(req)

	order := make([]int, len(req.Members))
	size := make([]float64, len(req.Members))
	for i := range req.Members {
		order[i] = i
		size[i] = fit.Size(req.Members[i].Request)
	}
	// Largest first packs best; the stable sort keeps rank order among equals.
	sort.SliceStable(order, func(a, b int) bool { return size[order[a]] > size[order[b]] })

	// A replacement goes to a node of its running gang first.
	anchored := make([]bool, len(req.Nodes))
	for _, a := range req.Anchors {
		anchored[a] = true
	}
	// taken counts, per kind of capped member and node, the members placed.
	type capKey struct {
		kind int
		node int
	}
	taken := map[capKey]int{}
	kinds := capKinds(req)

	nodeOf = make([]int, len(req.Members))
	for i, mi := range order {
		if i%64 == 0 && ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		m := &req.Members[mi]
		best, bestSpare, bestAnchored := -1, 0.0, false
		for ni := range free {
			if !m.EligibleOn(ni) || !m.Request.FitsIn(free[ni]) {
				continue
			}
			if m.MaxPerNode > 0 && taken[capKey{kinds[mi], ni}] >= m.MaxPerNode {
				continue
			}
			spare := fit.SpareAfter(m.Request, free[ni])
			if best < 0 || anchored[ni] && !bestAnchored || anchored[ni] == bestAnchored && spare < bestSpare {
				best, bestSpare, bestAnchored = ni, spare, anchored[ni]
			}
		}
		nodeOf[mi] = best
		if best >= 0 {
			free[best].Sub(m.Request)
			taken[capKey{kinds[mi], best}]++
			placed++
		}
	}
	return nodeOf, placed, nil
}

// capKinds numbers the kinds of members that MaxPerNode counts together:
// the same request, eligibility slice and cap.
func capKinds(req *placement.Request) []int {
	kinds := make([]int, len(req.Members))
	for i := range req.Members {
		kinds[i] = i
		m := &req.Members[i]
		if m.MaxPerNode == 0 {
			continue
		}
		for j := range i {
			o := &req.Members[j]
			if o.MaxPerNode == m.MaxPerNode && sameSlice(o.Eligible, m.Eligible) && slices.Equal(o.Request, m.Request) {
				kinds[i] = kinds[j]
				break
			}
		}
	}
	return kinds
}

func sameSlice(a, b []bool) bool { return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0]) }
