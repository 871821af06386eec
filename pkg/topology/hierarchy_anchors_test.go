package topology

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/placement/placementtest"
)

// TestPlanHierarchyAnchorsPinRequiredSegment returns a member to its own
// required segment's domain though a tighter root domain, the one that runs
// most of the gang, would hold the returning member alone.
func TestPlanHierarchyAnchorsPinRequiredSegment(t *testing.T) {
	// Two spines of two leaves of two nodes, one clique per leaf. Ranks 0
	// and 1 run on s0-l0-n0, rank 2 on s0-l1-n0, and rank 3 returns. The
	// gang requires its spine, or prefers a tighter level, which s0-l0
	// (most anchors) would give it with rank 3 on s0-l0-n1.
	nodes := placementtest.MakeFabric().Spines(2).LeavesPerSpine(2).NodesPerLeaf(2).CliqueSize(2).Obj()
	at := func(name string) int { return nodeAt(nodes, name) }
	nodes[at("s0-l0-n0")].Free[1] = 0
	nodes[at("s0-l1-n0")].Free[1] = 4
	for _, level := range []string{spineKey, leafKey, cliqueKey, scheduling.HostnameKey} {
		t.Run(fmt.Sprintf("gang at %s, required %v", level, level == spineKey), func(t *testing.T) {
			req := makeRequest("ns/gang").nodeObjs(nodes).workers(1, 4).policy(spineKey, level == spineKey).hierarchy(makeSubgroup("").children(
				makeSubgroup("seg-0").policy(leafKey, true).anchors(0, 2),
				makeSubgroup("seg-1").policy(leafKey, true).anchors(2, 1).members(0, 1))).obj()
			if level != spineKey {
				req.Policy = placement.Policy{Level: level}
			}
			req.Anchors = []int{at("s0-l0-n0"), at("s0-l0-n0"), at("s0-l1-n0")}
			res, err := newTestPlanner(t).PlanDetailed(t.Context(), req)
			require.NoError(t, err)
			requireValid(t, req, res.Plan)
			require.Equal(t, "s0-l1", nodes[res.Plan.NodeOf[0]].Labels[leafKey], "segment 1 runs in leaf s0-l1: %v", nodeNames(req, res.Plan))
		})
	}
}
