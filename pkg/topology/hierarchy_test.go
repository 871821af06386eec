package topology

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/placement/placementtest"
)

func TestPlanHierarchy(t *testing.T) {
	// One spine of three leaves of eight nodes, cliques of four nodes;
	// s0-l0-c0 has room for half a segment.
	segmentFabric := func() []placement.Node {
		nodes := placementtest.MakeFabric().LeavesPerSpine(3).NodesPerLeaf(8).CliqueSize(4).Obj()
		for i := range 4 {
			nodes[i].Free[1] = 4
		}
		return nodes
	}
	tests := []struct {
		name          string
		nodes         []placement.Node
		request       func(r *requestWrapper)
		wantSummary   string
		wantSubgroups []string // "name level domain" per subgroup
		wantErr       string
	}{
		{
			// Each segment fills one clique. Best fit alone would start in
			// the fuller leaf s0-l0, whose one clique with room holds one
			// segment, and spread the gang over three leaves; identical
			// segments gather in the fewest leaves instead.
			name:  "segments in cliques, the whole in a spine",
			nodes: segmentFabric(),
			request: func(r *requestWrapper) {
				r.workers(32, 4).policy(spineKey, false).hierarchy(segments(0, 4, 8, cliqueKey, true))
			},
			wantSummary: "32 pods in spine s0: 1 spine, 2 leaves, 4 NVLink domains, 16 nodes; " +
				"4 subgroups in NVLink domains s0-l1-c0, s0-l1-c1, s0-l2-c0, s0-l2-c1",
			wantSubgroups: []string{
				"hierarchy spine s0", "seg-0 NVLink domain s0-l1-c0", "seg-1 NVLink domain s0-l1-c1",
				"seg-2 NVLink domain s0-l2-c0", "seg-3 NVLink domain s0-l2-c1",
			},
		},
		{
			// Two segments fit one leaf: both go to the tightest leaf that
			// holds them, and each to its own clique.
			name:  "two segments share the tightest leaf that holds both",
			nodes: segmentFabric(),
			request: func(r *requestWrapper) {
				r.workers(16, 4).hierarchy(segments(0, 2, 8, cliqueKey, true))
			},
			wantSummary: "16 pods in leaf s0-l1: 1 leaf, 2 NVLink domains, 8 nodes; 2 subgroups in NVLink domains s0-l1-c0, s0-l1-c1",
			wantSubgroups: []string{
				"hierarchy leaf s0-l1", "seg-0 NVLink domain s0-l1-c0", "seg-1 NVLink domain s0-l1-c1",
			},
		},
		{
			name:  "a composite of PodGroups with segments",
			nodes: placementtest.MakeFabric().Spines(2).LeavesPerSpine(2).NodesPerLeaf(4).CliqueSize(2).Obj(),
			request: func(r *requestWrapper) {
				r.workers(7, 8).policy(spineKey, false).hierarchy(makeSubgroup("ns/job").children(
					makeSubgroup("ns/pg-a").policy(leafKey, true).children(
						makeSubgroup("ns/pg-a-0").policy(cliqueKey, true).members(0, 2),
						makeSubgroup("ns/pg-a-1").policy(cliqueKey, true).members(2, 2)),
					makeSubgroup("ns/pg-b").policy(leafKey, true).members(4, 3)))
			},
			wantSummary: "7 pods in spine s0: 1 spine, 2 leaves, 4 NVLink domains, 7 nodes; subgroups: " +
				"ns/pg-a in leaf s0-l0 (2 subgroups in NVLink domains s0-l0-c0, s0-l0-c1), ns/pg-b in leaf s0-l1",
			wantSubgroups: []string{
				"ns/job spine s0", "ns/pg-a leaf s0-l0", "ns/pg-a-0 NVLink domain s0-l0-c0",
				"ns/pg-a-1 NVLink domain s0-l0-c1", "ns/pg-b leaf s0-l1",
			},
		},
		{
			// The gang prefers one leaf; its segments require cliques, and
			// only cliques in different leaves are free.
			name: "a preferred level that no domain holds relaxes",
			nodes: func() []placement.Node {
				nodes := placementtest.MakeFabric().LeavesPerSpine(2).NodesPerLeaf(4).CliqueSize(2).Obj()
				nodes[0].Free[1], nodes[6].Free[1] = 0, 0 // s0-l0-c0 and s0-l1-c1 broken
				return nodes
			}(),
			request: func(r *requestWrapper) {
				r.workers(4, 8).policy(leafKey, false).hierarchy(segments(0, 2, 2, cliqueKey, true))
			},
			wantSummary: "4 pods in spine s0 (no leaf holds them): 1 spine, 2 leaves, 2 NVLink domains, 4 nodes; " +
				"2 subgroups in NVLink domains s0-l0-c1, s0-l1-c0",
			wantSubgroups: []string{
				"hierarchy spine s0 relaxed", "seg-0 NVLink domain s0-l0-c1", "seg-1 NVLink domain s0-l1-c0",
			},
		},
		{
			name:  "a required level that no domain holds",
			nodes: segmentFabric(),
			request: func(r *requestWrapper) {
				r.workers(20, 4).hierarchy(segments(0, 2, 10, cliqueKey, true))
			},
			wantErr: `0 of 20 members fit: subgroup "seg-0" must run inside one NVLink domain (required): ` +
				`no NVLink domain has room for its 10 pods asking cpu=1 nvidia.com/gpu=4; the roomiest, s0-l0-c1, has room for 8`,
		},
		{
			name:  "identical segments beyond what the domains hold",
			nodes: segmentFabric(),
			request: func(r *requestWrapper) {
				r.workers(36, 4).policy(leafKey, false).hierarchy(segments(0, 6, 6, cliqueKey, true))
			},
			wantErr: `0 of 36 members fit: subgroup "seg-0" must run inside one NVLink domain (required), and 5 more ` +
				`subgroups like it: the NVLink domains have room for 5 of the 6, 6 pods asking cpu=1 nvidia.com/gpu=4 each`,
		},
		{
			name: "a launcher joins the gang's nodes",
			nodes: func() []placement.Node {
				return placementtest.MakeFabric().LeavesPerSpine(2).NodesPerLeaf(4).CliqueSize(2).Obj()
			}(),
			request: func(r *requestWrapper) {
				r.workers(4, 8).members(makeMember("launcher").gpus(0).milliCPU(2000)).
					hierarchy(makeSubgroup("").children(
						makeSubgroup("seg-0").policy(cliqueKey, true).members(0, 2),
						makeSubgroup("seg-1").policy(cliqueKey, true).members(2, 3)))
			},
			wantSummary: "4 pods in leaf s0-l0: 1 leaf, 2 NVLink domains, 4 nodes; 1 pod without accelerators on node s0-l0-n0; " +
				"2 subgroups in NVLink domains s0-l0-c0, s0-l0-c1",
			wantSubgroups: []string{
				"hierarchy leaf s0-l0", "seg-0 NVLink domain s0-l0-c0", "seg-1 NVLink domain s0-l0-c1",
			},
		},
		{
			// A composite's launcher PodGroup binds nothing: it has no
			// level or domain, and goes with the gang's nodes.
			name: "a child of loose members only",
			nodes: func() []placement.Node {
				return placementtest.MakeFabric().LeavesPerSpine(2).NodesPerLeaf(4).CliqueSize(2).Obj()
			}(),
			request: func(r *requestWrapper) {
				r.workers(2, 8).members(makeMember("launcher").gpus(0).milliCPU(2000)).
					hierarchy(makeSubgroup("ns/job").children(
						makeSubgroup("ns/workers").policy(cliqueKey, true).members(0, 2),
						makeSubgroup("ns/launcher").members(2, 1)))
			},
			wantSummary: "2 pods in NVLink domain s0-l0-c0: 1 NVLink domain, 2 nodes; 1 pod without accelerators on node s0-l0-n0; " +
				"subgroups: ns/workers in NVLink domain s0-l0-c0",
			wantSubgroups: []string{"ns/job NVLink domain s0-l0-c0", "ns/workers NVLink domain s0-l0-c0", "ns/launcher"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := makeRequest("ns/gang").nodeObjs(tc.nodes)
			tc.request(r)
			req := r.obj()
			res, err := newTestPlanner(t).PlanDetailed(t.Context(), req)
			if tc.wantErr != "" {
				var fe *placement.FitError
				require.ErrorAs(t, err, &fe)
				require.Equal(t, tc.wantErr, fe.Error())
				return
			}
			require.NoError(t, err)
			requireValid(t, req, res.Plan)
			require.Equal(t, tc.wantSummary, res.Plan.Summary)
			var got []string
			for _, sg := range res.Plan.Subgroups {
				s := sg.Name // no domain: no member bound by topology
				if sg.Domain != "" {
					s = fmt.Sprintf("%s %s %s", sg.Name, levelNames[sg.Level], sg.Domain)
				}
				if sg.Relaxed {
					s += " relaxed"
				}
				got = append(got, s)
			}
			if diff := cmp.Diff(tc.wantSubgroups, got); diff != "" {
				t.Errorf("subgroups (-want,+got):\n%s", diff)
			}
			requireSubgroupsInside(t, req, res)
			require.True(t, res.Exact)
		})
	}
}

var levelNames = map[string]string{cliqueKey: "NVLink domain", leafKey: "leaf", spineKey: "spine", "": "cluster"}

// requireSubgroupsInside checks each subgroup's reported spans against the
// plan with Tree.SubgroupSpans, and that each lies in one domain of its
// reported level.
func requireSubgroupsInside(t *testing.T, req *placement.Request, res *Result) {
	t.Helper()
	tr := newTestPlanner(t).Tree(req)
	spans := tr.SubgroupSpans(req, res.Plan.NodeOf)
	require.Len(t, res.Subgroups, len(spans))
	for g, r := range res.Subgroups {
		require.Equal(t, spans[g], r.Spans, "subgroup %s", r.Name)
		for _, sp := range r.Spans {
			if sp.Key == r.Level {
				require.Equal(t, 1, sp.Domains, "subgroup %s spans %d domains of its level", r.Name, sp.Domains)
			}
		}
	}
}

// TestPlanHierarchyBacktracks is the case KEP-6012 names for in-tree's
// CompositePodGroup: siblings placed one by one without backtracking fail
// when the first takes the only domain the second fits in. Segment a (three
// 8-GPU pods) fits both cliques and, by best fit, takes c1, the tighter;
// segment b's pods need 32 cores each, which only c1's nodes have.
func TestPlanHierarchyBacktracks(t *testing.T) {
	var nodes []*nodeWrapper
	for i := range 4 {
		nodes = append(nodes, makeNode(fmt.Sprint("c1-n", i)).spine("s0").leaf("l0").clique("c1"))
	}
	for i := range 5 {
		nodes = append(nodes, makeNode(fmt.Sprint("c2-n", i)).spine("s0").leaf("l0").clique("c2").freeMilliCPU(8000))
	}
	r := makeRequest("ns/gang").nodes(nodes...).workers(3, 8)
	for i := range 2 {
		r.members(makeMember(fmt.Sprint("b-", i)).milliCPU(32000))
	}
	req := r.hierarchy(makeSubgroup("").children(
		makeSubgroup("a").policy(cliqueKey, true).members(0, 3),
		makeSubgroup("b").policy(cliqueKey, true).members(3, 2))).obj()

	// Greedy, sibling by sibling: a alone goes to c1, and b then has
	// nowhere to go.
	p := newTestPlanner(t)
	alone := *req
	alone.Hierarchy, alone.Members = nil, req.Members[:3]
	alone.Policy = placement.Policy{Level: cliqueKey, Required: true}
	first, err := p.Plan(t.Context(), &alone)
	require.NoError(t, err)
	require.Equal(t, []string{"c1-n0", "c1-n1", "c1-n2"}, nodeNames(&alone, first))

	res, err := p.PlanDetailed(t.Context(), req)
	require.NoError(t, err, "backtracking puts a in c2 and b in c1")
	requireValid(t, req, res.Plan)
	require.Equal(t, []string{"c2-n0", "c2-n1", "c2-n2", "c1-n0", "c1-n1"}, nodeNames(req, res.Plan))
	require.Equal(t, "5 pods in leaf l0: 1 leaf, 2 NVLink domains, 5 nodes; 2 subgroups in NVLink domains c2, c1", res.Plan.Summary)
}

// TestPlanHierarchyBudget checks what a spent budget returns: a FitError
// saying so when no plan was found yet, the best plan found, not proven the
// tightest, when one was.
func TestPlanHierarchyBudget(t *testing.T) {
	nodes := placementtest.MakeFabric().LeavesPerSpine(3).NodesPerLeaf(8).CliqueSize(4).Obj()
	req := makeRequest("ns/gang").nodeObjs(nodes).workers(16, 4).hierarchy(segments(0, 2, 8, cliqueKey, true)).obj()
	full, err := newTestPlanner(t).PlanDetailed(t.Context(), req)
	require.NoError(t, err)
	require.True(t, full.Exact)

	p := newTestPlanner(t)
	p.searchBudget = 0
	_, err = p.Plan(t.Context(), req)
	var fe *placement.FitError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "the search budget of 0 domain trials ran out before every subgroup had a domain; "+
		"the furthest attempt gave domains to 0 of 3 subgroups", fe.Reason)

	var cut *Result
	for budget := int64(1); cut == nil; budget++ {
		require.Less(t, budget, int64(100), "no budget below 100 finds a plan")
		p.searchBudget = budget
		res, err := p.PlanDetailed(t.Context(), req)
		if err != nil {
			require.ErrorAs(t, err, &fe)
			require.Contains(t, fe.Reason, fmt.Sprintf("the search budget of %d domain trials ran out", budget))
			continue
		}
		cut = res
	}
	requireValid(t, req, cut.Plan)
	require.False(t, cut.Exact, "the first budget that finds a plan cannot have run every stage")
}

// TestPlanHierarchyAnchors places a replacement for a member of a running
// segmented gang: in its own segment's domain, though the other segment
// has more running members.
func TestPlanHierarchyAnchors(t *testing.T) {
	// One spine of two leaves of four nodes, cliques of two nodes. seg-0
	// runs four pods on s0-l0-n0 and n1; seg-1 runs three on s0-l1-n0 and
	// n1, and lost the one on s0-l1-n1.
	nodes := placementtest.MakeFabric().LeavesPerSpine(2).NodesPerLeaf(4).CliqueSize(2).Obj()
	at := func(name string) int { return nodeAt(nodes, name) }
	for _, n := range []string{"s0-l0-n0", "s0-l0-n1", "s0-l1-n0"} {
		nodes[at(n)].Free[1] = 0
	}
	nodes[at("s0-l1-n1")].Free[1] = 4
	anchors := []int{at("s0-l0-n0"), at("s0-l0-n0"), at("s0-l0-n1"), at("s0-l0-n1"), at("s0-l1-n0"), at("s0-l1-n0"), at("s0-l1-n1")}

	t.Run("a replacement returns to its segment", func(t *testing.T) {
		req := makeRequest("ns/gang").nodeObjs(nodes).workers(1, 4).policy(spineKey, false).hierarchy(makeSubgroup("").children(
			makeSubgroup("seg-0").policy(cliqueKey, true).anchors(0, 4),
			makeSubgroup("seg-1").policy(cliqueKey, true).anchors(4, 3).members(0, 1))).obj()
		req.Anchors = anchors
		plan, err := newTestPlanner(t).Plan(t.Context(), req)
		require.NoError(t, err)
		require.Equal(t, []string{"s0-l1-n1"}, nodeNames(req, plan))

		flat := *req
		flat.Hierarchy = nil
		plan, err = newTestPlanner(t).Plan(t.Context(), &flat)
		require.NoError(t, err)
		require.Equal(t, []string{"s0-l0-n2"}, nodeNames(&flat, plan), "without subgroups it joins the leaf of most anchors")
	})
	t.Run("a new segment joins the leaf of the running ones", func(t *testing.T) {
		// Only seg-0 runs, on s0-l1-c0; s0-l0-c0 is busy with other pods.
		// s0-l0-c1 and s0-l1-c1 are equally good fits, and s0-l0 comes
		// first in tree order, but the gang runs in s0-l1.
		nodes := placementtest.MakeFabric().LeavesPerSpine(2).NodesPerLeaf(4).CliqueSize(2).Obj()
		for _, n := range []string{"s0-l0-n0", "s0-l0-n1", "s0-l1-n0", "s0-l1-n1"} {
			for i := range nodes {
				if nodes[i].Name == n {
					nodes[i].Free[1] = 0
				}
			}
		}
		req := makeRequest("ns/gang").nodeObjs(nodes).workers(4, 4).policy(spineKey, true).hierarchy(makeSubgroup("").children(
			makeSubgroup("seg-0").policy(cliqueKey, true).anchors(0, 4),
			makeSubgroup("seg-1").policy(cliqueKey, true).members(0, 4))).obj()
		req.Anchors = []int{4, 4, 5, 5} // s0-l1-n0 and n1
		require.Equal(t, "s0-l1-n0", nodes[4].Name)
		res, err := newTestPlanner(t).PlanDetailed(t.Context(), req)
		require.NoError(t, err)
		requireValid(t, req, res.Plan)
		require.Equal(t, "s0-l1-c1", res.Subgroups[2].DomainName)
	})
	t.Run("a required clique with no room", func(t *testing.T) {
		req := makeRequest("ns/gang").nodeObjs(nodes).workers(2, 4).hierarchy(makeSubgroup("").children(
			makeSubgroup("seg-0").policy(cliqueKey, true).anchors(0, 4),
			makeSubgroup("seg-1").policy(cliqueKey, true).anchors(4, 3).members(0, 2))).obj()
		req.Anchors = anchors
		_, err := newTestPlanner(t).Plan(t.Context(), req)
		require.EqualError(t, err, `0 of 2 members fit: subgroup "seg-1" must run inside one NVLink domain (required): `+
			`s0-l1-c0, the NVLink domain that runs its other members, has room for 1 of its 2 pods asking cpu=1 nvidia.com/gpu=4`)
	})
}

// TestPlanHierarchyUniformGroups keeps a hierarchical gang inside one group
// of uniform nodes, as a flat gang.
func TestPlanHierarchyUniformGroups(t *testing.T) {
	// Leaf s0-l0 is one GPU product, s0-l1 another; only s0-l1 holds both
	// segments, though s0-l0 would hold the first.
	nodes := placementtest.MakeFabric().LeavesPerSpine(2).NodesPerLeaf(4).CliqueSize(2).Obj()
	groups := &placement.Groups{Names: []string{"a100", "h100"}, Rule: "one GPU product"}
	for i := range nodes {
		groups.Of = append(groups.Of, boolInt(nodes[i].Labels[leafKey] == "s0-l1"))
	}
	nodes[1].Free[1] = 0 // s0-l0-c0 is broken
	req := makeRequest("ns/gang").nodeObjs(nodes).workers(4, 8).hierarchy(segments(0, 2, 2, cliqueKey, true)).obj()
	req.Groups = groups
	res, err := newTestPlanner(t).PlanDetailed(t.Context(), req)
	require.NoError(t, err)
	requireValid(t, req, res.Plan)
	require.Equal(t, "h100", res.Group)
	require.Equal(t, "4 pods in leaf s0-l1: 1 leaf, 2 NVLink domains, 4 nodes; 2 subgroups in NVLink domains s0-l1-c0, s0-l1-c1; group h100",
		res.Plan.Summary)
}

// TestPlanHierarchyCapsAcrossSubgroups keeps MaxPerNode for members of one
// kind in different subgroups, packed one after another.
func TestPlanHierarchyCapsAcrossSubgroups(t *testing.T) {
	nodes := placementtest.MakeFabric().NodesPerLeaf(2).CliqueSize(2).Obj()
	req := makeRequest("ns/gang").nodeObjs(nodes).workers(4, 1).hierarchy(makeSubgroup("").children(
		makeSubgroup("a").policy(cliqueKey, true).members(0, 2),
		makeSubgroup("b").policy(cliqueKey, true).members(2, 2))).obj()
	for i := range req.Members {
		req.Members[i].MaxPerNode = 2
	}
	plan, err := newTestPlanner(t).Plan(t.Context(), req)
	require.NoError(t, err)
	requireValid(t, req, plan)
	require.Equal(t, []string{"s0-l0-n0", "s0-l0-n0", "s0-l0-n1", "s0-l0-n1"}, nodeNames(req, plan))
}

// TestPlanHierarchyOneSubgroup plans a hierarchy of just the root exactly as
// the flat gang it is.
func TestPlanHierarchyOneSubgroup(t *testing.T) {
	nodes := bigCluster(4, true)[:512]
	req := makeRequest("ns/gang").nodeObjs(nodes).workers(24, 2).policy(leafKey, false).obj()
	flat, err := newTestPlanner(t).PlanDetailed(t.Context(), req)
	require.NoError(t, err)
	req.Hierarchy = makeSubgroup("ns/gang").members(0, 24).obj()
	res, err := newTestPlanner(t).PlanDetailed(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, flat.Plan.NodeOf, res.Plan.NodeOf)
	require.Equal(t, flat.Plan.Summary, res.Plan.Summary)
	require.Len(t, res.Plan.Subgroups, 1)
	require.Equal(t, placement.SubgroupPlan{Name: "ns/gang", Parent: -1, Level: leafKey, Domain: flat.Domain[1].Value,
		Spans: flat.Plan.Spans}, res.Plan.Subgroups[0])
}

func TestPlanHierarchyDeterministic(t *testing.T) {
	base := placementtest.MakeFabric().Spines(2).LeavesPerSpine(3).NodesPerLeaf(8).CliqueSize(4).Obj()
	rng := rand.New(rand.NewPCG(9, 9))
	for i := range base {
		base[i].Free[1] = []int64{0, 4, 8, 8}[rng.IntN(4)]
	}
	root := makeSubgroup("ns/job").children(
		makeSubgroup("ns/a").policy(leafKey, true).children(
			makeSubgroup("a-0").policy(cliqueKey, true).members(0, 4),
			makeSubgroup("a-1").policy(cliqueKey, true).members(4, 4)),
		makeSubgroup("ns/b").policy(leafKey, false).members(8, 6))
	var want []string
	for i := range 20 {
		nodes := reshuffled(rng, base)
		req := makeRequest("ns/gang").nodeObjs(nodes).workers(14, 4).policy(spineKey, false).hierarchy(root).obj()
		plan, err := newTestPlanner(t).Plan(t.Context(), req)
		require.NoError(t, err)
		got := append(nodeNames(req, plan), plan.Summary)
		if i == 0 {
			want = got
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("run %d differs (-first,+this):\n%s", i, diff)
		}
	}
}

func TestPlanHierarchyConcurrent(t *testing.T) {
	nodes := placementtest.MakeFabric().Spines(2).LeavesPerSpine(3).NodesPerLeaf(8).CliqueSize(4).Obj()
	req := makeRequest("ns/gang").nodeObjs(nodes).workers(32, 4).policy(spineKey, false).hierarchy(segments(0, 4, 8, cliqueKey, true)).obj()
	want, err := newTestPlanner(t).Plan(t.Context(), req)
	require.NoError(t, err)
	p := newTestPlanner(t)
	got := make([]*placement.Plan, 8)
	errs := make([]error, len(got))
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() { got[i], errs[i] = p.Plan(t.Context(), req) })
	}
	wg.Wait()
	for i := range got {
		require.NoError(t, errs[i])
		if diff := cmp.Diff(want, got[i]); diff != "" {
			t.Errorf("plan %d (-want,+got):\n%s", i, diff)
		}
	}
}

func TestPlanHierarchyErrors(t *testing.T) {
	nodes := placementtest.MakeFabric().NodesPerLeaf(4).CliqueSize(2).Obj()
	t.Run("canceled", func(t *testing.T) {
		req := makeRequest("ns/gang").nodeObjs(nodes).workers(2, 8).hierarchy(segments(0, 2, 1, cliqueKey, true)).obj()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := newTestPlanner(t).Plan(ctx, req)
		require.ErrorIs(t, err, context.Canceled)
	})
	t.Run("unknown level", func(t *testing.T) {
		req := makeRequest("ns/gang").nodeObjs(nodes).workers(2, 8).hierarchy(makeSubgroup("").children(
			makeSubgroup("a").policy("example.com/rack", true).members(0, 1),
			makeSubgroup("b").members(1, 1))).obj()
		_, err := newTestPlanner(t).Plan(t.Context(), req)
		require.ErrorIs(t, err, ErrUnknownLevel)
		require.ErrorContains(t, err, `a: unknown topology level "example.com/rack"`)
	})
	t.Run("malformed hierarchy", func(t *testing.T) {
		req := makeRequest("ns/gang").nodeObjs(nodes).workers(2, 8).hierarchy(makeSubgroup("").children(
			makeSubgroup("a").members(0, 2),
			makeSubgroup("b").members(1, 1))).obj()
		_, err := newTestPlanner(t).Plan(t.Context(), req)
		require.EqualError(t, err, `hierarchy.children[1] ("b"): member 1 is also in hierarchy.children[0] ("a"); each is in exactly one subgroup`)
		var fe *placement.FitError
		require.False(t, errors.As(err, &fe), "a malformed request is not a fit failure")
	})
}
