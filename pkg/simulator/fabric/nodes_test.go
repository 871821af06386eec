package fabric

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// Real nodes are put in fabric order and grouped by their labels; a node
// without a leaf label is a leaf of its own, one without a clique label is
// in no clique, and GPUs may differ from node to node.
func TestFromNodes(t *testing.T) {
	levels, _ := scheduling.Preset("nvidia")
	clique, leaf, spine := levels[0].Key, levels[1].Key, levels[2].Key
	nodes := []NodeInfo{
		{Name: "b", Labels: map[string]string{spine: "s2", leaf: "l1", clique: "c1"}, GPUs: 8},
		{Name: "a", Labels: map[string]string{spine: "s1", leaf: "l1", clique: "c1"}, GPUs: 8},
		{Name: "c", Labels: map[string]string{spine: "s1", leaf: "l1", clique: "c1"}, GPUs: 4},
		{Name: "d", Labels: map[string]string{spine: "s1"}, GPUs: 2},
		{Name: "e", Labels: map[string]string{spine: "s1", leaf: "l1"}, GPUs: 8},
	}
	l, err := FromNodes("nvidia", levels, nodes)
	require.NoError(t, err)
	var order []string
	for _, n := range l.Nodes {
		order = append(order, n.Name)
	}
	require.Equal(t, []string{"d", "e", "a", "c", "b"}, order, "by spine, leaf, clique, name")
	require.Equal(t, 30, l.TotalGPUs())
	require.Equal(t, 2, l.Spines)
	require.Equal(t, [][]int{{0}, {1, 2, 3}, {4}}, l.Leaves, "d alone; s1/l1; s2/l1 apart from s1/l1")
	require.Equal(t, [][]int{{2, 3}, {4}}, l.Cliques, "e and d in no clique; c1 under s1 and under s2 are different cliques")
	require.Equal(t, -1, l.Nodes[1].Domain[Clique])
	require.Equal(t, "(no leaf) d", l.Nodes[0].LeafName)
	require.Equal(t, "l1", l.Nodes[1].LeafName)

	_, err = FromNodes("nvidia", levels, append(nodes, nodes[0]))
	require.ErrorContains(t, err, "node b is listed twice")
	_, err = FromNodes("nvidia", levels, nil)
	require.ErrorContains(t, err, "no nodes")
}
