package topology

import (
	"fmt"
	"math"
	"slices"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// shape is a group of members that ask for the same vector under the same
// node constraints. Members of one shape are interchangeable, so the planner
// counts them instead of placing them one by one.
type shape struct {
	request  placement.Vector
	eligible []bool
	// perNode caps the members of this shape on one node; maxNodeSlots
	// when uncapped.
	perNode int64
	// members are indices into Request.Members, in rank order.
	members []int
}

// placed puts count members of shape onto the node at depth-first position
// pos.
type placed struct {
	pos, shape, count int32
}

// usage is one Plan call's view of a Request on a Tree: the members grouped
// into shapes and the free capacity counted per domain. It belongs to that
// call alone and is dropped when the call returns. The Tree is shared and is
// never written; the Request is only read.
type usage struct {
	tree *Tree
	req  *placement.Request
	// bound are the shapes of members bound by topology (Accelerated), in
	// order of their first member; loose are the others.
	bound, loose []shape
	// want[s] is len(bound[s].members); total is their sum.
	want  []int64
	total int64
	// slots[s][l][k] is how many members of bound[s] fit in domain k of
	// level l, that shape alone. Written by newUsage, read-only afterwards.
	slots [][][]int64
	// scratch, when set, lends slots their arrays (newUsageAt).
	scratch *slotScratch
	// room[l][k] sums slots over shapes: a domain's free capacity in this
	// gang's own units, the key of best fit. Aliases slots[0] for one shape.
	room [][]int64
	// free overlays the Request's free capacity, by depth-first position,
	// with what this call has placed; nil until the first write, and a nil
	// entry means untouched. take copies on first write, so the Request's
	// vectors are never written. Owned by this call; the greedy packer
	// undoes its trial writes.
	free []placement.Vector
	// fit scores best fit on the Request's scale. It is measured on first
	// use (fitted), since most plans never pack by best fit. Owned by this
	// call.
	fit    placement.BestFit
	fitted bool
}

// newUsage checks req against the tree and counts free capacity.
func newUsage(t *Tree, req *placement.Request) (*usage, error) {
	return newUsageIn(t, req, t.top(), 0)
}

// newUsageIn is newUsage counting free capacity only on the nodes of
// domain k of level l: every other domain's slots read zero, which is all
// a plan inside that domain reads, for a fraction of the work.
func newUsageIn(t *Tree, req *placement.Request, l int, k int32) (*usage, error) {
	u, err := shapesOf(t, req, false)
	if err != nil {
		return nil, err
	}
	u.countSlots(t.dom[l][k].lo, t.dom[l][k].hi, nil)
	return u, nil
}

// newUsageAt is newUsage for a request whose bound members may use no node
// but those at depth-first positions at (ascending): a group's nodes, when
// the request is Request.InGroup's. Their slots elsewhere are zero, so
// only the nodes at are counted: planning every group counts each node
// once, not once per group. The slot arrays are sc's when sc is not nil.
// The caller checked req's nodes (validateNodes, once for all groups).
func newUsageAt(t *Tree, req *placement.Request, at []int32, sc *slotScratch) (*usage, error) {
	u, err := shapesOf(t, req, true)
	if err != nil {
		return nil, err
	}
	u.scratch = sc
	u.countSlots(0, int32(len(t.node)), at)
	return u, nil
}

// shapesOf checks req against the tree and groups its members into shapes;
// with nodesChecked, its nodes were checked already (validateNodes).
func shapesOf(t *Tree, req *placement.Request, nodesChecked bool) (*usage, error) {
	if err := validateRequest(req, nodesChecked); err != nil {
		return nil, err
	}
	u := &usage{tree: t, req: req}
	for i := range req.Members {
		m := &req.Members[i]
		group := &u.loose
		if m.Accelerated {
			group = &u.bound
		}
		perNode := int64(maxNodeSlots)
		if m.MaxPerNode > 0 {
			perNode = int64(m.MaxPerNode)
		}
		j := slices.IndexFunc(*group, func(s shape) bool {
			return sameEligible(s.eligible, m.Eligible) && slices.Equal(s.request, m.Request) && s.perNode == perNode
		})
		if j < 0 {
			*group = append(*group, shape{request: m.Request, eligible: m.Eligible, perNode: perNode})
			j = len(*group) - 1
		}
		(*group)[j].members = append((*group)[j].members, i)
	}
	u.want = make([]int64, len(u.bound))
	for s := range u.bound {
		u.want[s] = int64(len(u.bound[s].members))
		u.total += u.want[s]
	}
	return u, nil
}

func validateRequest(req *placement.Request, nodesChecked bool) error {
	dims := len(req.Resources)
	if !nodesChecked {
		if err := validateNodes(req); err != nil {
			return err
		}
	}
	for i := range req.Members {
		m := &req.Members[i]
		if len(m.Request) != dims {
			return fmt.Errorf("member %s: request vector has %d dimensions, want %d", m.Name, len(m.Request), dims)
		}
		if m.Eligible != nil && len(m.Eligible) != len(req.Nodes) {
			return fmt.Errorf("member %s: eligibility covers %d nodes, want %d", m.Name, len(m.Eligible), len(req.Nodes))
		}
		if m.MaxPerNode < 0 {
			return fmt.Errorf("member %s: MaxPerNode is %d, want 0 (no cap) or more", m.Name, m.MaxPerNode)
		}
	}
	for _, a := range req.Anchors {
		if a < 0 || a >= len(req.Nodes) {
			return fmt.Errorf("anchor %d is not a node index (the request has %d nodes)", a, len(req.Nodes))
		}
	}
	return nil
}

// validateNodes checks that every node's free vector has the request's
// dimensions.
func validateNodes(req *placement.Request) error {
	dims := len(req.Resources)
	for i := range req.Nodes {
		if len(req.Nodes[i].Free) != dims {
			return fmt.Errorf("node %s: free vector has %d dimensions, want %d", req.Nodes[i].Name, len(req.Nodes[i].Free), dims)
		}
	}
	return nil
}

// sameEligible reports whether two eligibility slices are the same slice.
// The Request shares one slice among members with the same constraints;
// comparing contents would cost a pass over all nodes per member.
func sameEligible(a, b []bool) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// countSlots fills slots and room bottom-up, for the nodes at depth-first
// positions lo..hi-1 and the domains above them; of those nodes, only the
// ones at (ascending) when at is not nil, the others holding no slot.
func (u *usage) countSlots(lo, hi int32, at []int32) {
	t := u.tree
	top := t.top()
	var above [][]int32
	if at != nil {
		above = u.scratch.aboveOf(t, at)
	}
	u.slots = make([][][]int64, len(u.bound))
	for s := range u.bound {
		sh := &u.bound[s]
		if at != nil && u.scratch != nil && u.scratch.kept != nil {
			if per := u.scratch.kept.count(t, u.req, u.scratch.group, s, sh, at); per != nil {
				u.slots[s] = per
				continue
			}
		}
		var per [][]int64
		if at != nil && u.scratch != nil {
			per = u.scratch.arrays(t, s, at, above)
		} else {
			per = make([][]int64, top+1)
			for l := range per {
				per[l] = make([]int64, len(t.dom[l]))
			}
		}
		count := func(p int32) {
			i := t.node[p]
			if sh.eligible != nil && !sh.eligible[i] {
				return
			}
			per[0][p] = fitCount(sh.request, u.req.Nodes[i].Free, sh.perNode)
		}
		if at != nil {
			for _, p := range at {
				count(p)
			}
		} else {
			for p := lo; p < hi; p++ {
				count(p)
			}
		}
		for l := 1; l <= top; l++ {
			if lo == hi {
				continue
			}
			below := per[l-1]
			sum := func(k int32) {
				d := t.dom[l][k]
				var n int64
				for c := d.first; c < d.end; c++ {
					n += below[c]
				}
				per[l][k] = n
			}
			if above != nil {
				for _, k := range above[l] {
					sum(k)
				}
				continue
			}
			for k := t.anc[l][lo]; k <= t.anc[l][hi-1]; k++ {
				sum(k)
			}
		}
		u.slots[s] = per
	}
	if len(u.bound) == 1 {
		u.room = u.slots[0]
		return
	}
	u.room = make([][]int64, top+1)
	for l := range u.room {
		u.room[l] = make([]int64, len(t.dom[l]))
		for s := range u.bound {
			for k, n := range u.slots[s][l] {
				u.room[l][k] += n
			}
		}
	}
}

// domainsAbove lists, for each level l from 1 up, the domains of level l
// that hold a node at depth-first positions at (ascending), in tree order:
// the only domains whose slots a count on those nodes changes. Each level's
// list is made from the one below it, so the cost is the nodes and the
// domains touched, not the tree.
func (t *Tree) domainsAbove(at []int32) [][]int32 {
	above := make([][]int32, t.top()+1)
	for l := 1; l <= t.top(); l++ {
		// A domain's parent is the parent of its first node.
		first := at
		if l > 1 {
			first = make([]int32, len(above[l-1]))
			for j, c := range above[l-1] {
				first[j] = t.dom[l-1][c].lo
			}
		}
		last := int32(-1)
		for _, p := range first {
			if k := t.anc[l][p]; k != last {
				above[l], last = append(above[l], k), k
			}
		}
	}
	return above
}

// maxNodeSlots caps one node's slots, for members that ask for nothing.
const maxNodeSlots = 1 << 30

// fitCount is how many copies of request fit in free, at most limit, by
// the one fits rule (placement.FitCount) that pruning and the holds use
// too.
func fitCount(request, free placement.Vector, limit int64) int64 {
	return placement.FitCount(request, free, limit)
}

// fits reports whether domain k of level l holds every bound shape, each
// counted alone: necessary for the whole gang, and sufficient for one shape.
func (u *usage) fits(l int, k int32) bool {
	for s := range u.bound {
		if u.slots[s][l][k] < u.want[s] {
			return false
		}
	}
	return true
}

// fitting lists the domains of level l that fit (see fits), in tree order,
// into out, with scratch as a second buffer; it returns both for reuse. A
// domain's slots are the sums of its children's, so a domain inside one
// that does not fit does not fit either: the search descends from the
// cluster through fitting domains only, and a level where few domains fit
// costs their children, not every domain of the levels below.
func (u *usage) fitting(l int, out, scratch []int32) (fit, buf []int32) {
	t := u.tree
	out = out[:0]
	if !u.fits(t.top(), 0) {
		return out, scratch
	}
	out = append(out, 0)
	for m := t.top(); m > l; m-- {
		scratch = scratch[:0]
		for _, k := range out {
			for c := t.dom[m][k].first; c < t.dom[m][k].end; c++ {
				if u.fits(m-1, c) {
					scratch = append(scratch, c)
				}
			}
		}
		out, scratch = scratch, out
	}
	return out, scratch
}

// roomFor is how many bound members domain k of level l could hold, each
// shape counted alone: the numbers fit errors report.
func (u *usage) roomFor(l int, k int32) int64 {
	var n int64
	for s := range u.bound {
		n += min(u.slots[s][l][k], u.want[s])
	}
	return n
}

// freeAt is the free capacity of the node at depth-first position p.
func (u *usage) freeAt(p int32) placement.Vector {
	if u.free != nil && u.free[p] != nil {
		return u.free[p]
	}
	return u.req.Nodes[u.tree.node[p]].Free
}

// take records n copies of request placed on the node at position p and
// reports whether this was the node's first write.
func (u *usage) take(p int32, request placement.Vector, n int64) bool {
	if u.free == nil {
		u.free = make([]placement.Vector, len(u.req.Nodes))
	}
	first := u.free[p] == nil
	if first {
		u.free[p] = u.freeAt(p).Clone()
	}
	f := u.free[p]
	for d, q := range request {
		f[d] -= q * n
	}
	return first
}

// eligibleAt reports whether members of sh may run on the node at p.
func (u *usage) eligibleAt(sh *shape, p int32) bool {
	return sh.eligible == nil || sh.eligible[u.tree.node[p]]
}

// bestFit returns fit, measuring the Request's nodes on first use.
func (u *usage) bestFit() placement.BestFit {
	if !u.fitted {
		u.fit, u.fitted = placement.NewBestFit(u.req), true
	}
	return u.fit
}

// weights turns the spans of a placement inside a domain of level top —
// how many domains it uses at each level below — into one number that orders
// like the span vector read from the loosest level down. The count at level l
// never exceeds bound(l) = min(members, domains at l), so level l is a digit
// of radix bound(l)+1. Should the digits not fit in 62 bits, the tightest
// levels drop out of the objective (weight 0) and exact is false.
func (u *usage) weights(top int) (w []uint64, exact bool) {
	w = make([]uint64, top+1)
	for drop := 0; ; drop++ {
		clear(w)
		w[drop] = 1
		l := drop
		for ; l < top; l++ {
			radix := uint64(min(u.total, int64(len(u.tree.dom[l])))) + 1
			if w[l] > (1<<62)/radix {
				break
			}
			w[l+1] = w[l] * radix
		}
		if l == top { // always so once drop reaches top
			return w, drop == 0
		}
	}
}

// costOf scores a placement with weights w: sum over levels of spans times
// weight.
func costOf(spans []int, w []uint64) uint64 {
	var c uint64
	for l := range min(len(spans), len(w)-1) {
		c += uint64(spans[l]) * w[l]
	}
	return c
}

// describeCost turns a cost back into spans, for logs.
func (u *usage) describeCost(top int, w []uint64, cost uint64) string {
	if cost == math.MaxUint64 {
		return "does not pack"
	}
	var s []byte
	for l := top - 1; l >= 0; l-- {
		if w[l] == 0 {
			continue
		}
		radix := w[l+1] / w[l]
		if len(s) > 0 {
			s = append(s, ' ')
		}
		s = fmt.Appendf(s, "%s=%d", u.tree.levels[l].Name, cost/w[l]%radix)
	}
	if len(s) == 0 {
		return "one node"
	}
	return string(s)
}
