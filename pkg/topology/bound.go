package topology

import (
	"fmt"
	"slices"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// LowerBound returns, for every label level (loosest first) and then for
// nodes, the fewest domains that could together hold the members of req that
// are bound by topology, given the free capacity in req. Each level and each
// request shape is bounded on its own, so no plan can beat it, though the
// best plan may not reach it. A simulator reports a plan's Spans against it.
// It fails with a *placement.FitError when the whole cluster cannot hold
// them. req must hold the nodes the tree was built from.
func (t *Tree) LowerBound(req *placement.Request) ([]LevelSpan, error) {
	u, err := newUsage(t, req)
	if err != nil {
		return nil, err
	}
	counts := make([]int, t.top())
	if len(u.bound) > 0 {
		if !u.fits(t.top(), 0) {
			return nil, u.clusterFitError()
		}
		var scratch []int64
		for l := range counts {
			counts[l], scratch = u.minCover(l, 0, int32(len(t.dom[l])), scratch)
		}
	}
	return t.levelSpans(counts), nil
}

// lowerCost bounds from below the cost (see weights) of any placement of
// the bound members inside domain k of level top.
func (u *usage) lowerCost(top int, k int32, w []uint64, scratch []int64) (uint64, []int64) {
	t := u.tree
	d := &t.dom[top][k]
	var cost uint64
	for l := top - 1; l >= 0; l-- {
		if w[l] == 0 {
			continue
		}
		var n int
		n, scratch = u.minCover(l, t.anc[l][d.lo], t.anc[l][d.hi-1]+1, scratch)
		cost += uint64(n) * w[l]
	}
	return cost, scratch
}

// minCover is how few of the domains first..end-1 of level l hold the bound
// members: per shape, the fewest domains whose slots add up to what the
// shape wants, roomiest first; then the most any shape needs. The caller
// has checked that all of them together hold the gang.
func (u *usage) minCover(l int, first, end int32, scratch []int64) (int, []int64) {
	most := 0
	for s := range u.bound {
		// Empty domains (most, in a busy cluster) are left out of the sort;
		// they count only if the rest fall short.
		scratch = scratch[:0]
		for _, n := range u.slots[s][l][first:end] {
			if n != 0 {
				scratch = append(scratch, n)
			}
		}
		empty := int(end-first) - len(scratch)
		slices.Sort(scratch)
		need, n := u.want[s], 0
		for i := len(scratch) - 1; i >= 0 && need > 0; i-- {
			need -= scratch[i]
			n++
		}
		if need > 0 {
			n += empty
		}
		most = max(most, n)
	}
	return most, scratch
}

// clusterFitError says that the whole cluster cannot hold the first bound
// shape that does not fit.
func (u *usage) clusterFitError() *placement.FitError {
	top := u.tree.top()
	for s := range u.bound {
		if have := u.slots[s][top][0]; have < u.want[s] {
			return &placement.FitError{
				Placed: int(u.roomFor(top, 0)),
				Wanted: len(u.req.Members),
				Reason: fmt.Sprintf("the cluster has room for %d of the %d pods asking %s",
					have, u.want[s], placement.Describe(u.req.Resources, u.bound[s].request)),
			}
		}
	}
	return nil
}
