package topology

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// TestCountingAGroupsNodesMatchesAFullCount checks newUsageAt, which counts
// slots on a group's nodes alone, against newUsage's count over every node,
// on random fabrics split into random groups: every shape's slots and the
// room must be equal in every domain of every level.
func TestCountingAGroupsNodesMatchesAFullCount(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 19))
	nonzero := 0
	for i := range 300 {
		req := randomRequest(rng)
		req.Groups = randomGroups(rng, req)
		tree := newTestPlanner(t).Tree(req)
		at := groupPositions(tree, req.Groups)
		for k := range req.Groups.Names {
			sub := req.InGroup(k)
			full, err := newUsage(tree, sub)
			require.NoError(t, err)
			in, err := newUsageAt(tree, sub, at[k])
			require.NoError(t, err)
			name := fmt.Sprintf("case %d, group %d", i, k)
			require.Empty(t, cmp.Diff(full.slots, in.slots), "%s: slots (-every node,+the group's)", name)
			require.Empty(t, cmp.Diff(full.room, in.room), "%s: room (-every node,+the group's)", name)
			if len(full.room) > 0 && full.room[len(full.room)-1][0] > 0 {
				nonzero++
			}
		}
	}
	require.Greater(t, nonzero, 100, "too few groups had room for the gang to compare")
}
