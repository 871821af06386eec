package topology

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/placement/placementtest"
)

// The tests here check what a plan must not depend on, and what it gives
// neighbouring ranks: rank order, the order of nodes and labels, and
// concurrent calls.

func TestPlanRankOrder(t *testing.T) {
	// Two leaves of four nodes, cliques of two. Twelve 2-GPU pods need three
	// nodes: a whole clique and one node of the next, in one leaf.
	nodes := placementtest.MakeFabric().LeavesPerSpine(2).NodesPerLeaf(4).CliqueSize(2).Obj()
	req := makeRequest("ns/gang").nodeObjs(nodes).workers(12, 2).obj()
	plan, err := newTestPlanner(t).Plan(t.Context(), req)
	require.NoError(t, err)
	want := append(append(repeat("s0-l0-n0", 4), repeat("s0-l0-n1", 4)...), repeat("s0-l0-n2", 4)...)
	if diff := cmp.Diff(want, nodeNames(req, plan)); diff != "" {
		t.Errorf("nodes by rank (-want,+got):\n%s", diff)
	}
	require.Equal(t, "12 pods in leaf s0-l0: 1 leaf, 2 NVLink domains, 3 nodes", plan.Summary)
}

func TestPlanRankOrderTwoShapes(t *testing.T) {
	// Ranks alternate between two shapes; each shape's ranks still walk the
	// tree in order.
	nodes := placementtest.MakeFabric().NodesPerLeaf(4).CliqueSize(2).Obj()
	r := makeRequest("ns/gang").nodeObjs(nodes)
	for i := range 6 {
		r.members(makeMember(fmt.Sprintf("w-%d", i)).gpus(int64(2 + 4*(i%2))))
	}
	req := r.obj()
	res, err := newTestPlanner(t).PlanDetailed(t.Context(), req)
	require.NoError(t, err)
	requireValid(t, req, res.Plan)
	tr := newTestPlanner(t).Tree(req)
	for _, parity := range []int{0, 1} {
		last := int32(-1)
		for i := parity; i < len(req.Members); i += 2 {
			p := tr.pos[res.Plan.NodeOf[i]]
			require.GreaterOrEqual(t, p, last, "member %d of shape %d goes back in the tree", i, parity)
			last = p
		}
	}
	// Three 2-GPU and three 6-GPU pods pair up on three nodes.
	require.Equal(t, "6 pods in leaf s0-l0: 1 leaf, 2 NVLink domains, 3 nodes", res.Plan.Summary)
}

func TestPlanDeterministic(t *testing.T) {
	base := placementtest.MakeFabric().Spines(2).LeavesPerSpine(3).NodesPerLeaf(6).CliqueSize(3).Obj()
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range base {
		base[i].Free[1] = int64(rng.IntN(9))
	}
	var want []string
	for i := range 30 {
		nodes := reshuffled(rng, base)
		req := makeRequest("ns/gang").nodeObjs(nodes).workers(9, 2).members(makeMember("launcher").gpus(0)).obj()
		plan, err := newTestPlanner(t).Plan(t.Context(), req)
		require.NoError(t, err)
		got := nodeNames(req, plan)
		if i == 0 {
			want = got
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("run %d differs (-first,+this):\n%s", i, diff)
		}
	}
}

func TestPlanConcurrent(t *testing.T) {
	p := newTestPlanner(t)
	nodes := placementtest.MakeFabric().Spines(2).LeavesPerSpine(4).NodesPerLeaf(8).CliqueSize(4).Obj()
	reqs := make([]*placement.Request, 8)
	for i := range reqs {
		reqs[i] = makeRequest(fmt.Sprintf("ns/g%d", i)).nodeObjs(nodes).workers(1+5*i, 8).generation(uint64(1 + i%2)).obj()
	}
	want := make([]*placement.Plan, len(reqs))
	for i, req := range reqs {
		var err error
		want[i], err = newTestPlanner(t).Plan(t.Context(), req)
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	got := make([]*placement.Plan, len(reqs)*4)
	errs := make([]error, len(got))
	for i := range got {
		wg.Go(func() { got[i], errs[i] = p.Plan(t.Context(), reqs[i%len(reqs)]) })
	}
	wg.Wait()
	for i := range got {
		require.NoError(t, errs[i])
		if diff := cmp.Diff(want[i%len(reqs)], got[i]); diff != "" {
			t.Errorf("plan %d (-want,+got):\n%s", i, diff)
		}
	}
}
