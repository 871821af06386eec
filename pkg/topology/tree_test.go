package topology

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/placement/placementtest"
)

// groups lists the node names of each domain of level l, in tree order.
func groups(tr *Tree, l int) [][]string {
	var out [][]string
	for _, d := range tr.dom[l] {
		var g []string
		for p := d.lo; p < d.hi; p++ {
			g = append(g, tr.names[tr.node[p]])
		}
		out = append(out, g)
	}
	return out
}

func nodeList(ws ...*nodeWrapper) []placement.Node {
	out := make([]placement.Node, len(ws))
	for i, w := range ws {
		out[i] = w.obj()
	}
	return out
}

func TestBuildTreeGroups(t *testing.T) {
	tests := []struct {
		name  string
		nodes []placement.Node
		// want[l-1] are the groups of label level l (clique, leaf, spine).
		want [3][][]string
	}{
		{
			name: "fully labelled, natural order",
			nodes: nodeList(
				makeNode("n10").spine("s1").leaf("l1").clique("c1"),
				makeNode("n2").spine("s1").leaf("l1").clique("c1"),
				makeNode("n3").spine("s1").leaf("l2").clique("c2"),
				makeNode("n1").spine("s0").leaf("l0").clique("c0"),
			),
			want: [3][][]string{
				{{"n1"}, {"n2", "n10"}, {"n3"}},
				{{"n1"}, {"n2", "n10"}, {"n3"}},
				{{"n1"}, {"n2", "n10", "n3"}},
			},
		},
		{
			name: "unlabelled nodes never merge with each other",
			nodes: nodeList(
				makeNode("a").spine("s1").leaf("l1").clique("c1"),
				makeNode("b"),
				makeNode("c"),
				makeNode("d").spine("s1"),
				makeNode("e").spine("s1"),
			),
			want: [3][][]string{
				{{"a"}, {"d"}, {"e"}, {"b"}, {"c"}},
				{{"a"}, {"d"}, {"e"}, {"b"}, {"c"}},
				{{"a", "d", "e"}, {"b"}, {"c"}},
			},
		},
		{
			name: "a clique stays whole where the leaf label is missing",
			nodes: nodeList(
				makeNode("a").spine("s1").clique("c1"),
				makeNode("b").spine("s1").clique("c1"),
				makeNode("c").spine("s1").clique("c2"),
				makeNode("d").spine("s1").leaf("l1").clique("c1"),
				makeNode("e").clique("c1"),
			),
			want: [3][][]string{
				{{"d"}, {"a", "b"}, {"c"}, {"e"}},
				{{"d"}, {"a", "b"}, {"c"}, {"e"}},
				{{"d", "a", "b", "c"}, {"e"}},
			},
		},
		{
			name: "dotted values are not paths",
			nodes: nodeList(
				makeNode("a").spine("x.y").leaf("z").clique("c"),
				makeNode("b").spine("x").leaf("y.z").clique("c"),
				makeNode("c").spine("x").leaf("y").clique("z.c"),
			),
			want: [3][][]string{
				{{"c"}, {"b"}, {"a"}},
				{{"c"}, {"b"}, {"a"}},
				{{"c", "b"}, {"a"}},
			},
		},
		{
			name: "empty values count as missing",
			nodes: nodeList(
				makeNode("a").spine("").leaf("").clique(""),
				makeNode("b").spine("").leaf("").clique(""),
			),
			want: [3][][]string{{{"a"}, {"b"}}, {{"a"}, {"b"}}, {{"a"}, {"b"}}},
		},
		{
			name:  "no nodes",
			nodes: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := BuildTree(nvidiaLevels(), tc.nodes, 1)
			require.NoError(t, err)
			for l := 1; l <= 3; l++ {
				if diff := cmp.Diff(tc.want[l-1], groups(tr, l)); diff != "" {
					t.Errorf("level %s groups (-want,+got):\n%s", tr.levels[l].Name, diff)
				}
			}
			require.Len(t, tr.dom[tr.top()], 1)
			require.Len(t, tr.dom[0], len(tc.nodes))
		})
	}
}

func TestBuildTreeIgnoresNodeOrder(t *testing.T) {
	nodes := placementtest.MakeFabric().Spines(2).LeavesPerSpine(3).NodesPerLeaf(5).CliqueSize(2).Obj()
	nodes = append(nodes, makeNode("stray-1").obj(), makeNode("stray-2").spine("s1").obj())
	want, err := BuildTree(nvidiaLevels(), nodes, 1)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		shuffled := append([]placement.Node(nil), nodes...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		got, err := BuildTree(nvidiaLevels(), shuffled, 1)
		require.NoError(t, err)
		for l := range want.dom {
			if diff := cmp.Diff(groups(want, l), groups(got, l)); diff != "" {
				t.Fatalf("level %d groups depend on node order (-want,+got):\n%s", l, diff)
			}
		}
	}
}

func TestTreeNames(t *testing.T) {
	tr, err := BuildTree(nvidiaLevels(), nodeList(
		makeNode("a").spine("s1").leaf("l1").clique("c1"),
		makeNode("b").spine("s2").leaf("l1").clique("c2"),
		makeNode("c").spine("s2").clique("c3"),
		makeNode("d"),
	), 1)
	require.NoError(t, err)
	var got []string
	for l := 1; l <= tr.top(); l++ {
		for k := range tr.dom[l] {
			got = append(got, tr.name(l, int32(k)))
		}
	}
	want := []string{
		"c1", "c2", "c3", "(no NVLink domain label: node d)",
		"s1/l1", "s2/l1", "(no leaf label: NVLink domain c3)", "(no leaf label: node d)",
		"s1", "s2", "(no spine label: node d)",
		"the cluster",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("names (-want,+got):\n%s", diff)
	}
	require.Equal(t, 4, tr.NumDomains(cliqueKey))
	require.Equal(t, 3, tr.NumDomains(spineKey))
	require.Equal(t, 4, tr.NumDomains(scheduling.HostnameKey))
	require.Equal(t, 0, tr.NumDomains("example.com/rack"))
	if diff := cmp.Diff(nvidiaLevels(), tr.Levels()); diff != "" {
		t.Errorf("levels (-want,+got):\n%s", diff)
	}
	wantPath := []PathElem{
		{Key: spineKey, Value: "s2"},
		{Key: leafKey, Value: "c3", Unlabelled: true},
		{Key: cliqueKey, Value: "c3"},
	}
	if diff := cmp.Diff(wantPath, tr.path(1, 2)); diff != "" {
		t.Errorf("path (-want,+got):\n%s", diff)
	}
}

func TestCompareNatural(t *testing.T) {
	in := []string{"n10", "n2", "n1", "n01", "a", "n", "n2b", "n2a", "10", "9"}
	want := []string{"9", "10", "a", "n", "n01", "n1", "n2", "n2a", "n2b", "n10"}
	got := append([]string(nil), in...)
	slices.SortFunc(got, compareNatural)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("order (-want,+got):\n%s", diff)
	}
}

func TestPlannerCachesTree(t *testing.T) {
	p, err := NewPlanner(nvidiaLevels())
	require.NoError(t, err)
	nodes := placementtest.MakeFabric().NodesPerLeaf(4).Obj()
	req := makeRequest("ns/g").nodeObjs(nodes).generation(7).obj()
	first := p.Tree(req)
	require.Same(t, first, p.Tree(req), "same generation and nodes must reuse the tree")

	req.NodeGeneration = 8
	second := p.Tree(req)
	require.NotSame(t, first, second, "a new generation must rebuild")

	relabelled := append([]placement.Node(nil), req.Nodes...)
	relabelled[0].Labels = map[string]string{leafKey: "elsewhere"}
	third := p.Tree(&placement.Request{Nodes: relabelled, NodeGeneration: 8})
	require.NotSame(t, second, third, "a node relabelled under one generation must rebuild: the generation may run ahead of the labels")
	require.Same(t, third, p.Tree(&placement.Request{Nodes: relabelled, NodeGeneration: 8}))
	replaced := append([]placement.Node(nil), relabelled...)
	replaced[1].Labels = maps.Clone(replaced[1].Labels)
	require.Same(t, third, p.Tree(&placement.Request{Nodes: replaced, NodeGeneration: 8}), "a node object replaced with the same labels keeps the tree")
	replaced[2].Labels = maps.Clone(replaced[2].Labels)
	replaced[2].Labels[leafKey] = "moved"
	require.NotSame(t, third, p.Tree(&placement.Request{Nodes: replaced, NodeGeneration: 8}), "nor does a relabelled node's new map")

	req.Nodes = req.Nodes[1:]
	require.NotSame(t, third, p.Tree(req), "different nodes under one generation must rebuild")

	// A labels epoch stands for the nodes it was first seen with: the
	// nodes it comes with again are not compared, and another epoch's
	// nodes are.
	epochReq := &placement.Request{Nodes: relabelled, NodeGeneration: 8, LabelsEpoch: 41}
	fourth := p.Tree(epochReq)
	require.Same(t, fourth, p.Tree(&placement.Request{Nodes: relabelled[:1], NodeGeneration: 8, LabelsEpoch: 41}),
		"nodes of the epoch the tree matched are taken as read")
	require.NotSame(t, fourth, p.Tree(&placement.Request{Nodes: replaced, NodeGeneration: 8, LabelsEpoch: 42}), "another epoch's nodes are compared")
	require.NotSame(t, fourth, p.Tree(&placement.Request{Nodes: relabelled, NodeGeneration: 9, LabelsEpoch: 41}), "a new generation rebuilds whatever the epoch")
}
