package topology

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// packingFabric is 2 spines x 2 leaves x 4 nodes of 8 GPUs, cliques of 2
// nodes, in name order; free[i] overrides node i's free GPUs.
func packingFabric(free map[int]int64) []*nodeWrapper {
	var nodes []*nodeWrapper
	for s := range 2 {
		for l := range 2 {
			leaf := fmt.Sprintf("s%d-l%d", s, l)
			for n := range 4 {
				w := makeNode(fmt.Sprintf("%s-n%d", leaf, n)).spine(fmt.Sprintf("s%d", s)).leaf(leaf).clique(fmt.Sprintf("%s-c%d", leaf, n/2))
				if f, ok := free[len(nodes)]; ok {
					w.freeGPUs(f)
				}
				nodes = append(nodes, w)
			}
		}
	}
	return nodes
}

// fitOrder names the nodes of req in NodeFit's order.
func fitOrder(t *testing.T, p *Planner, req *placement.Request) []string {
	t.Helper()
	fit, err := p.NodeFit(req)
	require.NoError(t, err)
	idx := make([]int, len(req.Nodes))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, fit.Compare)
	out := make([]string, len(idx))
	for k, i := range idx {
		out[k] = req.Nodes[i].Name
	}
	return out
}

// A pod goes where it leaves the most whole domains: onto the used node
// with the least room, then next to it in its clique, leaf and spine, and
// only then into domains nobody uses.
func TestNodeFitPacksIntoUsedDomains(t *testing.T) {
	p, err := NewPlanner(nvidiaLevels())
	require.NoError(t, err)
	// Node 13 (s1-l1-n1, in the last clique of the last leaf in tree
	// order) has 5 GPUs free; node 6 (s0-l1-n2) has 7.
	req := makeRequest("ns/notebook").nodes(packingFabric(map[int]int64{13: 5, 6: 7})...).workers(1, 1).obj()
	got := fitOrder(t, p, req)
	require.Equal(t, "s1-l1-n1", got[0], "least room first")
	require.Equal(t, "s0-l1-n2", got[1], "then the next least room")
	// Among the whole free nodes, the one in the fuller clique first: the
	// clique of s1-l1-n1 has 5+8 GPUs free, that of s0-l1-n2 7+8.
	require.Equal(t, "s1-l1-n0", got[2])
	require.Equal(t, "s0-l1-n3", got[3])
	// Then the rest of the used leaves before any untouched one, the fuller
	// leaf first.
	require.ElementsMatch(t, []string{"s1-l1-n2", "s1-l1-n3"}, got[4:6])
	require.ElementsMatch(t, []string{"s0-l1-n0", "s0-l1-n1"}, got[6:8])
}

// NodeFit is the planner's own rule: for a gang of one pod, the planner
// places it on the node NodeFit puts first among those with room, on any
// layout of free capacity.
func TestNodeFitFirstIsThePlannersChoice(t *testing.T) {
	p, err := NewPlanner(nvidiaLevels())
	require.NoError(t, err)
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		free := map[int]int64{}
		for i := range 16 {
			free[i] = []int64{0, 0, 1, 2, 3, 5, 8, 8, 8}[r.IntN(9)]
		}
		gpus := int64(1 + r.IntN(3))
		req := makeRequest("ns/p").nodes(packingFabric(free)...).workers(1, gpus).generation(uint64(trial + 1)).obj()
		fit, err := p.NodeFit(req)
		require.NoError(t, err)
		best := -1
		for i := range req.Nodes {
			if fit.Room(i) > 0 && (best < 0 || fit.Compare(i, best) < 0) {
				best = i
			}
		}
		plan, err := p.Plan(context.Background(), req)
		if best < 0 {
			require.Error(t, err, "trial %d: no node has room", trial)
			continue
		}
		require.NoError(t, err, "trial %d", trial)
		require.Equal(t, req.Nodes[best].Name, req.Nodes[plan.NodeOf[0]].Name, "trial %d: free %v, %d GPUs", trial, free, gpus)
	}
}

func TestNodeFitNeedsOneShape(t *testing.T) {
	p, err := NewPlanner(nvidiaLevels())
	require.NoError(t, err)
	req := makeRequest("ns/p").nodes(packingFabric(nil)...).workers(1, 1).workers(1, 2).obj()
	_, err = p.NodeFit(req)
	require.ErrorContains(t, err, "2 shapes")
}
