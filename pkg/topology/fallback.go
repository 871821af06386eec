package topology

import (
	"cmp"
	"slices"
	"sort"
)

// greedyPack places the bound members inside domain k of level l without
// the exact packer, for gangs whose exact search would cost too much (see
// defaultBudget) or that have too many distinct shapes. At every domain it
// fills the roomiest children first until what is left fits in one child,
// then takes the tightest child that holds the rest. Its spans are not
// proven minimal. It reports false when the members do not all fit, and
// leaves u.free as it found it either way.
func (u *usage) greedyPack(l int, k int32) ([]placed, bool) {
	g := &greedy{u: u, need: slices.Clone(u.want), left: u.total}
	g.order = make([]int, len(u.bound))
	for s := range g.order {
		g.order[s] = s
	}
	// Largest shapes first: small ones fill the gaps they leave.
	slices.SortStableFunc(g.order, func(a, b int) int {
		fit := u.bestFit()
		return cmp.Compare(fit.Size(u.bound[b].request), fit.Size(u.bound[a].request))
	})
	g.fill(l, k)
	for _, p := range g.touched {
		u.free[p] = nil
	}
	return g.out, g.left == 0
}

type greedy struct {
	u *usage
	// need[s] members of shape s are still to place; left is their sum.
	need  []int64
	left  int64
	order []int
	out   []placed
	// touched are the positions whose overlay this run created.
	touched []int32
}

func (g *greedy) fill(l int, k int32) {
	if g.left == 0 {
		return
	}
	if l == 0 {
		g.fillNode(k)
		return
	}
	u := g.u
	d := &u.tree.dom[l][k]
	room := u.room[l-1]
	kids := make([]int32, 0, d.end-d.first)
	for c := d.first; c < d.end; c++ {
		if room[c] > 0 {
			kids = append(kids, c)
		}
	}
	// Roomiest first; equal room in domain order.
	slices.SortFunc(kids, func(a, b int32) int {
		if c := cmp.Compare(room[b], room[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	used := make([]bool, len(kids))
	front := 0 // kids before front are all used
	for g.left > 0 {
		// A child that covers what is left has at least that much room, so
		// it sits before the first child with less; the tightest such
		// child is the last unused one there.
		last := sort.Search(len(kids), func(i int) bool { return room[kids[i]] < g.left }) - 1
		pick := -1
		for j := last; j >= front; j-- {
			if !used[j] && g.covers(l-1, kids[j]) {
				pick = j
				break
			}
		}
		if pick < 0 {
			for front < len(kids) && used[front] {
				front++
			}
			if front == len(kids) {
				return
			}
			pick = front
		}
		used[pick] = true
		g.fill(l-1, kids[pick])
	}
}

// covers reports whether domain k of level l has slots for all that is
// left, each shape counted alone.
func (g *greedy) covers(l int, k int32) bool {
	for s, n := range g.need {
		if g.u.slots[s][l][k] < n {
			return false
		}
	}
	return true
}

func (g *greedy) fillNode(p int32) {
	u := g.u
	for _, s := range g.order {
		sh := &u.bound[s]
		if g.need[s] == 0 || !u.eligibleAt(sh, p) {
			continue
		}
		n := fitCount(sh.request, u.freeAt(p), min(g.need[s], sh.perNode))
		if n == 0 {
			continue
		}
		if u.take(p, sh.request, n) {
			g.touched = append(g.touched, p)
		}
		g.out = append(g.out, placed{pos: p, shape: int32(s), count: int32(n)})
		g.need[s] -= n
		g.left -= n
	}
}
