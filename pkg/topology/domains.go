package topology

import (
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// This file exposes a Tree's structure read-only, for code that searches the
// hierarchy domain by domain on its own terms (gang preemption does). Levels
// are numbered as the tree numbers them: 0 is the node level, 1..n the label
// levels tightest first, NumLevels()-1 the whole cluster. Domains of a level
// are numbered in depth-first order, and nodes by depth-first position, so
// the nodes of a domain are a contiguous range of positions. None of these
// methods allocates except DomainName and DomainPath.

// NumLevels is the number of tree levels: the node level, the label levels
// and the cluster level.
func (t *Tree) NumLevels() int { return len(t.levels) }

// LevelAt returns tree level l. The node level's key is
// scheduling.HostnameKey; the cluster level has an empty key and the name
// "cluster".
func (t *Tree) LevelAt(l int) scheduling.Level { return t.levels[l] }

// LevelIndex maps a policy's label key to a tree level; scheduling.HostnameKey
// is the node level. An unknown key gives an error wrapping ErrUnknownLevel
// that lists the known ones.
func (t *Tree) LevelIndex(key string) (int, error) { return t.levelOf(key) }

// NumDomainsAt is how many domains tree level l has.
func (t *Tree) NumDomainsAt(l int) int { return len(t.dom[l]) }

// DomainRange returns the depth-first positions lo..hi-1 of the nodes of
// domain k of level l.
func (t *Tree) DomainRange(l, k int) (lo, hi int) {
	d := &t.dom[l][k]
	return int(d.lo), int(d.hi)
}

// DomainAt is the domain of level l that holds the node at depth-first
// position p.
func (t *Tree) DomainAt(l, p int) int { return int(t.anc[l][p]) }

// NodeAt is the index, in the Request's Nodes, of the node at depth-first
// position p.
func (t *Tree) NodeAt(p int) int { return int(t.node[p]) }

// PositionOf is the depth-first position of the node at index i of the
// Request's Nodes.
func (t *Tree) PositionOf(i int) int { return int(t.pos[i]) }

// DomainName names domain k of level l for people, as plan summaries do:
// "s0-l3", "(no leaf label: node n7)", "the cluster".
func (t *Tree) DomainName(l, k int) string { return t.name(l, int32(k)) }

// DomainPath is the path to domain k of level l, loosest level first; empty
// for the cluster.
func (t *Tree) DomainPath(l, k int) []PathElem { return t.path(l, int32(k)) }

// BuiltFrom reports whether nodes are, index by index, the nodes the tree
// was built from. A caller that keeps positions or domain numbers across
// requests checks it before trusting them.
func (t *Tree) BuiltFrom(nodes []placement.Node) bool { return t.matches(nodes) }

// FitCount is how many copies of request fit in free, at most limit: the
// planner's own count of a member shape's slots on one node, for callers
// that must agree with the planner on what fits. A request of nothing fits
// limit times.
func FitCount(request, free placement.Vector, limit int64) int64 {
	return fitCount(request, free, limit)
}

// Homes names, for every tree level, the domain that holds most of the
// anchors (indices into the Request's Nodes), nested: each is the child of
// the one above with the most anchors, the first in tree order on ties. It
// is where the planner places a request with Anchors: the home domain of the
// lowest level with room. With no anchors every home is the first domain.
func (t *Tree) Homes(anchors []int) []int {
	top := t.top()
	count := make([]map[int32]int, top+1)
	for l := range count {
		count[l] = map[int32]int{}
	}
	for _, a := range anchors {
		p := t.pos[a]
		for l := 0; l <= top; l++ {
			count[l][t.anc[l][p]]++
		}
	}
	home := make([]int, top+1)
	for l := top - 1; l >= 0; l-- {
		d := t.dom[l+1][home[l+1]]
		best, most := d.first, -1
		for c := d.first; c < d.end; c++ {
			if n := count[l][c]; n > most {
				best, most = c, n
			}
		}
		home[l] = int(best)
	}
	return home
}
