package topology

import (
	"slices"
	"sync"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// keptSlots keeps the slot counts of a gang's shapes in each group of
// nodes from one Plan call to the next. Counting a shape's slots
// on every node of a group, and summing them up the tree, was the largest
// part of a plan that still grew with the cluster; between two plans of
// the same shape few nodes change. A kept count is brought up to date node
// by node: a node is counted again only when its free vector is another
// one (placement.Request.StableFree: changed capacity comes in a new
// vector) or the shape's eligibility on it flipped, and the difference is
// added to the domains above it. What a count depends on is exactly that:
// the shape's request and per-node cap (the entry's key), the node's free
// vector and its eligibility (compared per node), the tree and where the
// group's nodes lie on it (the layout, by identity), and the resources the
// vectors measure.
//
// Only one Plan call at a time uses the kept counts (lease); a concurrent
// call counts afresh, as before. Safe for concurrent use.
type keptSlots struct {
	mu sync.Mutex
	// leased is set while a Plan call holds the entries; only that call
	// reads or writes them, and lay, resources and entries change only
	// when no call holds them.
	leased bool
	// lay and resources are what the entries were counted on.
	lay       *groupLayout
	resources []string
	entries   []*keptShape
	// bufs[k] are the eligibility buffers group k's narrowed Requests
	// borrow (Request.InGroupAt): only group k's nodes are ever written in
	// them, so every other node reads false, as a narrowed slice must.
	bufs [][][]bool
	// epoch numbers leases; an entry records the last one that used it.
	epoch uint64
}

// maxKeptShapes bounds the entries kept: groups times the shapes of the
// gangs planned lately. The least recently used entry goes first.
const maxKeptShapes = 32

// keptShape is one shape's slots in one group of nodes.
type keptShape struct {
	// group, shape, request and perNode are the entry's key: the group's
	// index in the layout, the shape's index in its usage, and what the
	// shape asks of a node.
	group, shape int
	request      placement.Vector
	perNode      int64
	// per[l][k] are the shape's slots in domain k of level l, counting the
	// group's nodes alone: what countSlots makes on them.
	per [][]int64
	// free[j] and elig[j] are what the last count read of the node at
	// lay.at[group][j]: its free vector, held so that its memory is not
	// reused, and whether the shape could use the node.
	free []placement.Vector
	elig []bool
	// used is the epoch of the last lease that counted with the entry.
	used uint64
}

// slotLease is one Plan call's hold on the kept counts.
type slotLease struct {
	ks    *keptSlots
	epoch uint64
}

// lease lends the kept counts to a Plan call in groups laid out as lay, or
// returns nil when another call holds them or req's vectors may be written
// in place. The caller calls release when its usages are dead: until
// then, their slot arrays are the entries'.
func (ks *keptSlots) lease(lay *groupLayout, req *placement.Request) *slotLease {
	if !req.StableFree {
		return nil
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.leased {
		return nil
	}
	if ks.lay != lay || !slices.Equal(ks.resources, req.Resources) {
		ks.lay, ks.resources, ks.entries, ks.bufs = lay, slices.Clone(req.Resources), nil, nil
	}
	ks.leased = true
	ks.epoch++
	return &slotLease{ks: ks, epoch: ks.epoch}
}

// release ends the lease.
func (sl *slotLease) release() {
	sl.ks.mu.Lock()
	sl.ks.leased = false
	sl.ks.mu.Unlock()
}

// count returns the slots of shape s (sh) in group k, whose nodes are at
// (the layout's own slice), as countSlots would count them on those nodes
// alone; nil when the lease cannot serve it: at is not the layout's, or
// the entry already counted in this call (a usage's arrays must not change
// under it).
func (sl *slotLease) count(t *Tree, req *placement.Request, k, s int, sh *shape, at []int32) [][]int64 {
	lay := sl.ks.lay
	if k >= len(lay.at) || !sameAt(at, lay.at[k]) {
		return nil
	}
	e := sl.entry(t, k, s, sh, len(at))
	if e == nil {
		return nil
	}
	top := t.top()
	for j, p := range at {
		i := t.node[p]
		el := sh.eligible == nil || sh.eligible[i]
		f := req.Nodes[i].Free
		if el == e.elig[j] && sameVector(f, e.free[j]) {
			continue
		}
		e.elig[j], e.free[j] = el, f
		var n int64
		if el {
			n = fitCount(sh.request, f, sh.perNode)
		}
		d := n - e.per[0][p]
		if d == 0 {
			continue
		}
		e.per[0][p] = n
		for l := 1; l <= top; l++ {
			e.per[l][t.anc[l][p]] += d
		}
	}
	return e.per
}

// entry finds the entry of shape s in group k, or makes one, all zero,
// evicting the least recently used when full; nil when the entry already
// counted in this lease, or every entry did.
func (sl *slotLease) entry(t *Tree, k, s int, sh *shape, nodes int) *keptShape {
	ks := sl.ks
	for _, e := range ks.entries {
		if e.group == k && e.shape == s && e.perNode == sh.perNode && slices.Equal(e.request, sh.request) {
			if e.used == sl.epoch {
				return nil
			}
			e.used = sl.epoch
			return e
		}
	}
	e := &keptShape{group: k, shape: s, request: slices.Clone(sh.request), perNode: sh.perNode,
		free: make([]placement.Vector, nodes), elig: make([]bool, nodes), used: sl.epoch}
	e.per = make([][]int64, t.top()+1)
	for l := range e.per {
		e.per[l] = make([]int64, len(t.dom[l]))
	}
	if len(ks.entries) < maxKeptShapes {
		ks.entries = append(ks.entries, e)
		return e
	}
	old := 0
	for j, o := range ks.entries {
		if o.used < ks.entries[old].used {
			old = j
		}
	}
	if ks.entries[old].used == sl.epoch {
		return nil
	}
	ks.entries[old] = e
	return e
}

// buffer is group k's j-th eligibility buffer for a Request of n nodes.
// A plan narrows to each group once, so a buffer is never lent twice in
// one lease.
func (sl *slotLease) buffer(k, j, n int) []bool {
	ks := sl.ks
	if n != ks.lay.nodes {
		return make([]bool, n)
	}
	for len(ks.bufs) <= k {
		ks.bufs = append(ks.bufs, nil)
	}
	for len(ks.bufs[k]) <= j {
		ks.bufs[k] = append(ks.bufs[k], make([]bool, n))
	}
	return ks.bufs[k][j]
}

// sameVector reports whether a and b are one vector (not merely equal).
func sameVector(a, b placement.Vector) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// sameAt reports whether a and b are one slice of positions.
func sameAt(a, b []int32) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
