package preemption

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/placement/placementtest"
)

func TestTieLost(t *testing.T) {
	tests := []struct {
		name        string
		chosen, inc []int32
		q           int32
		want        bool
	}{
		{name: "both empty below q", chosen: nil, inc: []int32{5, 6}, q: 3, want: false},
		{name: "same so far", chosen: []int32{1, 2}, inc: []int32{1, 2, 7}, q: 4, want: false},
		{name: "incumbent has an earlier item", chosen: []int32{2}, inc: []int32{1, 2}, q: 3, want: true},
		{name: "chosen has an earlier item", chosen: []int32{0, 2}, inc: []int32{1, 2}, q: 3, want: false},
		{name: "incumbent has an item below q chosen skipped", chosen: []int32{1}, inc: []int32{1, 2}, q: 3, want: true},
		{name: "chosen has an item below q the incumbent lacks", chosen: []int32{1, 2}, inc: []int32{1, 5}, q: 3, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tieLost(tc.chosen, tc.inc, tc.q))
		})
	}
}

// TestSearchBeatsForeignIncumbentOnTie runs the branch and bound alone,
// without the greedy pass, against an incumbent found elsewhere that ties
// on cost but comes later in canonical order: the search must replace it,
// not prune the tie away.
func TestSearchBeatsForeignIncumbentOnTie(t *testing.T) {
	c := newCluster(placementtest.MakeFabric().NodesPerLeaf(4).CliqueSize(4).Obj()).add(
		makeGang("ns/a").on(8, "s0-l0-n0"),
		makeGang("ns/b").on(8, "s0-l0-n1"),
		makeGang("ns/y").on(8, "s0-l0-n2"),
		makeGang("ns/z").on(8, "s0-l0-n3"),
	)
	req := makePreemptor("ns/two").workers(2, 8).on(c)
	e := newTestEngine(t)
	tree := e.trees.Tree(&req.Request)
	p := newProblem(req, tree, e.planner, 1, 1, defaultBudget)
	ds := &domainSearch{p: p, ctx: t.Context()}
	ds.setup(1, 0, p.itemsAt(1).ids)
	ids := func(names ...string) []int32 {
		var out []int32
		for id := range p.items {
			for _, n := range names {
				if req.Units[p.items[id].unit].Name == n {
					out = append(out, int32(id))
				}
			}
		}
		return out
	}
	foreign := ids("ns/y", "ns/z")
	for _, id := range foreign {
		ds.include(id)
	}
	p.best = &incumbent{cost: ds.c, items: foreign}
	ds.undo()

	ds.dfs(0)
	require.NoError(t, ds.err)
	require.Equal(t, ids("ns/a", "ns/b"), p.best.items)
}
