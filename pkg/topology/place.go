package topology

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// assignRanks hands the chosen slots to bound members. Slots are taken in
// depth-first order of the tree and members of each shape in rank order, so
// neighbouring ranks share a node, then a clique, then a leaf. It sorts pl.
func (u *usage) assignRanks(pl []placed, nodeOf []int) {
	slices.SortFunc(pl, func(a, b placed) int {
		if c := cmp.Compare(a.pos, b.pos); c != 0 {
			return c
		}
		return cmp.Compare(a.shape, b.shape)
	})
	next := make([]int, len(u.bound))
	for _, p := range pl {
		sh := &u.bound[p.shape]
		node := int(u.tree.node[p.pos])
		for range p.count {
			nodeOf[sh.members[next[p.shape]]] = node
			next[p.shape]++
		}
	}
}

// placeLoose places the members that topology does not bind, such as an MPI
// launcher, after the bound ones (pl) hold their slots. Nodes are tried in
// tiers: those the gang already uses, then the rest of its domain (positions
// lo..hi-1), then any; within a tier best fit first, filling a node before
// moving on. It returns the positions it used, sorted.
func (u *usage) placeLoose(pl []placed, lo, hi int32, nodeOf []int) ([]int32, error) {
	if len(u.loose) == 0 {
		return nil, nil
	}
	t := u.tree
	used := make([]int32, 0, len(pl))
	for _, p := range pl {
		u.take(p.pos, u.bound[p.shape].request, int64(p.count))
		used = append(used, p.pos)
	}
	slices.Sort(used)
	used = slices.Compact(used)
	tiers := [3]func(yield func(int32)){
		func(yield func(int32)) {
			for _, p := range used {
				yield(p)
			}
		},
		func(yield func(int32)) {
			for p := lo; p < hi; p++ {
				if _, in := slices.BinarySearch(used, p); !in {
					yield(p)
				}
			}
		},
		func(yield func(int32)) {
			for p := range int32(len(t.dom[0])) {
				if p < lo || p >= hi {
					yield(p)
				}
			}
		},
	}
	type cand struct {
		pos   int32
		spare float64
	}
	var out []int32
	var cands []cand
	fit := u.bestFit()
	done := int(u.total)
	for i := range u.loose {
		sh := &u.loose[i]
		next := 0
		for _, tier := range tiers {
			if next == len(sh.members) {
				break
			}
			cands = cands[:0]
			tier(func(p int32) {
				if u.eligibleAt(sh, p) && fitCount(sh.request, u.freeAt(p), 1) == 1 {
					cands = append(cands, cand{pos: p, spare: fit.SpareAfter(sh.request, u.freeAt(p))})
				}
			})
			slices.SortFunc(cands, func(a, b cand) int {
				if c := cmp.Compare(a.spare, b.spare); c != 0 {
					return c
				}
				return cmp.Compare(a.pos, b.pos)
			})
			for _, c := range cands {
				n := fitCount(sh.request, u.freeAt(c.pos), min(int64(len(sh.members)-next), sh.perNode))
				u.take(c.pos, sh.request, n)
				node := int(t.node[c.pos])
				for range n {
					nodeOf[sh.members[next]] = node
					next++
				}
				out = append(out, c.pos)
				if next == len(sh.members) {
					break
				}
			}
		}
		if next < len(sh.members) {
			m := &u.req.Members[sh.members[next]]
			return nil, &placement.FitError{
				Placed: done + next,
				Wanted: len(u.req.Members),
				Reason: fmt.Sprintf("no node has %s free for %s", placement.Describe(u.req.Resources, m.Request), m.Name),
			}
		}
		done += next
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
