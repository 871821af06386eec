package topology

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/placement/placementtest"
)

// bigCluster is 8 spines x 20 leaves x 32 nodes (5,120 nodes, 8 GPUs each).
// With fragmented set, each node has a random 0-8 GPUs free.
func bigCluster(cliqueSize int, fragmented bool) []placement.Node {
	nodes := placementtest.MakeFabric().Spines(8).LeavesPerSpine(20).NodesPerLeaf(32).CliqueSize(cliqueSize).Obj()
	if fragmented {
		rng := rand.New(rand.NewPCG(5, 5))
		for i := range nodes {
			nodes[i].Free[1] = int64(rng.IntN(9))
		}
	}
	return nodes
}

func TestPlanBigClusterMeetsLowerBound(t *testing.T) {
	nodes := bigCluster(8, false)
	p := newTestPlanner(t)
	for _, gang := range []int{4, 64, 1000} {
		t.Run(fmt.Sprintf("gang=%d", gang), func(t *testing.T) {
			req := makeRequest("ns/gang").nodeObjs(nodes).workers(gang, 8).obj()
			res, err := p.PlanDetailed(t.Context(), req)
			require.NoError(t, err)
			requireValid(t, req, res.Plan)
			require.True(t, res.Exact)
			lb, err := p.LowerBound(req)
			require.NoError(t, err)
			if diff := cmp.Diff(lb, res.Spans); diff != "" {
				t.Errorf("spans on an empty cluster should meet the lower bound (-bound,+plan):\n%s", diff)
			}
		})
	}
}

func BenchmarkBuildTree(b *testing.B) {
	nodes := bigCluster(8, false)
	levels := nvidiaLevels()
	b.ReportAllocs()
	for b.Loop() {
		buildTree(levels, nodes, 1)
	}
}

func BenchmarkPlan(b *testing.B) {
	for _, bc := range []struct {
		cluster    string
		cliqueSize int
		fragmented bool
		gpus       int64
	}{
		{cluster: "empty", cliqueSize: 8, gpus: 8},
		{cluster: "empty-clique4", cliqueSize: 4, gpus: 8},
		{cluster: "empty", cliqueSize: 8, gpus: 1},
		{cluster: "fragmented", cliqueSize: 8, fragmented: true, gpus: 2},
	} {
		nodes := bigCluster(bc.cliqueSize, bc.fragmented)
		for _, gang := range []int{4, 64, 1000} {
			b.Run(fmt.Sprintf("%s/gpus=%d/gang=%d", bc.cluster, bc.gpus, gang), func(b *testing.B) {
				req := makeRequest("ns/gang").nodeObjs(nodes).workers(gang, bc.gpus).obj()
				p, err := NewPlanner(nvidiaLevels())
				require.NoError(b, err)
				res, err := p.PlanDetailed(b.Context(), req) // builds and caches the tree
				require.NoError(b, err)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := p.Plan(b.Context(), req); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(boolMetric(res.Exact), "exact")
			})
		}
	}
}

func boolMetric(v bool) float64 {
	if v {
		return 1
	}
	return 0
}
