package topology

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/placement/placementtest"
)

// TestPlanNearAnchors places replacements for members of a running gang:
// as close to the anchors (the nodes running its other members) as they
// fit, and never outside a required level's domain.
func TestPlanNearAnchors(t *testing.T) {
	// 2 spines x 2 leaves x 4 nodes, cliques of 2 nodes: s0-l0-n0..n3 are
	// s0-l0-c0 {n0 n1} and s0-l0-c1 {n2 n3}, and so on.
	full := func(ws []placement.Node, names ...string) []placement.Node {
		for i := range ws {
			for _, n := range names {
				if ws[i].Name == n {
					ws[i].Free = placement.Vector{64000, 0}
				}
			}
		}
		return ws
	}
	index := func(ws []placement.Node, names ...string) []int {
		var out []int
		for _, n := range names {
			for i := range ws {
				if ws[i].Name == n {
					out = append(out, i)
				}
			}
		}
		return out
	}
	fab := func() []placement.Node {
		return placementtest.MakeFabric().Spines(2).LeavesPerSpine(2).NodesPerLeaf(4).CliqueSize(2).Obj()
	}
	tests := []struct {
		name    string
		nodes   []placement.Node
		anchors []string
		gpus    int64
		policy  placement.Policy
		want    []string
		wantErr string
	}{
		{
			name:    "the anchor's own node when it has room",
			nodes:   fab(),
			anchors: []string{"s1-l1-n2"},
			gpus:    4,
			want:    []string{"s1-l1-n2"},
		},
		{
			name:    "the anchors' clique",
			nodes:   full(fab(), "s1-l1-n2"),
			anchors: []string{"s1-l1-n2"},
			gpus:    8,
			want:    []string{"s1-l1-n3"},
		},
		{
			name:    "the anchors' leaf when their clique is full",
			nodes:   full(fab(), "s1-l1-n2", "s1-l1-n3"),
			anchors: []string{"s1-l1-n2", "s1-l1-n3"},
			gpus:    8,
			want:    []string{"s1-l1-n0"},
		},
		{
			name:    "the anchors' spine when their leaf is full",
			nodes:   full(fab(), "s1-l1-n0", "s1-l1-n1", "s1-l1-n2", "s1-l1-n3"),
			anchors: []string{"s1-l1-n0", "s1-l1-n1", "s1-l1-n2"},
			gpus:    8,
			want:    []string{"s1-l0-n0"},
		},
		{
			name:    "the leaf with most anchors wins",
			nodes:   full(fab(), "s0-l0-n0", "s1-l1-n0", "s1-l1-n1"),
			anchors: []string{"s0-l0-n0", "s1-l1-n0", "s1-l1-n1"},
			gpus:    8,
			want:    []string{"s1-l1-n2"},
		},
		{
			name:    "required leaf: never outside the anchors' leaf",
			nodes:   full(fab(), "s1-l1-n0", "s1-l1-n1", "s1-l1-n2", "s1-l1-n3"),
			anchors: []string{"s1-l1-n0", "s1-l1-n1", "s1-l1-n2"},
			gpus:    8,
			policy:  placement.Policy{Level: leafKey, Required: true},
			wantErr: "required leaf (network.topology.nvidia.com/leaf): s1-l1, the leaf that runs the gang's other members, has room for 0",
		},
		{
			name:    "required leaf: a tighter domain inside it first",
			nodes:   full(fab(), "s1-l1-n0"),
			anchors: []string{"s1-l1-n0", "s1-l1-n2"},
			gpus:    8,
			policy:  placement.Policy{Level: leafKey, Required: true},
			want:    []string{"s1-l1-n1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := makeRequest("ns/g").nodeObjs(tt.nodes).workers(1, tt.gpus).obj()
			req.Policy = tt.policy
			req.Anchors = index(tt.nodes, tt.anchors...)
			require.Len(t, req.Anchors, len(tt.anchors))
			plan, err := newTestPlanner(t).Plan(t.Context(), req)
			if tt.wantErr != "" {
				var fe *placement.FitError
				require.ErrorAs(t, err, &fe)
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			requireValid(t, req, plan)
			if diff := cmp.Diff(tt.want, nodeNames(req, plan)); diff != "" {
				t.Errorf("nodes (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestPlanMaxPerNode spreads members that exclude each other, one per node,
// and still keeps them in the tightest domain that holds them that way.
func TestPlanMaxPerNode(t *testing.T) {
	nodes := placementtest.MakeFabric().Spines(1).LeavesPerSpine(2).NodesPerLeaf(4).CliqueSize(4).Obj()
	req := makeRequest("ns/g").nodeObjs(nodes).obj()
	for i := range 4 {
		m := makeMember("w").gpus(4).obj()
		m.Name = "ns/w-" + string(rune('0'+i))
		m.Rank = i
		m.MaxPerNode = 1
		req.Members = append(req.Members, m)
	}
	plan, err := newTestPlanner(t).Plan(t.Context(), req)
	require.NoError(t, err)
	requireValid(t, req, plan)
	got := nodeNames(req, plan)
	require.ElementsMatch(t, []string{"s0-l0-n0", "s0-l0-n1", "s0-l0-n2", "s0-l0-n3"}, got,
		"four members that exclude each other need four nodes of one clique, not two nodes")

	req.Members = append(req.Members, req.Members[0])
	req.Members[4].Name, req.Members[4].Rank = "ns/w-4", 4
	_, err = newTestPlanner(t).Plan(t.Context(), req)
	require.NoError(t, err, "a fifth member fits in the other leaf's clique")
}

// TestGreedyHonoursCapsAndAnchors checks the topology-blind yardstick
// against the same two rules.
func TestGreedyHonoursCapsAndAnchors(t *testing.T) {
	nodes := placementtest.MakeFabric().Spines(1).LeavesPerSpine(1).NodesPerLeaf(4).Obj()
	req := makeRequest("ns/g").nodeObjs(nodes).workers(3, 4).obj()
	for i := range req.Members {
		req.Members[i].MaxPerNode = 1
	}
	plan, err := placementtest.Greedy{}.Plan(t.Context(), req)
	require.NoError(t, err)
	requireValid(t, req, plan)

	req = makeRequest("ns/g").nodeObjs(nodes).workers(1, 4).obj()
	req.Anchors = []int{2}
	plan, err = placementtest.Greedy{}.Plan(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, []string{nodes[2].Name}, nodeNames(req, plan), "a replacement goes to its gang's node first")
}
