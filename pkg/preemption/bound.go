package preemption

// The lower bound that cuts the search: what any set extending the
// current one must cost at least (bound), how few items can cover a
// shape's need (cover), and whether the incumbent already wins (prune).
// It reads the domain's prefix and suffix sums that setup computes, and
// must never exceed the true cost, or the search would cut the set the
// cost order picks.

// bound is a lower bound, in the cost order, on the cost of every set that
// extends the current one with items from items[j:] and fits, and false
// when none fits. The extension needs at least m more items (the largest
// gains left cannot cover the need with fewer), of which at least w whole
// units (the elastic members left cannot cover the rest). Violations,
// gangs and elastic members are bounded field by field. For the fields
// after them: where items[j:] are all whole units, they are sorted by
// priority, unmovable work, work and GPUs, the cost's own fields in its
// order, so the next m are the cheapest m in the cost order and any
// extension of m or more items costs at least as much; elsewhere each of
// the m adds at least the least priority, unmovable work, work and GPUs
// left. Either way no field of the bound exceeds the true one before the
// first field where the bound is smaller, so neither does the bound.
func (ds *domainSearch) bound(j int) (cost, bool) {
	ns := len(ds.p.shapes)
	lb := ds.c
	var m, w int64
	for s, need := range ds.need {
		if need <= 0 {
			continue
		}
		o := j*ns + s
		if ds.sufSum[o] < need {
			return lb, false
		}
		n, ok := ds.cover(s, j, need)
		if !ok {
			return lb, false
		}
		m = max(m, n)
		if rest := need - ds.sufElastic[o]; rest > 0 {
			n, ok := ds.cover(s, max(j, ds.firstWhole), rest)
			if !ok {
				return lb, false
			}
			w = max(w, n)
		}
	}
	m = max(m, w)
	lb.gangs += w
	switch {
	case m == 0:
	case j >= ds.firstWhole:
		end := j + int(m)
		if end > len(ds.items) {
			return lb, false
		}
		lb.maxPrio = max(lb.maxPrio, int64(ds.p.items[ds.items[end-1]].prio))
		lb.sumPrio += ds.preSum[end] - ds.preSum[j]
		lb.unmovable += ds.preUnmovable[end] - ds.preUnmovable[j]
		lb.work += ds.preWork[end] - ds.preWork[j]
		lb.gpus += ds.preGPU[end] - ds.preGPU[j]
	default:
		lb.maxPrio = max(lb.maxPrio, ds.sufMinPrio[j])
		lb.sumPrio += m * (ds.sufMinPrio[j] + priorityOffset)
		lb.unmovable += m * ds.sufMinUnmovable[j]
		lb.work += m * ds.sufMinWork[j]
		lb.gpus += m * ds.sufMinGPU[j]
	}
	return lb, true
}

// cover is how few of items[from:] can add need slots to shape s, taking
// the largest gains first, and false when all of them cannot.
func (ds *domainSearch) cover(s, from int, need int64) (int64, bool) {
	n := len(ds.items)
	var count int64
	for _, x := range ds.byGain[s*n : (s+1)*n] {
		ds.p.work++
		if int(x) < from {
			continue
		}
		g := ds.gain[int(x)*len(ds.p.shapes)+s]
		if g == 0 {
			break
		}
		need -= g
		count++
		if need <= 0 {
			return count, true
		}
	}
	return count, false
}

// prune reports whether no extension of the current set by items[j:] can
// beat the incumbent.
func (ds *domainSearch) prune(j int) bool {
	lb, ok := ds.bound(j)
	if !ok {
		return true
	}
	best := ds.p.best
	if best == nil {
		return false
	}
	switch c := lb.compare(&best.cost); {
	case c > 0:
		return true
	case c < 0:
		return false
	}
	return tieLost(ds.chosen, best.items, ds.items[j])
}
