package preemption

import (
	"cmp"
	"context"
	"slices"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// The search. Level by level from the policy's level up, and domain by
// domain within a level, it looks for the cheapest set of items whose
// eviction gives the preemptor room inside that one domain; only items with
// a pod in the domain are candidates there. Each domain gets a greedy pass,
// which seeds the incumbent, then a depth-first branch and bound over its
// items in canonical order (include before exclude). A partial set is cut
// when a lower bound on every extension's cost (see domainSearch.bound) is
// worse than the incumbent's, or ties it and loses the tie-break already.
// All domains share one incumbent and one work budget. Because the search
// visits sets in canonical order, the first set found among equals is the
// one the tie-break picks.

// defaultBudget bounds the search's work per Decide call, in steps: one per
// branch-and-bound node and one per node whose capacity a step updates
// (about 20-50 ns each). Past it, domains not yet searched get only their
// greedy pass and the Decision is not Exact.
const defaultBudget = 2_000_000

// searchLevel searches every domain of level l that could hold the
// preemptor with all its candidates gone, most promising first.
func (p *problem) searchLevel(ctx context.Context, ds *domainSearch, l int) error {
	li := p.itemsAt(l)
	type cand struct {
		k  int
		lb cost
	}
	cands := make([]cand, 0, p.tree.NumDomainsAt(l))
	for k := range p.tree.NumDomainsAt(l) {
		if p.homes != nil && k != p.homes[l] {
			continue // the planner places near the anchors only
		}
		lo, hi := p.tree.DomainRange(l, k)
		if !p.potentialFits(lo, hi) {
			continue
		}
		ds.setup(l, k, li.ids[li.start[k]:li.start[k+1]])
		if lb, ok := ds.bound(0); ok {
			cands = append(cands, cand{k: k, lb: lb})
		}
	}
	order := func(a, b cand) int {
		if c := a.lb.compare(&b.lb); c != 0 {
			return c
		}
		return cmp.Compare(a.k, b.k)
	}
	if len(cands) == 0 {
		return nil
	}
	// Search the most promising domain first: its set usually rules out
	// most others on their bound alone, and only the rest need sorting.
	first := cands[0]
	for _, c := range cands[1:] {
		if order(c, first) < 0 {
			first = c
		}
	}
	if p.best == nil || first.lb.compare(&p.best.cost) <= 0 {
		ds.setup(l, first.k, li.ids[li.start[first.k]:li.start[first.k+1]])
		if err := ds.run(ctx); err != nil {
			return err
		}
	}
	rest := cands[:0]
	for _, c := range cands {
		if c.k != first.k && (p.best == nil || c.lb.compare(&p.best.cost) <= 0) {
			rest = append(rest, c)
		}
	}
	slices.SortFunc(rest, order)
	for _, c := range rest {
		if err := ctx.Err(); err != nil {
			return err
		}
		if p.best != nil && c.lb.compare(&p.best.cost) > 0 {
			break // sorted by bound: no later domain can win either
		}
		ds.setup(l, c.k, li.ids[li.start[c.k]:li.start[c.k+1]])
		if err := ds.run(ctx); err != nil {
			return err
		}
	}
	return nil
}

// potentialFits reports whether the positions lo..hi-1 hold every shape
// with every candidate gone.
func (p *problem) potentialFits(lo, hi int) bool {
	for s := range p.shapes {
		if p.most[s][hi]-p.most[s][lo] < p.shapes[s].want {
			return false
		}
	}
	return true
}

// domainSearch searches one domain. Its buffers are reused from domain to
// domain within one Decide call.
type domainSearch struct {
	p *problem
	// l is the domain's level; lo..hi-1 its positions.
	l      int
	lo, hi int32
	// items are the ids of the items that can add slots in the domain, in
	// canonical order; gain[j*ns+s] bounds what items[j] adds to shape s.
	items []int32
	gain  []int64
	// Over items[j:]: the sum of the gains per shape and of the elastic
	// members' gains, and the least priority, unmovable work, work and
	// GPUs; index j*ns+s or j.
	sufSum, sufElastic                                 []int64
	sufMinPrio, sufMinUnmovable, sufMinWork, sufMinGPU []int64
	// byGain[s*n:(s+1)*n] lists the indices of items by their gain for
	// shape s, largest first.
	byGain []int32
	// firstWhole is the index in items of the first whole unit; from there
	// on items are sorted by the cost's fields, and preSum, preUnmovable,
	// preWork and preGPU (prefix sums over items of
	// priority+priorityOffset, unmovable work, work and GPUs) give the
	// cheapest m of any suffix.
	firstWhole                            int
	preSum, preUnmovable, preWork, preGPU []int64
	// need[s] is how many more members of shape s want slots in the domain.
	need []int64
	// chosen is the current set; c its cost; prios the maxPrio values
	// include replaced, for exclude to restore.
	chosen []int32
	c      cost
	prios  []int64
	// scratch holds one node's capacity for what-if counts.
	scratch []int64
	ctx     context.Context
	err     error
}

// setup points the search at domain k of level l with candidate ids.
func (ds *domainSearch) setup(l, k int, ids []int32) {
	p := ds.p
	ns := len(p.shapes)
	lo, hi := p.tree.DomainRange(l, k)
	ds.l, ds.lo, ds.hi = l, int32(lo), int32(hi)
	ds.need = ds.need[:0]
	for s := range p.shapes {
		ds.need = append(ds.need, p.shapes[s].want-(p.base[s][hi]-p.base[s][lo]))
	}
	ds.items, ds.gain = ds.items[:0], ds.gain[:0]
	for _, id := range ids {
		it := &p.items[id]
		start := len(ds.gain)
		useful := false
		for s := range p.shapes {
			var g int64
			for _, pos := range it.pos {
				if pos >= ds.lo && pos < ds.hi {
					g += p.gainAt[s][pos]
				}
			}
			ds.gain = append(ds.gain, g)
			useful = useful || g > 0 && ds.need[s] > 0
		}
		if !useful && !p.simple {
			// Slot counts miss room that lets several shapes share a
			// node, and the planner has the last word: any capacity freed
			// in the domain may help.
			useful = ds.freesSomething(it)
		}
		if useful {
			ds.items = append(ds.items, id)
		} else {
			ds.gain = ds.gain[:start]
		}
	}
	n := len(ds.items)
	grow := func(b []int64, size int) []int64 {
		if cap(b) < size {
			return make([]int64, size)
		}
		return b[:size]
	}
	ds.sufSum = grow(ds.sufSum, (n+1)*ns)
	ds.sufElastic = grow(ds.sufElastic, (n+1)*ns)
	ds.sufMinPrio = grow(ds.sufMinPrio, n+1)
	ds.sufMinUnmovable = grow(ds.sufMinUnmovable, n+1)
	ds.sufMinWork = grow(ds.sufMinWork, n+1)
	ds.sufMinGPU = grow(ds.sufMinGPU, n+1)
	for s := range ns {
		o := n*ns + s
		ds.sufSum[o], ds.sufElastic[o] = 0, 0
	}
	ds.sufMinPrio[n], ds.sufMinUnmovable[n], ds.sufMinWork[n], ds.sufMinGPU[n] = 0, 0, 0, 0
	if cap(ds.byGain) < ns*n {
		ds.byGain = make([]int32, ns*n)
	}
	ds.byGain = ds.byGain[:ns*n]
	for s := range ns {
		list := ds.byGain[s*n : (s+1)*n]
		for j := range list {
			list[j] = int32(j)
		}
		slices.SortFunc(list, func(a, b int32) int {
			if c := cmp.Compare(ds.gain[int(b)*ns+s], ds.gain[int(a)*ns+s]); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
	}
	ds.preSum = grow(ds.preSum, n+1)
	ds.preUnmovable = grow(ds.preUnmovable, n+1)
	ds.preWork = grow(ds.preWork, n+1)
	ds.preGPU = grow(ds.preGPU, n+1)
	ds.firstWhole = n
	for j, id := range ds.items {
		it := &p.items[id]
		if it.isWhole() && ds.firstWhole == n {
			ds.firstWhole = j
		}
		ds.preSum[j+1] = ds.preSum[j] + int64(it.prio) + priorityOffset
		ds.preUnmovable[j+1] = ds.preUnmovable[j] + it.unmovable
		ds.preWork[j+1] = ds.preWork[j] + it.work
		ds.preGPU[j+1] = ds.preGPU[j] + it.gpus
	}
	for j := n - 1; j >= 0; j-- {
		it := &p.items[ds.items[j]]
		for s := range ns {
			o, next, g := j*ns+s, (j+1)*ns+s, ds.gain[j*ns+s]
			ds.sufSum[o] = ds.sufSum[next] + g
			ds.sufElastic[o] = ds.sufElastic[next]
			if !it.isWhole() {
				ds.sufElastic[o] += g
			}
		}
		prio, unmovable, work, gpus := int64(it.prio), it.unmovable, it.work, it.gpus
		if j+1 < n {
			prio = min(prio, ds.sufMinPrio[j+1])
			unmovable = min(unmovable, ds.sufMinUnmovable[j+1])
			work = min(work, ds.sufMinWork[j+1])
			gpus = min(gpus, ds.sufMinGPU[j+1])
		}
		ds.sufMinPrio[j], ds.sufMinUnmovable[j], ds.sufMinWork[j], ds.sufMinGPU[j] = prio, unmovable, work, gpus
	}
	ds.chosen, ds.prios = ds.chosen[:0], ds.prios[:0]
	ds.c = startCost(l)
}

// freesSomething reports whether it frees any capacity inside the domain.
func (ds *domainSearch) freesSomething(it *item) bool {
	dims := ds.p.dims
	for i, pos := range it.pos {
		if pos >= ds.lo && pos < ds.hi && !placement.Vector(it.freed[i*dims:(i+1)*dims]).IsZero() {
			return true
		}
	}
	return false
}

// run searches the domain set up last: greedy first, then exactly while the
// budget lasts.
func (ds *domainSearch) run(ctx context.Context) error {
	ds.ctx, ds.err = ctx, nil
	ds.greedy()
	if ds.err != nil {
		return ds.err
	}
	if ds.p.work >= ds.p.budget {
		ds.p.aborted = true
		return nil
	}
	ds.dfs(0)
	return ds.err
}

// fits reports whether the current set gives every shape its slots.
func (ds *domainSearch) fits() bool {
	for _, n := range ds.need {
		if n > 0 {
			return false
		}
	}
	return true
}

// allowed reports whether item id may join the current set: a gang's
// members go alone only up to its surplus, and never together with the
// whole gang.
func (p *problem) allowed(id int32) bool {
	it := &p.items[id]
	if p.wholeIn[it.unit] {
		return false
	}
	if it.isWhole() {
		return p.taken[it.unit] == 0
	}
	return p.taken[it.unit] < p.surplus[it.unit]
}

// include adds item id to the current set.
func (ds *domainSearch) include(id int32) {
	p := ds.p
	it := &p.items[id]
	ds.apply(it, 1)
	for _, h := range it.pdbs {
		allowed := int64(p.req.PDBs[h.pdb].Allowed)
		before := max(0, p.pdbCount[h.pdb]-allowed)
		p.pdbCount[h.pdb] += int64(h.pods)
		ds.c.violations += max(0, p.pdbCount[h.pdb]-allowed) - before
	}
	if it.isWhole() {
		ds.c.gangs++
		p.wholeIn[it.unit] = true
	} else {
		ds.c.elastic++
		p.taken[it.unit]++
	}
	p.inSet[id] = true
	ds.prios = append(ds.prios, ds.c.maxPrio)
	ds.c.maxPrio = max(ds.c.maxPrio, int64(it.prio))
	ds.c.sumPrio += int64(it.prio) + priorityOffset
	ds.c.unmovable += it.unmovable
	ds.c.work += it.work
	ds.c.gpus += it.gpus
	ds.chosen = append(ds.chosen, id)
}

// exclude takes item id, the last one included, out of the current set.
func (ds *domainSearch) exclude(id int32) {
	p := ds.p
	it := &p.items[id]
	ds.apply(it, -1)
	for _, h := range it.pdbs {
		allowed := int64(p.req.PDBs[h.pdb].Allowed)
		before := max(0, p.pdbCount[h.pdb]-allowed)
		p.pdbCount[h.pdb] -= int64(h.pods)
		ds.c.violations += max(0, p.pdbCount[h.pdb]-allowed) - before
	}
	if it.isWhole() {
		ds.c.gangs--
		p.wholeIn[it.unit] = false
	} else {
		ds.c.elastic--
		p.taken[it.unit]--
	}
	p.inSet[id] = false
	ds.c.maxPrio = ds.prios[len(ds.prios)-1]
	ds.prios = ds.prios[:len(ds.prios)-1]
	ds.c.sumPrio -= int64(it.prio) + priorityOffset
	ds.c.unmovable -= it.unmovable
	ds.c.work -= it.work
	ds.c.gpus -= it.gpus
	ds.chosen = ds.chosen[:len(ds.chosen)-1]
}

// apply adds (sign 1) or gives back (sign -1) what it frees inside the
// domain, and recounts the slots there.
func (ds *domainSearch) apply(it *item, sign int64) {
	p := ds.p
	dims := p.dims
	for i, pos := range it.pos {
		if pos < ds.lo || pos >= ds.hi {
			continue
		}
		f := p.free[int(pos)*dims : int(pos+1)*dims]
		freed := it.freed[i*dims : (i+1)*dims]
		for d := range f {
			f[d] += sign * freed[d]
		}
		for s := range p.shapes {
			old := p.slots[s][pos]
			now := p.slotsFor(s, int(pos), f)
			p.slots[s][pos] = now
			ds.need[s] -= now - old
		}
		p.work++
	}
}

// dfs is the branch and bound over items[j:]. chosen stays sorted, since
// items are included in canonical order.
func (ds *domainSearch) dfs(j int) {
	p := ds.p
	for {
		if p.aborted || ds.err != nil {
			return
		}
		if ds.fits() {
			switch ds.offer(ds.chosen) {
			case offerDone:
				return
			case offerUnverified:
				// The planner wants more room than slots show: go on.
			}
		}
		if j == len(ds.items) {
			return
		}
		p.work++
		if p.work > p.budget {
			p.aborted = true
			return
		}
		if p.work&4095 == 0 {
			if err := ds.ctx.Err(); err != nil {
				ds.err = err
				return
			}
		}
		if ds.prune(j) {
			return
		}
		if id := ds.items[j]; p.allowed(id) {
			ds.include(id)
			ds.dfs(j + 1)
			ds.exclude(id)
		}
		j++ // the branch without items[j], as a loop to keep the stack shallow
	}
}

type offerResult int

const (
	// offerDone: the set was kept, or loses to the incumbent; either way no
	// extension of it is worth trying, since each costs more.
	offerDone offerResult = iota
	// offerUnverified: the slots suffice but the planner does not place
	// the preemptor; extensions may still.
	offerUnverified
)

// offer proposes the current set, whose slots suffice, with its ids sorted.
func (ds *domainSearch) offer(ids []int32) offerResult {
	p := ds.p
	c := ds.c
	if best := p.best; best != nil {
		if x := c.compare(&best.cost); x > 0 || x == 0 && !listLess(ids, best.items) {
			return offerDone
		}
	}
	if !p.simple {
		level, ok, err := p.verify(ds.ctx, ids, ds.l)
		if err != nil {
			ds.err = err
			return offerDone
		}
		if !ok {
			return offerUnverified
		}
		c.level = int64(level)
	}
	p.best = &incumbent{cost: c, items: slices.Clone(ids)}
	return offerDone
}
