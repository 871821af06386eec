package topology

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// TestHierarchyMatchesExhaustiveSearch checks the planner on hierarchical
// gangs against every assignment of members to nodes, on small random
// fabrics (at most 8 nodes in 1-2 spines, 1-2 leaves per spine and 1-2
// cliques per leaf; free GPUs and CPU drawn per node) and random hierarchies
// of 2 or 3 levels (a root with 2-3 children, some of which have 2 children
// of their own; 2-6 members bound by topology cut into the leaves in rank
// order; one or two request shapes, the second sometimes with an
// eligibility mask, the first sometimes capped per node; every subgroup and
// the gang with no level, or a random level from node to spine, required or
// preferred). In half the cases, about two leaves in three run members
// already (anchors: one to three on one random node per leaf), as when
// members return after a repair, kept only when every required subgroup
// with members has its anchors in one domain of its level (anchorsAgree).
// The oracle shares no code with the planner: it tells domains apart by
// label tuples and walks the hierarchy itself.
//
// Validity: a plan puts every member on an eligible node with room, keeps
// per-node caps, and keeps every subgroup with a required level inside one
// domain of that level, together with the subgroup's anchors.
//
// Completeness: whenever some valid assignment exists, the planner returns a
// plan, within its default budget and with Exact set (no search cut short);
// when none exists it returns a FitError.
//
// Tightness: write common(g) for the tightest level (node, clique, leaf,
// spine, cluster) one of whose domains holds subgroup g's bound members, and
// order subgroups breadth first, siblings as given (the planner's order of
// preference). Let key1 list, in that order, max(level of g's policy,
// common(g)) for each subgroup whose policy names a level (0 for the
// others), and key2 list common(g) for every subgroup. Among all valid
// assignments, the plan's (key1, key2) is the lexicographic least: each
// subgroup reaches its own preferred level if any valid assignment lets it
// together with the subgroups before it; then each subgroup, the gang
// first, sits in the tightest domain that still allows that. In particular,
// when every subgroup can sit at its own tightest level at once, each does.
// Best fit: where the gang sits no looser than its own policy's level, its
// domain there has the least room (the planner's measure: slots of each
// shape, summed) of all the domains of that level that allow a least
// assignment. What a plan spends below those levels (how many leaves a
// spine-level gang uses, say) is the packer's and the search's best effort
// and is not checked here; the per-subgroup spans the plan reports are.
// Tightness and best fit are checked in cases without anchors only: with
// anchors the planner keeps new members near the running ones (see search),
// which these keys, blind to anchors, do not rank.
func TestHierarchyMatchesExhaustiveSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(2026, 6012))
	var stats struct{ cases, feasible, deep, twoShapes, required, relaxedOptimum, capped, anchored, pinned int }
	for i := range 1000 {
		req := randomHierarchy(rng)
		o := newHierOracle(req)
		stats.cases++
		if o.depth > 2 {
			stats.deep++
		}
		if o.shapes > 1 {
			stats.twoShapes++
		}
		if o.required {
			stats.required++
		}
		if req.Members[0].MaxPerNode > 0 {
			stats.capped++
		}
		if len(req.Anchors) > 0 {
			stats.anchored++
		}
		if o.pins() > 0 {
			stats.pinned++
		}
		t.Run(fmt.Sprintf("case-%d", i), func(t *testing.T) {
			best := o.search()
			free := make([]placement.Vector, len(req.Nodes))
			for n := range free {
				free[n] = req.Nodes[n].Free.Clone()
			}
			res, err := newTestPlanner(t).PlanDetailed(t.Context(), req)
			for n := range free {
				require.Equal(t, free[n], req.Nodes[n].Free, "the planner wrote the request's free capacity")
			}
			if best == nil {
				var fe *placement.FitError
				require.ErrorAs(t, err, &fe, "no valid assignment exists, so the planner must fail\n%s", o.describe())
				return
			}
			stats.feasible++
			require.NoError(t, err, "a valid assignment exists, e.g. %v\n%s", best.nodeOf, o.describe())
			requireValid(t, req, res.Plan)
			require.True(t, o.valid(res.Plan.NodeOf), "a required level is broken: %v\n%s", res.Plan.NodeOf, o.describe())
			require.True(t, res.Exact, "the search was cut short\n%s", o.describe())
			o.checkReported(t, res)
			if len(req.Anchors) > 0 {
				return // tightness and best fit yield to running members: see the doc comment
			}
			got := o.keys(res.Plan.NodeOf)
			if slices.Compare(best.keys, got) != 0 {
				t.Fatalf("keys (key1 then key2, by subgroup in order of preference):\n optimum %v (nodes %v)\n planner %v (nodes %v)\n%s",
					best.keys, best.nodeOf, got, res.Plan.NodeOf, o.describe())
			}
			if slices.ContainsFunc(res.Subgroups, func(r SubgroupResult) bool { return r.Relaxed }) {
				stats.relaxedOptimum++
			}

			// Best fit: where the gang sits no looser than its own level,
			// no domain there that allows a least assignment has less room.
			root := o.groups[0].members
			if l := o.common(root, res.Plan.NodeOf); len(root) > 0 && l >= o.groups[0].level {
				chosen := domainOf(req, res.Plan.NodeOf[root[0]], l)
				require.Contains(t, best.roots[l], chosen)
				for d := range best.roots[l] {
					require.LessOrEqual(t, roomOf(req, l, chosen), roomOf(req, l, d),
						"domain %v has less room than the chosen %v and allows a least assignment\n%s", d, chosen, o.describe())
				}
			}
		})
	}
	t.Logf("%d cases: %d with a valid assignment, %d three levels deep, %d with two request shapes, "+
		"%d with a required level below the gang, %d with a per-node cap, %d plans relaxing a preferred level, "+
		"%d with anchors, %d with a required subgroup beside its anchors",
		stats.cases, stats.feasible, stats.deep, stats.twoShapes, stats.required, stats.capped, stats.relaxedOptimum,
		stats.anchored, stats.pinned)
}

// randomHierarchy draws a request as the test's doc comment describes.
func randomHierarchy(rng *rand.Rand) *placement.Request {
	var nodes []*nodeWrapper
	for len(nodes) == 0 || len(nodes) > 8 {
		nodes = nodes[:0]
		for s := range 1 + rng.IntN(2) {
			for l := range 1 + rng.IntN(2) {
				for c := range 1 + rng.IntN(2) {
					for range 1 + rng.IntN(2) {
						w := makeNode(fmt.Sprintf("n%d", len(nodes))).
							spine(fmt.Sprintf("s%d", s)).leaf(fmt.Sprintf("l%d", l)).clique(fmt.Sprintf("c%d", c))
						w.freeGPUs([]int64{0, 2, 4, 6, 8, 8, 8}[rng.IntN(7)])
						w.freeMilliCPU([]int64{8000, 16000, 64000}[rng.IntN(3)])
						nodes = append(nodes, w)
					}
				}
			}
		}
	}
	rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	r := makeRequest("ns/gang").nodes(nodes...)

	// The tree: leaves in pre-order get the members in rank order.
	root := &placement.Subgroup{}
	var leaves []*placement.Subgroup
	for c := range 2 + rng.IntN(2) {
		child := placement.Subgroup{Name: fmt.Sprint("g", c)}
		if rng.IntN(3) == 0 {
			child.Children = []placement.Subgroup{{Name: fmt.Sprintf("g%d.0", c)}, {Name: fmt.Sprintf("g%d.1", c)}}
		}
		root.Children = append(root.Children, child)
	}
	for c := range root.Children {
		if len(root.Children[c].Children) == 0 {
			leaves = append(leaves, &root.Children[c])
		}
		for d := range root.Children[c].Children {
			leaves = append(leaves, &root.Children[c].Children[d])
		}
	}
	total := max(len(leaves), 2+rng.IntN(5))
	for total > 6 { // keep the enumeration small: drop a grandchild level
		for c := range root.Children {
			root.Children[c].Children = nil
		}
		leaves = leaves[:0]
		for c := range root.Children {
			leaves = append(leaves, &root.Children[c])
		}
		total = max(len(leaves), 2+rng.IntN(5))
	}
	size := make([]int, len(leaves))
	for i := range size {
		size[i] = 1
	}
	for range total - len(leaves) {
		size[rng.IntN(len(size))]++
	}

	shapes := 1 + rng.IntN(2)
	gpus, cpus := []int64{1, 2, 4, 8}, []int64{1000, 6000}
	var req [2][2]int64
	for s := range shapes {
		req[s] = [2]int64{cpus[rng.IntN(2)], gpus[rng.IntN(4)]}
	}
	if shapes == 2 && req[0] == req[1] {
		req[1][1] = 3
	}
	var elig []bool
	if shapes == 2 && rng.IntN(3) == 0 {
		elig = make([]bool, len(nodes))
		for i := range elig {
			elig[i] = rng.IntN(4) > 0
		}
	}
	perNode := 0
	if rng.IntN(4) == 0 {
		perNode = 1 + rng.IntN(2)
	}
	for li, leaf := range leaves {
		s := rng.IntN(shapes)
		for range size[li] {
			m := makeMember(fmt.Sprintf("w-%d", len(r.r.Members))).gpus(req[s][1]).milliCPU(req[s][0])
			if s == 1 {
				m.eligible(elig)
			} else {
				m.m.MaxPerNode = perNode
			}
			leaf.Members = append(leaf.Members, len(r.r.Members))
			r.members(m)
		}
	}
	// Half the cases prefer levels only, so that preferred levels compete.
	preferOnly := rng.IntN(2) == 0
	policy := func() placement.Policy {
		if rng.IntN(3) == 0 {
			return placement.Policy{}
		}
		return placement.Policy{
			Level:    []string{scheduling.HostnameKey, cliqueKey, leafKey, spineKey}[rng.IntN(4)],
			Required: !preferOnly && rng.IntN(2) == 0,
		}
	}
	var set func(g *placement.Subgroup)
	set = func(g *placement.Subgroup) {
		g.Policy = policy()
		for c := range g.Children {
			set(&g.Children[c])
		}
	}
	for c := range root.Children {
		set(&root.Children[c])
	}
	out := r.obj()
	out.Policy = policy()
	out.Hierarchy = root
	if rng.IntN(2) == 0 {
		anchorLeaves(rng, out, leaves)
	}
	return out
}

// anchorLeaves gives about half the leaves running members, as a gang with
// members returning after a repair has: one or two anchors on one random
// node each. It keeps them only when the oracle's anchorsAgree holds.
func anchorLeaves(rng *rand.Rand, req *placement.Request, leaves []*placement.Subgroup) {
	for _, leaf := range leaves {
		if rng.IntN(3) == 0 {
			continue
		}
		n := rng.IntN(len(req.Nodes))
		for range 1 + rng.IntN(3) {
			leaf.Anchors = append(leaf.Anchors, len(req.Anchors))
			req.Anchors = append(req.Anchors, n)
		}
	}
	if !newHierOracle(req).anchorsAgree() {
		for _, leaf := range leaves {
			leaf.Anchors = nil
		}
		req.Anchors = nil
	}
}
