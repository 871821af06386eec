package fabric

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

// FromNodes builds the layout of real nodes, as a cluster snapshot holds
// them: each node's name, labels and GPUs. levels are the topology levels
// gpu-gang is configured with, tightest first; the first three take the
// clique, leaf and spine tiers. Nodes are put in fabric order (by spine,
// leaf, clique and name label values), so that a leaf's nodes are
// neighbours in the report. A node without a leaf label is a leaf of its
// own; a node without a clique label is in no clique.
func FromNodes(preset string, levels []scheduling.Level, nodes []NodeInfo) (*Layout, error) {
	if err := scheduling.ValidateLevels(levels); err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		return nil, errors.New("no nodes")
	}
	l := &Layout{Spec: scenario.Fabric{Preset: preset}, Levels: levels}
	for t := range numTiers {
		if t < len(levels) {
			l.TierKeys[t] = levels[t].Key
		}
	}
	value := func(n *NodeInfo, t int) string {
		if l.TierKeys[t] == "" {
			return ""
		}
		return n.Labels[l.TierKeys[t]]
	}
	sorted := slices.Clone(nodes)
	slices.SortFunc(sorted, func(a, b NodeInfo) int {
		for t := numTiers - 1; t >= 0; t-- {
			if c := cmp.Compare(value(&a, t), value(&b, t)); c != 0 {
				return c
			}
		}
		return cmp.Compare(a.Name, b.Name)
	})
	type key struct{ spine, leaf, clique string }
	spines, leaves, cliques := map[string]int{}, map[key]int{}, map[key]int{}
	for i := range sorted {
		n := sorted[i]
		if i > 0 && n.Name == sorted[i-1].Name {
			return nil, fmt.Errorf("node %s is listed twice", n.Name)
		}
		spine, leaf, clique := value(&n, Spine), value(&n, Leaf), value(&n, Clique)
		s, ok := spines[spine]
		if !ok {
			s = len(spines)
			spines[spine] = s
		}
		lk := key{spine: spine, leaf: leaf}
		if leaf == "" {
			lk.leaf = "node " + n.Name
		}
		lf, ok := leaves[lk]
		if !ok {
			lf = len(l.Leaves)
			leaves[lk] = lf
			l.Leaves = append(l.Leaves, nil)
		}
		n.Domain = [numTiers]int{-1, lf, s}
		if clique != "" {
			ck := key{spine: spine, leaf: lk.leaf, clique: clique}
			c, ok := cliques[ck]
			if !ok {
				c = len(l.Cliques)
				cliques[ck] = c
				l.Cliques = append(l.Cliques, nil)
			}
			n.Domain[Clique] = c
			l.Cliques[c] = append(l.Cliques[c], len(l.Nodes))
		}
		n.LeafName = leaf
		if leaf == "" {
			n.LeafName = "(no leaf) " + n.Name
		}
		l.Leaves[lf] = append(l.Leaves[lf], len(l.Nodes))
		l.Nodes = append(l.Nodes, n)
	}
	l.Spines = len(spines)
	return l, nil
}
