package topology

import (
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// JointLowerBound returns, for every label level (loosest first) and then
// for nodes, the domains spanned by the best placement of the members of req
// that are bound by topology, read lexicographically: the fewest domains of
// the loosest level (spines); among placements that use that many, the
// fewest of the next level (leaves); and so on down to nodes. No placement
// compares below it, loosest level first.
//
// LowerBound bounds each level on its own, and those bounds cannot always be
// met together: a gang may fit in three leaves only by crossing two spines,
// while inside one spine it needs four. A simulator that counts each level
// against LowerBound charges the one-spine placement an extra leaf; against
// the joint bound it is exact.
//
// For members of one shape (the same request and eligibility) the bound is
// the optimum itself, found by a dynamic program over the tree: the cheapest
// span vector for each number of members a domain could take, combined
// child by child. With several shapes it is the greatest of the shapes'
// optima, each shape placed alone: a placement of the whole gang restricted
// to one shape spans no more domains at any level, so it compares no lower.
// It fails with a *placement.FitError when the whole cluster cannot hold the
// members. req must hold the nodes the tree was built from.
func (t *Tree) JointLowerBound(req *placement.Request) ([]LevelSpan, error) {
	u, err := newUsage(t, req)
	if err != nil {
		return nil, err
	}
	best := make(spanVector, t.top())
	if len(u.bound) > 0 {
		if !u.fits(t.top(), 0) {
			return nil, u.clusterFitError()
		}
		for s := range u.bound {
			if v := u.jointOptimum(s); v.compare(best) > 0 {
				best = v
			}
		}
	}
	return t.levelSpans(best), nil
}

// spanVector counts domains per tree level below the cluster, indexed as
// the tree's levels (0 is nodes). It orders lexicographically from the
// loosest level down.
type spanVector []int

// compare returns -1, 0 or 1 as v spans fewer, as many or more domains than
// w, loosest level first.
func (v spanVector) compare(w spanVector) int {
	for l := len(v) - 1; l >= 0; l-- {
		switch {
		case v[l] < w[l]:
			return -1
		case v[l] > w[l]:
			return 1
		}
	}
	return 0
}

// costTable holds, for one domain, the least span vector of any placement
// of exactly m members of one shape inside it, for m from 0 to its length
// minus one: a placement can always take fewer members than the domain's
// slots, so every entry up to min(slots, want) is reachable.
type costTable struct {
	levels int
	// cost[m*levels : (m+1)*levels] is the vector for m members.
	cost []int
}

func (c *costTable) size() int           { return len(c.cost) / c.levels }
func (c *costTable) at(m int) spanVector { return c.cost[m*c.levels : (m+1)*c.levels] }
func newCostTable(levels, size int) costTable {
	return costTable{levels: levels, cost: make([]int, levels*size)}
}

// jointOptimum is the lexicographically least span vector of a placement
// of every member of bound shape s alone, bottom up over the tree. The
// caller has checked that the cluster holds them.
func (u *usage) jointOptimum(s int) spanVector {
	t := u.tree
	levels := t.top()
	want := int(u.want[s])
	slots := u.slots[s]

	// Level 0: a node holds up to its slots, and spans itself.
	below := make([]costTable, len(t.dom[0]))
	for p := range below {
		n := min(int(slots[0][p]), want)
		below[p] = newCostTable(levels, n+1)
		for m := 1; m <= n; m++ {
			below[p].at(m)[0] = 1
		}
	}
	for l := 1; l <= levels; l++ {
		above := make([]costTable, len(t.dom[l]))
		for k, d := range t.dom[l] {
			// Combine the children one after another: acc[m] is the best
			// way to put m members into the children seen so far.
			acc := newCostTable(levels, 1)
			trial := make(spanVector, levels)
			for c := d.first; c < d.end; c++ {
				child := &below[c]
				size := min(acc.size()+child.size()-1, want+1)
				next := newCostTable(levels, size)
				set := make([]bool, size)
				for a := range acc.size() {
					for b := range child.size() {
						m := a + b
						if m >= size {
							break
						}
						for i := range trial {
							trial[i] = acc.at(a)[i] + child.at(b)[i]
						}
						if !set[m] || trial.compare(next.at(m)) < 0 {
							copy(next.at(m), trial)
							set[m] = true
						}
					}
				}
				acc = next
			}
			// A domain that holds members spans itself; the cluster is not
			// counted.
			if l < levels {
				for m := 1; m < acc.size(); m++ {
					acc.at(m)[l]++
				}
			}
			above[k] = acc
		}
		below = above
	}
	return append(spanVector(nil), below[0].at(want)...)
}
