package preemption

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/topology"
)

// problem is one Decide call's view of a Request on a Tree: the preemptor's
// shapes, the candidate evictions in canonical order, and the search's
// working capacity. It belongs to that call alone. The Tree is shared and
// the Request is only read.
type problem struct {
	req     *Request
	tree    *topology.Tree
	planner placement.Planner
	dims    int
	top     int
	// first..last are the tree levels searched, tightest first.
	first, last int
	// looseOnly is set when no member is bound by topology: the search then
	// fits every member anywhere in the cluster, as the planner places them.
	looseOnly bool
	// shapes are what the search fits: the bound members grouped as the
	// planner groups them (all members when looseOnly).
	shapes []shape
	// homes, for a request with Anchors, names per level the one domain
	// the planner would place it in (topology.Tree.Homes); nil otherwise.
	homes []int
	// simple is set when slot counts alone decide the fit, as they do for
	// the planner with one shape and no member placed apart from it.
	// Otherwise every set the search would keep is planned first.
	simple bool

	// items are the candidate evictions in canonical order; an item's id is
	// its index. surplus[u] is how many of unit u's members may go alone.
	items   []item
	surplus []int32

	// free[p*dims:(p+1)*dims] is the free capacity at depth-first position
	// p with the search's current victims gone, and slots[s][p] how many
	// members of shape s fit there (at most its limit). include and exclude
	// keep both exact; every domain search leaves them as it found them.
	free  []int64
	slots [][]int64
	// base[s] and most[s] are prefix sums over positions of the slots of
	// shape s with no victim gone and with every candidate gone.
	base, most [][]int64
	// gainAt[s][p] is the most the victims at p can add to shape s's slots
	// there: slots with every candidate gone less slots with none.
	gainAt [][]int64

	// pdbCount[b] counts evicted pods under budget b in the current set;
	// taken[u] counts unit u's members evicted alone; wholeIn[u] is set
	// while unit u's whole item is in the set.
	pdbCount []int64
	taken    []int32
	wholeIn  []bool
	// inSet[id] is set while item id is in the current set.
	inSet []bool

	// levels caches, per tree level, the items touching each domain.
	levels []*levelItems

	// work counts search steps against budget; aborted is set once the
	// budget ran out and some search stopped early.
	budget, work int64
	aborted      bool
	// best is the cheapest set found so far.
	best *incumbent
}

// shape is a group of members with the same request and the same node
// constraints, so that only their count matters.
type shape struct {
	request  placement.Vector
	eligible []bool
	// perNode is the members' MaxPerNode (0: no cap).
	perNode int
	want    int64
	// limit caps the slots counted on one node: want, or perNode if lower.
	limit int64
}

// item is one candidate eviction: a whole unit, or one elastic member of a
// gang.
type item struct {
	unit int32
	// pod is the member's index in its unit's Pods; -1 for the whole unit.
	pod  int32
	prio int32
	// work is what its eviction loses, in GPU-seconds: gpus times the
	// whole seconds the unit has run. unmovable is work again for a unit
	// that is not Movable, and 0 for one that is.
	work      int64
	unmovable int64
	gpus      int64
	// pos are the sorted depth-first positions of the nodes the item frees
	// capacity on; freed[i*dims:(i+1)*dims] is what it frees at pos[i].
	pos   []int32
	freed []int64
	// pdbs counts the item's pods under each budget they fall under.
	pdbs []pdbHit
}

type pdbHit struct {
	pdb, pods int32
}

func (it *item) isWhole() bool { return it.pod < 0 }

// incumbent is the cheapest victim set found so far.
type incumbent struct {
	cost cost
	// items are the set's ids, sorted.
	items []int32
}

// newProblem builds a problem; the request has been validated.
func newProblem(req *Request, tree *topology.Tree, planner placement.Planner, first, last int, budget int64) *problem {
	p := &problem{
		req:     req,
		tree:    tree,
		planner: planner,
		dims:    len(req.Resources),
		top:     tree.NumLevels() - 1,
		first:   first,
		last:    last,
		budget:  budget,
	}
	p.groupShapes()
	p.buildItems()
	p.countSlots()
	p.pdbCount = make([]int64, len(req.PDBs))
	p.taken = make([]int32, len(req.Units))
	p.wholeIn = make([]bool, len(req.Units))
	p.inSet = make([]bool, len(p.items))
	p.levels = make([]*levelItems, p.top+1)
	return p
}

// groupShapes groups the members the search must fit the way the planner
// does: equal requests under the same eligibility slice and per-node cap.
func (p *problem) groupShapes() {
	members := p.req.Members
	bound := 0
	for i := range members {
		if members[i].Accelerated {
			bound++
		}
	}
	p.looseOnly = bound == 0
	for i := range members {
		m := &members[i]
		if !m.Accelerated && !p.looseOnly {
			continue
		}
		j := slices.IndexFunc(p.shapes, func(s shape) bool {
			return sameEligible(s.eligible, m.Eligible) && slices.Equal(s.request, m.Request) && s.perNode == m.MaxPerNode
		})
		if j < 0 {
			p.shapes = append(p.shapes, shape{request: m.Request, eligible: m.Eligible, perNode: m.MaxPerNode})
			j = len(p.shapes) - 1
		}
		p.shapes[j].want++
	}
	for s := range p.shapes {
		sh := &p.shapes[s]
		sh.limit = sh.want
		if sh.perNode > 0 {
			sh.limit = min(sh.limit, int64(sh.perNode))
		}
	}
	p.simple = len(p.shapes) == 1 && (p.looseOnly || bound == len(members))
}

// sameEligible reports whether two eligibility slices are the same slice,
// as the planner tells shapes apart.
func sameEligible(a, b []bool) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// buildItems turns the candidate units (strictly lower priority) into items
// and sorts them into canonical order.
func (p *problem) buildItems() {
	req := p.req
	p.surplus = make([]int32, len(req.Units))
	// Items cut their positions and freed capacity from two arenas sized
	// up front, so that appends never move what earlier items hold: a
	// few allocations for thousands of units.
	nItems, nPods := 0, 0
	for u := range req.Units {
		un := &req.Units[u]
		if un.Priority >= req.Priority {
			continue
		}
		nItems++
		nPods += len(un.Pods)
		if un.Kind == KindGang && un.Surplus > 0 {
			nItems += len(un.Pods)
			nPods += len(un.Pods)
		}
	}
	p.items = make([]item, 0, nItems)
	b := &itemBuilder{p: p, pos: make([]int32, 0, nPods), freed: make([]int64, 0, nPods*p.dims)}
	for u := range req.Units {
		un := &req.Units[u]
		if un.Priority >= req.Priority {
			continue
		}
		p.surplus[u] = int32(un.Surplus)
		p.items = append(p.items, b.build(u, -1))
		if un.Kind != KindGang || un.Surplus == 0 {
			continue
		}
		for i := range un.Pods {
			if !un.Pods[i].Keep && un.Pods[i].Node >= 0 {
				p.items = append(p.items, b.build(u, int32(i)))
			}
		}
	}
	// Sort indices, not the items themselves: they are wide.
	order := make([]int32, len(p.items))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return p.canonical(&p.items[a], &p.items[b]) })
	sorted := make([]item, len(p.items))
	for i, o := range order {
		sorted[i] = p.items[o]
	}
	p.items = sorted
}

// itemBuilder builds items from units, cutting their slices from its
// arenas.
type itemBuilder struct {
	p     *problem
	pos   []int32
	freed []int64
	// at is scratch: the pods of one item by position.
	at []podAt
}

type podAt struct {
	pos int32
	pod int
}

// build makes the item that evicts pod of unit u, or the whole unit for
// pod -1.
func (b *itemBuilder) build(u int, pod int32) item {
	p := b.p
	un := &p.req.Units[u]
	it := item{unit: int32(u), pod: pod, prio: un.Priority}
	b.at = b.at[:0]
	for i := range un.Pods {
		if pod >= 0 && int32(i) != pod {
			continue
		}
		pd := &un.Pods[i]
		it.gpus += pd.GPUs
		if pd.Node >= 0 {
			b.at = append(b.at, podAt{pos: int32(p.tree.PositionOf(pd.Node)), pod: i})
		}
		for _, x := range pd.PDBs {
			k := slices.IndexFunc(it.pdbs, func(h pdbHit) bool { return h.pdb == int32(x) })
			if k < 0 {
				it.pdbs = append(it.pdbs, pdbHit{pdb: int32(x)})
				k = len(it.pdbs) - 1
			}
			it.pdbs[k].pods++
		}
	}
	if !un.Started.IsZero() {
		it.work = it.gpus * max(0, int64(p.req.Now.Sub(un.Started)/time.Second))
	}
	if !un.Movable {
		it.unmovable = it.work
	}
	slices.SortFunc(b.at, func(x, y podAt) int { return cmp.Compare(x.pos, y.pos) })
	p0, f0 := len(b.pos), len(b.freed)
	for _, a := range b.at {
		if len(b.pos) == p0 || b.pos[len(b.pos)-1] != a.pos {
			b.pos = append(b.pos, a.pos)
			for range p.dims {
				b.freed = append(b.freed, 0)
			}
		}
		placement.Vector(b.freed[len(b.freed)-p.dims:]).Add(un.Pods[a.pod].Request)
	}
	it.pos = b.pos[p0:len(b.pos):len(b.pos)]
	it.freed = b.freed[f0:len(b.freed):len(b.freed)]
	return it
}

// canonical is the canonical order of items (see the package doc): elastic
// members before whole units, then priority ascending, least unmovable
// work lost, least work lost, fewest GPUs, unit name, and a gang's members
// in Pods order. Among whole units it sorts by the cost's own fields after
// the counts, in the cost's order, each of them a sum over items (maxPrio
// follows priority): so the first m of any run of them are also the
// cheapest m (see domainSearch.bound). A key added to the cost order after
// the counts must be added here in the same place.
func (p *problem) canonical(a, b *item) int {
	if c := cmp.Compare(boolRank(a.isWhole()), boolRank(b.isWhole())); c != 0 {
		return c
	}
	if c := cmp.Compare(a.prio, b.prio); c != 0 {
		return c
	}
	if c := cmp.Compare(a.unmovable, b.unmovable); c != 0 {
		return c
	}
	if c := cmp.Compare(a.work, b.work); c != 0 {
		return c
	}
	if c := cmp.Compare(a.gpus, b.gpus); c != 0 {
		return c
	}
	if a.unit != b.unit {
		return cmp.Compare(p.req.Units[a.unit].Name, p.req.Units[b.unit].Name)
	}
	return cmp.Compare(a.pod, b.pod)
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// countSlots fills free, slots, base, most and gainAt.
func (p *problem) countSlots() {
	n := len(p.req.Nodes)
	dims := p.dims
	p.free = make([]int64, n*dims)
	most := make([]int64, n*dims)
	for pos := range n {
		f := p.req.Nodes[p.tree.NodeAt(pos)].Free
		copy(p.free[pos*dims:], f)
		copy(most[pos*dims:], f)
	}
	// Every candidate's pods gone: whole items cover all pods.
	for id := range p.items {
		it := &p.items[id]
		if !it.isWhole() {
			continue
		}
		for i, pos := range it.pos {
			placement.Vector(most[int(pos)*dims : int(pos+1)*dims]).Add(it.freed[i*dims : (i+1)*dims])
		}
	}
	ns := len(p.shapes)
	p.slots = make([][]int64, ns)
	p.base = make([][]int64, ns)
	p.most = make([][]int64, ns)
	p.gainAt = make([][]int64, ns)
	for s := range p.shapes {
		p.slots[s] = make([]int64, n)
		p.base[s] = make([]int64, n+1)
		p.most[s] = make([]int64, n+1)
		p.gainAt[s] = make([]int64, n)
		for pos := range n {
			b := p.slotsFor(s, pos, p.free[pos*dims:(pos+1)*dims])
			m := p.slotsFor(s, pos, most[pos*dims:(pos+1)*dims])
			p.slots[s][pos] = b
			p.gainAt[s][pos] = m - b
			p.base[s][pos+1] = p.base[s][pos] + b
			p.most[s][pos+1] = p.most[s][pos] + m
		}
	}
}

// slotsFor is how many members of shape s fit at position pos in free, at
// most the shape's limit: more cannot help, or may not share the node.
func (p *problem) slotsFor(s, pos int, free []int64) int64 {
	sh := &p.shapes[s]
	if sh.eligible != nil && !sh.eligible[p.tree.NodeAt(pos)] {
		return 0
	}
	return topology.FitCount(sh.request, free, sh.limit)
}

// levelItems lists, for each domain of one level, the ids of the items that
// free capacity in it, in canonical order: ids[start[k]:start[k+1]].
type levelItems struct {
	start []int32
	ids   []int32
}

// itemsAt returns the items per domain of level l, building them on first
// use.
func (p *problem) itemsAt(l int) *levelItems {
	if li := p.levels[l]; li != nil {
		return li
	}
	nd := p.tree.NumDomainsAt(l)
	li := &levelItems{start: make([]int32, nd+1)}
	// Positions are sorted and domains are position ranges, so one item's
	// domains come in order: a change of domain is a new one.
	each := func(it *item, f func(k int)) {
		last := -1
		for _, pos := range it.pos {
			if k := p.tree.DomainAt(l, int(pos)); k != last {
				f(k)
				last = k
			}
		}
	}
	for id := range p.items {
		each(&p.items[id], func(k int) { li.start[k+1]++ })
	}
	for k := range nd {
		li.start[k+1] += li.start[k]
	}
	li.ids = make([]int32, li.start[nd])
	next := slices.Clone(li.start[:nd])
	for id := range p.items {
		each(&p.items[id], func(k int) {
			li.ids[next[k]] = int32(id)
			next[k]++
		})
	}
	p.levels[l] = li
	return li
}

// startCost is the cost of no victims at level l.
func startCost(l int) cost {
	return cost{level: int64(l), maxPrio: math.MinInt64}
}
