package topology

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/placement/placementtest"
)

// TestFragmentedFabricLeavesSpanned places a stream of whole-node gangs on
// a 3-tier fabric (4 spines × 8 leaves × 32 nodes, 8 GPUs, cliques of 8)
// pre-filled to about half its GPUs, and compares, gang by gang, the leaves
// each plan spans with the fewest leaves whose free capacity could hold the
// gang at that moment, and with the topology-blind greedy planner.
func TestFragmentedFabricLeavesSpanned(t *testing.T) {
	nodes := placementtest.MakeFabric().Spines(4).LeavesPerSpine(8).NodesPerLeaf(32).CliqueSize(8).Obj()
	rng := rand.New(rand.NewPCG(4, 8))
	for i := range nodes {
		// Whole nodes busy or free half the time, partial nodes otherwise:
		// about 50% of the GPUs in use.
		switch r := rng.IntN(4); r {
		case 0:
			nodes[i].Free[1] = 0
		case 1:
			nodes[i].Free[1] = 8
		default:
			nodes[i].Free[1] = int64(rng.IntN(9))
		}
	}
	p := newTestPlanner(t)
	var total, bound, greedyTotal int
	t.Logf("%-6s %-16s %-16s %-16s", "nodes", "spines/leaves", "minimum", "greedy")
	for i, size := range []int{2, 4, 8, 16, 3, 6, 12, 24, 5, 10, 20, 32} {
		req := makeRequest(fmt.Sprintf("ns/gang-%d", i)).nodeObjs(nodes).workers(size, 8).obj()
		res, err := p.PlanDetailed(t.Context(), req)
		require.NoError(t, err, "gang of %d nodes", size)
		requireValid(t, req, res.Plan)
		lb, err := p.LowerBound(req)
		require.NoError(t, err)
		greedy, err := placementtest.Greedy{}.Plan(t.Context(), req)
		require.NoError(t, err)
		tree := p.Tree(req)
		blindSpans := tree.Spans(req, greedy.NodeOf)
		got, min, blind := span(res.Spans, leafKey), span(lb, leafKey), span(blindSpans, leafKey)
		t.Logf("%-6d %-16s %-16s %-16s", size, fmt.Sprintf("%d/%d", span(res.Spans, spineKey), got),
			fmt.Sprintf("%d/%d", span(lb, spineKey), min), fmt.Sprintf("%d/%d", span(blindSpans, spineKey), blind))
		// Spines are the costliest hop, so the planner spans as few as
		// possible first; within them, as few leaves as fit.
		require.Equal(t, span(lb, spineKey), span(res.Spans, spineKey), "gang %d (%d nodes): spines spanned", i, size)
		require.LessOrEqual(t, got, blind, "gang %d (%d nodes): leaves spanned, against greedy", i, size)
		// Within one spine, no placement uses fewer leaves.
		require.Equal(t, fewestLeavesInOneSpine(nodes, size), got, "gang %d (%d nodes): leaves within one spine", i, size)
		total, bound, greedyTotal = total+got, bound+min, greedyTotal+blind
		// The gang runs: its nodes are no longer free.
		for m, n := range res.Plan.NodeOf {
			nodes[n].Free.Sub(req.Members[m].Request)
		}
	}
	t.Logf("total leaves spanned: topology %d, minimum per gang %d, greedy %d", total, bound, greedyTotal)
	require.Less(t, total, greedyTotal, "the topology planner must beat the topology-blind one here")
}

// fewestLeavesInOneSpine is, for a gang of size whole-node members, the
// fewest leaves of a single spine whose whole free nodes hold it, found by
// counting: in each spine, take the leaves with the most whole free nodes
// first.
func fewestLeavesInOneSpine(nodes []placement.Node, size int) int {
	free := map[string]map[string]int{} // spine -> leaf -> whole free nodes
	for _, n := range nodes {
		if n.Free[1] == 8 {
			sp, lf := n.Labels[spineKey], n.Labels[leafKey]
			if free[sp] == nil {
				free[sp] = map[string]int{}
			}
			free[sp][lf]++
		}
	}
	best := 0
	for _, leaves := range free {
		counts := make([]int, 0, len(leaves))
		for _, c := range leaves {
			counts = append(counts, c)
		}
		slices.SortFunc(counts, func(a, b int) int { return b - a })
		sum := 0
		for k, c := range counts {
			if sum += c; sum >= size {
				if best == 0 || k+1 < best {
					best = k + 1
				}
				break
			}
		}
	}
	return best
}

// span returns how many domains of the level keyed key spans lists; a
// level that is not listed is above the gang's domain, so it spans one.
func span(spans []LevelSpan, key string) int {
	for _, s := range spans {
		if s.Key == key {
			return s.Domains
		}
	}
	return 1
}
