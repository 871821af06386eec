package rails

import (
	"context"
	"fmt"
	"testing"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/placement/placementtest"
	"github.com/gpu-gang/gpu-gang/pkg/topology"
)

// BenchmarkAlignedPlan plans a gang of 8 members of 4 GPUs on 5,000 nodes
// of 8 rails, every other node with rails 0-3 taken, aligned (the rail
// sets tried, the request narrowed, the topology planner run) and
// unaligned (the topology planner alone, on the same request): the cost of
// alignment in the planner. x-unaligned is the ratio.
func BenchmarkAlignedPlan(b *testing.B) {
	planner, err := topology.NewPlanner(mustPreset(b))
	if err != nil {
		b.Fatal(err)
	}
	nodes := placementtest.MakeFabric().Spines(20).LeavesPerSpine(8).NodesPerLeaf(32).CliqueSize(8).Obj()[:5000]
	var half, whole capacity.RailCounts
	for r := range 8 {
		whole[r] = 1
		if r >= 4 {
			half[r] = 1
		}
	}
	g := &Gang{Size: 4, Class: make([]int32, len(nodes)), Aligned: make([]bool, 8),
		Classes: []Class{{Free: whole}, {Free: half, Used: true}}}
	for n := range nodes {
		if n%2 == 0 {
			g.Class[n] = 1
			nodes[n].Free = placement.Vector{64000, 4}
		}
	}
	req := &placement.Request{Gang: "default/g", Resources: placementtest.Resources, Nodes: nodes, StableFree: true}
	for i := range 8 {
		g.Aligned[i] = true
		req.Members = append(req.Members, placement.Member{Name: fmt.Sprintf("default/g-%d", i), Rank: i, Request: placement.Vector{1000, 4}, Accelerated: true})
	}
	ctx := context.Background()
	var unaligned float64
	b.Run("align=none", func(b *testing.B) {
		for b.Loop() {
			if _, err := planner.Plan(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
		unaligned = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("align=preferred", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := g.Plan(ctx, planner, req); err != nil {
				b.Fatal(err)
			}
		}
		if unaligned > 0 {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/unaligned, "x-unaligned")
		}
	})
}
