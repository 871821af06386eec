package topology

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// MIG slices and shared GPUs are resources of their own: the planner counts
// each resource name apart and packs a gang of mixed slice shapes onto the
// fewest nodes and NVLink domains, as it does whole GPUs.
func TestPlanMIGSlices(t *testing.T) {
	resources := []string{"cpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"}
	var nodes []placement.Node
	for c := range 2 {
		for n := range 3 {
			// Each node's GPUs are cut into 14 1g and 4 3g slices.
			free := placement.Vector{64000, 14, 4}
			if c == 0 && n == 0 {
				free = placement.Vector{64000, 2, 4} // mostly taken
			}
			nodes = append(nodes, placement.Node{
				Name:        fmt.Sprintf("c%d-n%d", c, n),
				Labels:      map[string]string{cliqueKey: fmt.Sprintf("c%d", c), leafKey: "l0", spineKey: "s0"},
				Allocatable: placement.Vector{64000, 14, 4},
				Free:        free,
			})
		}
	}
	req := &placement.Request{Gang: "ns/slices", Resources: resources, Nodes: nodes, NodeGeneration: 1}
	add := func(n int, v placement.Vector) {
		for range n {
			req.Members = append(req.Members, placement.Member{
				Name: fmt.Sprintf("ns/m-%d", len(req.Members)), Rank: len(req.Members), Request: v, Accelerated: true,
			})
		}
	}
	// 20 × 1g and 6 × 3g: two whole nodes' worth of each, so the gang
	// needs two nodes, and both shapes must share them.
	add(20, placement.Vector{1000, 1, 0})
	add(6, placement.Vector{1000, 0, 1})

	res, err := newTestPlanner(t).PlanDetailed(t.Context(), req)
	require.NoError(t, err)
	requireValid(t, req, res.Plan)
	used := map[string]bool{}
	cliques := map[string]bool{}
	for _, n := range res.Plan.NodeOf {
		used[nodes[n].Name] = true
		cliques[nodes[n].Labels[cliqueKey]] = true
	}
	require.Len(t, used, 2, "two nodes hold the slices: %v", used)
	require.Len(t, cliques, 1, "in one NVLink domain: %v", res.Plan.Summary)
	require.False(t, used["c0-n0"], "the node with 2 free 1g slices is no help")
}
