package topology

import (
	"fmt"
	"math/rand/v2"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// subgroupWrapper builds a placement.Subgroup.
type subgroupWrapper struct{ g placement.Subgroup }

func makeSubgroup(name string) *subgroupWrapper {
	return &subgroupWrapper{g: placement.Subgroup{Name: name}}
}

func (w *subgroupWrapper) policy(level string, required bool) *subgroupWrapper {
	w.g.Policy = placement.Policy{Level: level, Required: required}
	return w
}

// members adds the members with indices first..first+n-1.
func (w *subgroupWrapper) members(first, n int) *subgroupWrapper {
	for i := range n {
		w.g.Members = append(w.g.Members, first+i)
	}
	return w
}

// anchors adds the anchors with indices first..first+n-1.
func (w *subgroupWrapper) anchors(first, n int) *subgroupWrapper {
	for i := range n {
		w.g.Anchors = append(w.g.Anchors, first+i)
	}
	return w
}

func (w *subgroupWrapper) children(cs ...*subgroupWrapper) *subgroupWrapper {
	for _, c := range cs {
		w.g.Children = append(w.g.Children, c.g)
	}
	return w
}

func (w *subgroupWrapper) obj() *placement.Subgroup { return &w.g }

// segments is a root whose children cut members first.. into n segments of
// size consecutive ranks, "seg-0" and so on, each with the given policy.
func segments(first, n, size int, level string, required bool) *subgroupWrapper {
	root := makeSubgroup("")
	for s := range n {
		root.children(makeSubgroup(fmt.Sprint("seg-", s)).policy(level, required).members(first+s*size, size))
	}
	return root
}

func (w *requestWrapper) hierarchy(root *subgroupWrapper) *requestWrapper {
	w.r.Hierarchy = root.obj()
	return w
}

// nodeAt is the index of the node with the given name; it panics when
// there is none, a mistake in the test.
func nodeAt(nodes []placement.Node, name string) int {
	for i := range nodes {
		if nodes[i].Name == name {
			return i
		}
	}
	panic(name)
}

// reshuffled copies nodes in a random order, each with its label map rebuilt
// in a random insertion order, for determinism tests: a plan must not depend
// on either.
func reshuffled(rng *rand.Rand, base []placement.Node) []placement.Node {
	nodes := make([]placement.Node, len(base))
	for j, n := range base {
		keys := []string{spineKey, leafKey, cliqueKey}
		rng.Shuffle(len(keys), func(a, b int) { keys[a], keys[b] = keys[b], keys[a] })
		labels := map[string]string{}
		for _, k := range keys {
			labels[k] = n.Labels[k]
		}
		nodes[j] = placement.Node{Name: n.Name, Labels: labels, Allocatable: n.Allocatable.Clone(), Free: n.Free.Clone()}
	}
	rng.Shuffle(len(nodes), func(a, b int) { nodes[a], nodes[b] = nodes[b], nodes[a] })
	return nodes
}
