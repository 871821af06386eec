package topology

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// TestKeptGroupLayoutMatchesAFreshOne plans gangs in groups of nodes with one
// planner, plan after plan on the same nodes, while the groups change
// between plans (new groups of the same size, the same groups again, fewer
// or more of them), and checks each plan, and the layout it used, against a
// planner that has kept nothing.
func TestKeptGroupLayoutMatchesAFreshOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 29))
	for c := range 40 {
		req := randomRequest(rng)
		kept := newTestPlanner(t)
		req.Groups = randomGroups(rng, req)
		for round := range 12 {
			switch rng.IntN(3) {
			case 0: // new groups, as a fleet's labels changed
				req.Groups = randomGroups(rng, req)
			case 1: // the same Of under another Groups, as GPUFleet hands out
				g := *req.Groups
				req.Groups = &g
			}
			want, wantErr := newTestPlanner(t).PlanDetailed(t.Context(), req)
			got, gotErr := kept.PlanDetailed(t.Context(), req)
			require.Equal(t, wantErr, gotErr, "case %d round %d", c, round)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("case %d round %d (-fresh,+kept):\n%s\nrequest: %s", c, round, diff, describeGroups(req))
			}
			tree := kept.Tree(req)
			lay := kept.layouts.of(tree, req.Groups)
			fresh := groupPositions(tree, req.Groups)
			require.Equal(t, fresh, lay.at, "case %d round %d: positions", c, round)
			for k, at := range fresh {
				require.Equal(t, tree.domainsAbove(at), lay.above[k], "case %d round %d: domains above group %d", c, round, k)
			}
		}
	}
}

// TestGroupLayoutKeyedByOf checks that a layout is kept only for the very
// same Of: groups of the same size with other contents get their own.
func TestGroupLayoutKeyedByOf(t *testing.T) {
	req := randomRequest(rand.New(rand.NewPCG(1, 2)))
	p := newTestPlanner(t)
	tree := p.Tree(req)
	a := &placement.Groups{Of: make([]int, len(req.Nodes)), Names: []string{"a", "b"}}
	b := &placement.Groups{Of: make([]int, len(req.Nodes)), Names: []string{"a", "b"}}
	for i := range a.Of {
		a.Of[i], b.Of[i] = i%2, (i+1)%2
	}
	la := p.layouts.of(tree, a)
	require.Same(t, la, p.layouts.of(tree, &placement.Groups{Of: a.Of, Names: a.Names}), "the same Of keeps its layout")
	lb := p.layouts.of(tree, b)
	require.NotSame(t, la, lb)
	require.Equal(t, groupPositions(tree, b), lb.at, fmt.Sprintf("groups %v", b.Of))
}
