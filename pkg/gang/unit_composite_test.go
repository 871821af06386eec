package gang

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSubtreeLeaves(t *testing.T) {
	leaf := func(name string) Node {
		return Node{Key: Key{Namespace: "ns", Name: name}, Spec: &Spec{}}
	}
	tree := &Tree{Nodes: []Node{
		{Key: Key{API: Composite, Namespace: "ns", Name: "root"}, Children: []int{1, 4}},
		{Key: Key{API: Composite, Namespace: "ns", Name: "mid"}, Children: []int{2, 3}},
		leaf("a"), leaf("b"), leaf("c"),
	}}
	key := func(name string) Key { return Key{Namespace: "ns", Name: name} }
	require.Equal(t, []Key{key("a"), key("b"), key("c")}, subtreeLeaves(tree, 0))
	require.Equal(t, []Key{key("a"), key("b")}, subtreeLeaves(tree, 1))
	require.Equal(t, []Key{key("c")}, subtreeLeaves(tree, 4))
}
