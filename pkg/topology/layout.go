package topology

import (
	"sync"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// groupLayout is where a Groups' nodes lie on a tree: each group's
// depth-first positions (groupPositions) and, per group, the domains above
// them (domainsAbove). Both follow from the tree and the Groups' Of alone,
// yet cost a pass over the cluster to make, which a plan in several groups
// paid on every call. A layout is never written once made.
type groupLayout struct {
	// tree, of, nodes and groups identify what the layout was made from:
	// of is the address of Groups.Of's first element, nodes its length.
	tree          *Tree
	of            *int
	nodes, groups int
	at            [][]int32
	above         [][][]int32
	// indices[k] are the indices in the Request of the nodes at at[k].
	indices [][]int
}

// layouts keeps the last groupLayout a Planner made. Safe for concurrent
// use.
type layouts struct {
	mu   sync.Mutex
	last *groupLayout
}

// of returns g's layout on t: the last one made, when it was made from the
// same tree and the same Of (by identity, as placement.Groups allows: Of
// is never changed once a planner has it), or a new one.
func (ls *layouts) of(t *Tree, g *placement.Groups) *groupLayout {
	var of *int
	if len(g.Of) > 0 {
		of = &g.Of[0]
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l := ls.last; l != nil && l.tree == t && l.of == of && l.nodes == len(g.Of) && l.groups == len(g.Names) {
		return l
	}
	l := &groupLayout{tree: t, of: of, nodes: len(g.Of), groups: len(g.Names), at: groupPositions(t, g)}
	l.above = make([][][]int32, len(l.at))
	l.indices = make([][]int, len(l.at))
	for k, at := range l.at {
		l.above[k] = t.domainsAbove(at)
		l.indices[k] = t.nodesAt(at)
	}
	ls.last = l
	return l
}

// validated reports whether the last layout was made from g's very Of (by
// identity, which Groups allows: Of is never changed once a planner has
// it) for n nodes and as many groups: that Of passed Groups.Validate then,
// and a plan need not check every node's group again.
func (ls *layouts) validated(g *placement.Groups, n int) bool {
	if len(g.Of) == 0 {
		return false
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l := ls.last
	return l != nil && l.of == &g.Of[0] && l.nodes == n && len(g.Of) == n && l.groups == len(g.Names)
}
