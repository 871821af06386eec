package topology

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// BenchmarkPlanHierarchy plans hierarchical gangs on bigCluster (5,120 nodes
// in 8 spines of 20 leaves of 32 nodes, cliques of 8 nodes, 8 GPUs each),
// beside the flat plan of the same members under the gang's own policy.
// A fragmented cluster has 0-8 GPUs free per node at random, so that only
// some cliques hold a segment.
func BenchmarkPlanHierarchy(b *testing.B) {
	// composite is 4 PodGroups, each in a required leaf, of 2 segments of
	// size pods each in a required clique, under a composite preferring a
	// spine.
	composite := func(size int) *subgroupWrapper {
		root := makeSubgroup("ns/job")
		for pg := range 4 {
			g := makeSubgroup(fmt.Sprintf("ns/pg-%d", pg)).policy(leafKey, true)
			for s := range 2 {
				g.children(makeSubgroup(fmt.Sprintf("ns/pg-%d-%d", pg, s)).policy(cliqueKey, true).members((2*pg+s)*size, size))
			}
			root.children(g)
		}
		return root
	}
	for _, bc := range []struct {
		name       string
		fragmented bool
		pods       int
		gpus       int64
		policy     string // the gang's required level; a preferred spine when empty
		hierarchy  *subgroupWrapper
	}{
		{name: "empty/flat/pods=64", pods: 64, gpus: 4},
		{name: "empty/segments=4x16/pods=64", pods: 64, gpus: 4, hierarchy: segments(0, 4, 16, cliqueKey, true)},
		{name: "empty/composite=4x2x8/pods=64", pods: 64, gpus: 4, hierarchy: composite(8)},
		{name: "empty/flat/pods=512", pods: 512, gpus: 4},
		{name: "empty/segments=32x16/pods=512", pods: 512, gpus: 4, hierarchy: segments(0, 32, 16, cliqueKey, true)},
		{name: "fragmented/flat/pods=64", fragmented: true, pods: 64, gpus: 2},
		{name: "fragmented/segments=4x16/pods=64", fragmented: true, pods: 64, gpus: 2, hierarchy: segments(0, 4, 16, cliqueKey, true)},
		{name: "fragmented/composite=4x2x8/pods=64", fragmented: true, pods: 64, gpus: 2, hierarchy: composite(8)},
		// No clique has room for 40 pods of 2 GPUs: a FitError.
		{name: "fragmented/no-room/segments=2x40/pods=80", fragmented: true, pods: 80, gpus: 2, hierarchy: segments(0, 2, 40, cliqueKey, true)},
		// The worst case: five segments of different sizes (17 to 21 pods
		// of 2 GPUs, too many for two to share a clique) under a required
		// leaf of four cliques. Every leaf holds the gang by its slots, so
		// the search tries them until the budget runs out: a FitError.
		{name: "empty/budget/segments=17..21/pods=95", pods: 95, gpus: 2, policy: leafKey, hierarchy: mixedSegments(17, 18, 19, 20, 21)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			nodes := bigCluster(8, bc.fragmented)
			r := makeRequest("ns/gang").nodeObjs(nodes).workers(bc.pods, bc.gpus).policy(spineKey, false)
			if bc.policy != "" {
				r.policy(bc.policy, true)
			}
			if bc.hierarchy != nil {
				r.hierarchy(bc.hierarchy)
			}
			req := r.obj()
			p, err := NewPlanner(nvidiaLevels())
			require.NoError(b, err)
			res, err := p.PlanDetailed(b.Context(), req) // builds and caches the tree
			var fe *placement.FitError
			fits := err == nil
			if !fits {
				require.ErrorAs(b, err, &fe)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Plan(b.Context(), req); (err == nil) != fits {
					b.Fatal(err)
				}
			}
			if fits {
				b.ReportMetric(boolMetric(res.Exact), "exact")
				b.ReportMetric(float64(res.Spans[1].Domains), "leaves")
			}
		})
	}
}

// mixedSegments cuts members into segments of the given sizes, each in a
// required clique.
func mixedSegments(sizes ...int) *subgroupWrapper {
	root, first := makeSubgroup(""), 0
	for s, n := range sizes {
		root.children(makeSubgroup(fmt.Sprint("seg-", s)).policy(cliqueKey, true).members(first, n))
		first += n
	}
	return root
}
