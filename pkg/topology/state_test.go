package topology

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"
)

// TestCountingAGroupsNodesMatchesAFullCount checks newUsageAt, which counts
// slots on a group's nodes alone, in arrays the groups share, against
// newUsage's count over every node, on random fabrics split into random
// groups: every shape's slots and the room must be equal in every domain of
// every level.
func TestCountingAGroupsNodesMatchesAFullCount(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 19))
	nonzero := 0
	for i := range 300 {
		req := randomRequest(rng)
		req.Groups = randomGroups(rng, req)
		tree := newTestPlanner(t).Tree(req)
		at := groupPositions(tree, req.Groups)
		// The groups' counts share one scratch, as planGroups has them.
		var sc slotScratch
		for k := range req.Groups.Names {
			sub := req.InGroup(k)
			full, err := newUsage(tree, sub)
			require.NoError(t, err)
			in, err := newUsageAt(tree, sub, at[k], &sc)
			require.NoError(t, err)
			name := fmt.Sprintf("case %d, group %d", i, k)
			require.Empty(t, cmp.Diff(full.slots, in.slots), "%s: slots (-every node,+the group's)", name)
			require.Empty(t, cmp.Diff(full.room, in.room), "%s: room (-every node,+the group's)", name)
			if len(full.room) > 0 && full.room[len(full.room)-1][0] > 0 {
				nonzero++
			}
			sc.reset()
		}
	}
	require.Greater(t, nonzero, 100, "too few groups had room for the gang to compare")
}

// TestFittingMatchesAScanOfEveryDomain checks fitting, which descends from
// the cluster through domains that fit, against fits asked of every domain
// of the level, on random fabrics, in a group of nodes and not.
func TestFittingMatchesAScanOfEveryDomain(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 23))
	found := 0
	var out, scratch []int32
	for i := range 300 {
		req := randomRequest(rng)
		tree := newTestPlanner(t).Tree(req)
		u, err := newUsage(tree, req)
		if rng.IntN(2) == 0 {
			req.Groups = randomGroups(rng, req)
			k := rng.IntN(len(req.Groups.Names))
			u, err = newUsageAt(tree, req.InGroup(k), groupPositions(tree, req.Groups)[k], nil)
		}
		require.NoError(t, err)
		for l := range tree.top() + 1 {
			var want []int32
			for k := range tree.dom[l] {
				if u.fits(l, int32(k)) {
					want = append(want, int32(k))
				}
			}
			out, scratch = u.fitting(l, out, scratch)
			require.Empty(t, cmp.Diff(want, out, cmpopts.EquateEmpty()), "case %d, level %d (-every domain,+descent)", i, l)
			if l < tree.top() && len(want) > 0 {
				found++
			}
		}
	}
	require.Greater(t, found, 100, "too few levels had a fitting domain below the cluster")
}
