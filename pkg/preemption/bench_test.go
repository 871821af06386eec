package preemption

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/placement/placementtest"
)

// fullCluster is spines x leaves x 32 nodes of 8 GPUs in cliques of 8,
// every node busy: low-priority (0-3) gangs of 4 and 8 nodes, one 8-GPU pod
// per node, laid out leaf by leaf in order, so an 8-node gang after a 4-node
// one straddles two cliques. Start times are spread over the last day.
func fullCluster(rng *rand.Rand, spines, leaves int) *cluster {
	c := newCluster(placementtest.MakeFabric().Spines(spines).LeavesPerSpine(leaves).NodesPerLeaf(32).CliqueSize(8).Obj())
	next := 0
	for g := 0; next < len(c.nodes); g++ {
		size := 4 + 4*rng.IntN(2)
		size = min(size, len(c.nodes)-next)
		names := make([]string, size)
		for i := range names {
			names[i] = c.nodes[next+i].Name
		}
		next += size
		c.add(makeGang(fmt.Sprintf("ns/g%05d", g)).
			priority(int32(rng.IntN(4))).
			startedAgo(time.Duration(1+rng.IntN(86400))*time.Second).
			on(8, names...))
	}
	return c
}

// BenchmarkPreemption decides at 5,120 nodes (16 spines x 10 leaves x 32
// nodes, cliques of 8), the cluster full of about 850 low-priority gangs.
func BenchmarkPreemption(b *testing.B) {
	c := fullCluster(rand.New(rand.NewPCG(11, 11)), 16, 10)
	for _, bc := range []struct {
		name    string
		members int
		level   string
		require bool
	}{
		{name: "preemptor=1", members: 1},
		{name: "preemptor=8", members: 8},
		{name: "preemptor=8/required-clique", members: 8, level: cliqueKey, require: true},
		{name: "preemptor=64", members: 64},
		{name: "preemptor=64/required-spine", members: 64, level: spineKey, require: true},
		{name: "preemptor=256", members: 256},
	} {
		b.Run(fmt.Sprintf("nodes=%d/%s", len(c.nodes), bc.name), func(b *testing.B) {
			w := makePreemptor("ns/urgent").workers(bc.members, 8)
			if bc.level != "" {
				w.policy(bc.level, bc.require)
			}
			req := w.on(c)
			e := newTestEngine(b)
			d, err := e.Decide(b.Context(), req) // builds and caches the tree
			require.NoError(b, err)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Decide(b.Context(), req); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(d.Cost.Gangs), "victim-gangs")
			b.ReportMetric(boolMetric(d.Exact), "exact")
			b.Logf("%s (cost %+v)", d.Summary, d.Cost)
		})
	}
}

func boolMetric(v bool) float64 {
	if v {
		return 1
	}
	return 0
}
