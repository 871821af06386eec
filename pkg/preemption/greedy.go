package preemption

import (
	"cmp"
	"slices"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// greedy finds a good set fast, to seed the incumbent: it adds the item
// that adds most slots now (one that violates no budget before one that
// does, an elastic member before a whole unit, then canonical order) until
// the preemptor fits, then drops, most expensive first, every item the fit
// does not need. Past the work budget it picks with quickPick instead, and
// for requests the planner must confirm it gives up rather than plan at
// every step.
func (ds *domainSearch) greedy() {
	p := ds.p
	if len(ds.scratch) < p.dims {
		ds.scratch = make([]int64, p.dims)
	}
	cursor := 0
	for !ds.fitsVerified() {
		over := p.work >= p.budget
		if ds.err != nil || over && !p.simple {
			// Past the budget, planning every step would cost too much.
			ds.undo()
			return
		}
		var j int
		if over {
			j = ds.quickPick(&cursor)
		} else {
			j = ds.greedyPick()
		}
		if j < 0 {
			ds.undo()
			return
		}
		ds.include(ds.items[j])
	}
	// include appends, so chosen is in pick order; drop from the end of
	// canonical order.
	order := slices.Clone(ds.chosen)
	slices.SortFunc(order, func(a, b int32) int { return cmp.Compare(b, a) })
	for _, id := range order {
		if !p.simple && p.work >= p.budget {
			break
		}
		ds.remove(id)
		if !ds.fitsVerified() {
			ds.include(id)
		}
	}
	if ds.err == nil {
		ids := slices.Clone(ds.chosen)
		slices.Sort(ids)
		ds.offer(ids)
	}
	ds.undo()
}

// fitsVerified reports whether the current set fits; for requests that are
// not simple the planner must agree.
func (ds *domainSearch) fitsVerified() bool {
	if !ds.fits() {
		return false
	}
	if ds.p.simple {
		return true
	}
	ids := slices.Clone(ds.chosen)
	slices.Sort(ids)
	_, ok, err := ds.p.verify(ds.ctx, ids, ds.l)
	if err != nil {
		ds.err = err
		return false
	}
	return ok
}

// greedyPick chooses the next item for greedy, or -1 when none is left.
func (ds *domainSearch) greedyPick() int {
	p := ds.p
	ns := len(p.shapes)
	best := -1
	var bestKey [4]int64 // larger is better: useful, no violation, elastic, gain
	for j, id := range ds.items {
		if p.inSet[id] || !p.allowed(id) {
			continue
		}
		it := &p.items[id]
		var bound, total int64 // what it adds now at most; its gain bound
		for s := range ns {
			g := ds.gain[j*ns+s]
			total += g
			bound += min(g, max(0, ds.need[s]))
		}
		key := [4]int64{1, 1, 0, bound}
		if ds.violates(it) {
			key[1] = 0
		}
		if !it.isWhole() {
			key[2] = 1
		}
		if best >= 0 && slices.Compare(key[:], bestKey[:]) <= 0 {
			continue // it cannot win even if it adds all it might
		}
		if key[3] = ds.marginal(it); key[3] == 0 {
			key[0], key[2], key[3] = 0, 0, total
		}
		if best < 0 || slices.Compare(key[:], bestKey[:]) > 0 {
			best, bestKey = j, key
		}
	}
	return best
}

// quickPick is greedyPick past the budget, at a cost linear in the items
// over the whole greedy pass: it walks the items by their gain bound for the
// neediest shape, from cursor on, and takes the first that adds a slot now.
// When none is left it takes the first that may join at all and starts the
// walk over.
func (ds *domainSearch) quickPick(cursor *int) int {
	p := ds.p
	s := 0
	for t, need := range ds.need {
		if need > ds.need[s] {
			s = t
		}
	}
	n := len(ds.items)
	list := ds.byGain[s*n : (s+1)*n]
	fallback := -1
	for ; *cursor < n; *cursor++ {
		j := int(list[*cursor])
		id := ds.items[j]
		if p.inSet[id] || !p.allowed(id) {
			continue
		}
		if ds.marginal(&p.items[id]) > 0 {
			*cursor++
			return j
		}
		if fallback < 0 {
			fallback = j
		}
	}
	*cursor = 0
	return fallback
}

// marginal is how many of the still needed slots item it would add now.
func (ds *domainSearch) marginal(it *item) int64 {
	p := ds.p
	dims := p.dims
	var total int64
	for s := range p.shapes {
		if ds.need[s] <= 0 {
			continue
		}
		var g int64
		for i, pos := range it.pos {
			if pos < ds.lo || pos >= ds.hi {
				continue
			}
			f := ds.scratch[:dims]
			copy(f, p.free[int(pos)*dims:int(pos+1)*dims])
			placement.Vector(f).Add(it.freed[i*dims : (i+1)*dims])
			g += p.slotsFor(s, int(pos), f) - p.slots[s][pos]
		}
		total += min(g, ds.need[s])
		p.work += int64(len(it.pos))
	}
	return total
}

// violates reports whether adding it would evict beyond some budget.
func (ds *domainSearch) violates(it *item) bool {
	p := ds.p
	for _, h := range it.pdbs {
		if p.pdbCount[h.pdb]+int64(h.pods) > int64(p.req.PDBs[h.pdb].Allowed) {
			return true
		}
	}
	return false
}

// remove takes item id out of the current set wherever it sits in chosen.
// Only greedy removes out of order; the maxPrio values exclude restores are
// then stale, so it recounts maxPrio, and undo resets the cost afterwards.
func (ds *domainSearch) remove(id int32) {
	i := slices.Index(ds.chosen, id)
	last := len(ds.chosen) - 1
	ds.chosen[i], ds.chosen[last] = ds.chosen[last], ds.chosen[i]
	ds.exclude(id)
	ds.c.maxPrio = startCost(0).maxPrio
	for _, c := range ds.chosen {
		ds.c.maxPrio = max(ds.c.maxPrio, int64(ds.p.items[c].prio))
	}
}

// undo empties the current set.
func (ds *domainSearch) undo() {
	for len(ds.chosen) > 0 {
		ds.exclude(ds.chosen[len(ds.chosen)-1])
	}
	ds.c = startCost(ds.l)
	ds.prios = ds.prios[:0]
}
