package topology

import (
	"cmp"
	"math"
	"slices"
)

// The exact packer is a dynamic program over the tree. For a domain d and a
// count vector r (members of each bound shape), cost(d, r) is the least
// weighted span (see weights) of any placement of r inside d: a node costs
// its weight if r fits on it, a domain costs its weight plus the cheapest way
// to split r among its children, found by merging the children's tables one
// by one (a knapsack whose items are sub-domains). Because every span is a
// digit of the cost, the cheapest placement uses the fewest domains at the
// loosest level, then the fewest at the next, down to nodes.
//
// Ties keep the first split found. Children are merged tightest (least room)
// first and, for a fixed total, splits are tried with as little as possible in
// the later child, so among equal spans the gang fills tight domains and
// leaves roomy ones whole: best fit.

const (
	// maxShapes bounds the bound shapes the exact packer takes; gangs have
	// one or two.
	maxShapes = 4
	// maxStates bounds one table of a gang with several bound shapes.
	maxStates = 1 << 16
	// defaultBudget bounds the exact packer's work per Plan call, in table
	// cell updates (about a nanosecond each). Past it the greedy packer
	// takes over, so one odd gang cannot stall the scheduler.
	defaultBudget = 30_000_000

	inf = math.MaxUint64
)

// box is the table shape of a domain: 0..dim[s] members of each shape s,
// numbered in mixed radix.
type box struct {
	dim, stride [maxShapes]int32
	size        int32
}

// decode writes the member counts of table index i to c.
func (b *box) decode(i int32, n int, c *[maxShapes]int32) {
	for s := range n {
		c[s] = i / b.stride[s] % (b.dim[s] + 1)
	}
}

// encode is the table index of counts c, which must fit in b.
func (b *box) encode(n int, c *[maxShapes]int32) int32 {
	var i int32
	for s := range n {
		i += c[s] * b.stride[s]
	}
	return i
}

func (b *box) init(n int) {
	b.size = 1
	for s := range n {
		b.stride[s] = b.size
		b.size *= b.dim[s] + 1
	}
}

// step is one child merged into a domain's table: choice[i] is the child's
// table index in the best split of state i of the merged table. A domain's
// steps interleave with its descendants', so each links to the domain's
// previous step.
type step struct {
	child           int32
	childBox, toBox box
	choice          int32 // offset into packer.choices
	prev            int32 // the domain's previous step; -1 for its first
}

// packer runs the exact packer for one candidate domain at a time. Its
// buffers are reused across candidates and, through the Planner's pool,
// across calls; nothing in it outlives the call that reset it.
type packer struct {
	u *usage
	n int
	w []uint64
	// budget is the work the caller allows; work counts cell updates;
	// aborted is set once work passes budget.
	budget, work int64
	aborted      bool

	vals    arena
	choices []int32
	steps   []step
	kids    []int32
	coords  []int32
	// lastStep[l][k] is the last step of domain k of level l (-1 for
	// none). Only entries of domains solved since the last reset are
	// meaningful.
	lastStep [][]int32
}

func (pk *packer) reset(u *usage, w []uint64, budget int64) {
	pk.u, pk.n, pk.w = u, len(u.bound), w
	pk.budget, pk.work, pk.aborted = budget, 0, false
	pk.vals.reset()
	pk.choices, pk.steps, pk.kids = pk.choices[:0], pk.steps[:0], pk.kids[:0]
	dom := u.tree.dom
	if len(pk.lastStep) != len(dom) {
		pk.lastStep = make([][]int32, len(dom))
	}
	for l := range dom {
		if len(pk.lastStep[l]) < len(dom[l]) {
			pk.lastStep[l] = make([]int32, len(dom[l]))
		}
	}
}

// boxOf is the table shape of domain k of level l.
func (pk *packer) boxOf(l int, k int32) box {
	var b box
	for s := range pk.n {
		b.dim[s] = int32(min(pk.u.want[s], pk.u.slots[s][l][k]))
	}
	b.init(pk.n)
	return b
}

// evaluate returns the least cost of placing the whole gang inside domain k
// of level l, not counting k itself; inf when the shapes do not pack there.
// It is meaningless once aborted is set.
func (pk *packer) evaluate(l int, k int32) uint64 {
	var costs []uint64
	var b box
	if l == 0 {
		b = pk.boxOf(0, k)
		costs = pk.nodeCosts(k, b)
	} else {
		costs, b = pk.solveKids(l, k)
		if pk.aborted {
			return inf
		}
	}
	var c [maxShapes]int32
	for s := range pk.n {
		c[s] = int32(pk.u.want[s])
	}
	v := costs[b.encode(pk.n, &c)]
	if l == 0 && v != inf {
		v = 0
	}
	return v
}

// solve returns the cost table of domain k of level l, its own weight
// included.
func (pk *packer) solve(l int, k int32) ([]uint64, box) {
	if l == 0 {
		b := pk.boxOf(0, k)
		return pk.nodeCosts(k, b), b
	}
	acc, b := pk.solveKids(l, k)
	if pk.aborted {
		return nil, b
	}
	for i := 1; i < len(acc); i++ {
		if acc[i] != inf {
			acc[i] += pk.w[l]
		}
	}
	return acc, b
}

// solveKids merges the tables of the children of domain k of level l.
func (pk *packer) solveKids(l int, k int32) ([]uint64, box) {
	u := pk.u
	d := &u.tree.dom[l][k]
	room := u.room[l-1]
	base := len(pk.kids)
	for c := d.first; c < d.end; c++ {
		if room[c] > 0 {
			pk.kids = append(pk.kids, c)
		}
	}
	slices.SortFunc(pk.kids[base:], func(a, b int32) int {
		if c := cmp.Compare(room[a], room[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	nk := len(pk.kids) - base

	var ab box
	ab.init(pk.n)
	acc := pk.vals.alloc(1)
	acc[0] = 0
	last := int32(-1)
	for i := range nk {
		c := pk.kids[base+i] // re-read: the recursion may grow kids
		var fc []uint64
		var cb box
		if l == 1 && pk.n == 1 {
			cb = pk.boxOf(0, c) // a node's table is implicit for one shape
		} else {
			fc, cb = pk.solve(l-1, c)
			if pk.aborted {
				return nil, ab
			}
		}
		acc, ab = pk.merge(acc, ab, fc, cb, c)
		if pk.aborted {
			return nil, ab
		}
		pk.steps[len(pk.steps)-1].prev = last
		last = int32(len(pk.steps) - 1)
	}
	pk.kids = pk.kids[:base]
	pk.lastStep[l][k] = last
	return acc, ab
}

// nodeCosts is the cost table of the node at position p: its weight for
// every count vector that fits on it together.
func (pk *packer) nodeCosts(p int32, b box) []uint64 {
	out := pk.vals.alloc(int(b.size))
	out[0] = 0
	if pk.n == 1 {
		for i := 1; i < len(out); i++ {
			out[i] = pk.w[0]
		}
		return out
	}
	free := pk.u.freeAt(p)
	var c [maxShapes]int32
	for i := int32(1); i < b.size; i++ {
		b.decode(i, pk.n, &c)
		out[i] = pk.w[0]
		for dim := range free {
			var need int64
			for s := range pk.n {
				need += int64(c[s]) * pk.u.bound[s].request[dim]
			}
			if need > free[dim] {
				out[i] = inf
				break
			}
		}
	}
	pk.work += int64(b.size) * int64(pk.n*len(free))
	return out
}

// merge folds the table fc of child c into acc: out[r] is the least
// acc[r-t] + fc[t]. fc is nil for a node under one shape, whose table is
// implicit.
func (pk *packer) merge(acc []uint64, ab box, fc []uint64, cb box, c int32) ([]uint64, box) {
	var nb box
	for s := range pk.n {
		nb.dim[s] = int32(min(pk.u.want[s], int64(ab.dim[s]+cb.dim[s])))
	}
	nb.init(pk.n)
	if nb.size > maxStates && pk.n > 1 {
		pk.aborted = true
		return nil, nb
	}
	out := pk.vals.alloc(int(nb.size))
	for i := range out {
		out[i] = inf
	}
	off := len(pk.choices)
	pk.choices = slices.Grow(pk.choices, int(nb.size))[:off+int(nb.size)]
	ch := pk.choices[off:]

	if pk.n == 1 {
		pk.merge1(out, ch, acc, ab.dim[0], fc, cb.dim[0], nb.dim[0])
	} else {
		pk.mergeN(out, ch, acc, &ab, fc, &cb, &nb)
	}
	pk.work += int64(ab.size) * int64(cb.size)
	if pk.work > pk.budget {
		pk.aborted = true
	}
	pk.steps = append(pk.steps, step{child: c, childBox: cb, toBox: nb, choice: int32(off)})
	return out, nb
}

// merge1 is merge for one shape, the common case, kept tight.
func (pk *packer) merge1(out []uint64, ch []int32, acc []uint64, na int32, fc []uint64, nc, nn int32) {
	for t := int32(0); t <= nc; t++ {
		var ft uint64
		switch {
		case fc != nil:
			ft = fc[t]
		case t > 0:
			ft = pk.w[0]
		}
		if ft == inf {
			continue
		}
		hi := min(na, nn-t)
		for a := int32(0); a <= hi; a++ {
			va := acc[a]
			if va == inf {
				continue
			}
			if v := va + ft; v < out[a+t] {
				out[a+t], ch[a+t] = v, t
			}
		}
	}
}

// mergeN is merge for several shapes.
func (pk *packer) mergeN(out []uint64, ch []int32, acc []uint64, ab *box, fc []uint64, cb, nb *box) {
	n := pk.n
	// Precompute each acc state's counts and its index in nb.
	pk.coords = slices.Grow(pk.coords[:0], int(ab.size)*(n+1))[:int(ab.size)*(n+1)]
	var c [maxShapes]int32
	for a := range ab.size {
		ab.decode(a, n, &c)
		row := pk.coords[int(a)*(n+1):]
		copy(row, c[:n])
		row[n] = nb.encode(n, &c)
	}
	var tc [maxShapes]int32
	for t := range cb.size {
		ft := fc[t]
		if ft == inf {
			continue
		}
		cb.decode(t, n, &tc)
		tIdx := nb.encode(n, &tc)
	next:
		for a := range ab.size {
			va := acc[a]
			if va == inf {
				continue
			}
			row := pk.coords[int(a)*(n+1):]
			for s := range n {
				if row[s]+tc[s] > nb.dim[s] {
					continue next
				}
			}
			i := row[n] + tIdx
			if v := va + ft; v < out[i] {
				out[i], ch[i] = v, t
			}
		}
	}
}

// assign walks the recorded choices down from state i of domain k of level
// l and appends what lands on each node.
func (pk *packer) assign(l int, k int32, i int32, b box, out []placed) []placed {
	if i == 0 {
		return out
	}
	var c [maxShapes]int32
	if l == 0 {
		b.decode(i, pk.n, &c)
		for s := range pk.n {
			if c[s] > 0 {
				out = append(out, placed{pos: k, shape: int32(s), count: c[s]})
			}
		}
		return out
	}
	var tc [maxShapes]int32
	for j := pk.lastStep[l][k]; j >= 0; j = pk.steps[j].prev {
		st := &pk.steps[j]
		t := pk.choices[st.choice+i]
		out = pk.assign(l-1, st.child, t, st.childBox, out)
		// Step back to the table before this child.
		st.toBox.decode(i, pk.n, &c)
		st.childBox.decode(t, pk.n, &tc)
		for s := range pk.n {
			c[s] -= tc[s]
		}
		var prev box
		if st.prev >= 0 {
			prev = pk.steps[st.prev].toBox
		} else {
			prev.init(pk.n)
		}
		i = prev.encode(pk.n, &c)
	}
	return out
}

// arena hands out uint64 slices that stay valid until reset. Growing starts
// a new block rather than moving the old one, so slices already handed out
// keep their contents.
type arena struct {
	buf []uint64
}

func (a *arena) alloc(n int) []uint64 {
	if len(a.buf)+n > cap(a.buf) {
		a.buf = make([]uint64, 0, max(n, 2*cap(a.buf), 1<<12))
	}
	s := a.buf[len(a.buf) : len(a.buf)+n : len(a.buf)+n]
	a.buf = a.buf[:len(a.buf)+n]
	return s
}

func (a *arena) reset() { a.buf = a.buf[:0] }
