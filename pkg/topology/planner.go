package topology

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Planner is a placement.Planner that keeps each gang inside the tightest
// interconnect domain that holds it. It goes up from the level the gang's
// Policy names (nodes when it names none) to the first level where a domain
// holds every member bound by topology. Among the domains there it takes the
// one whose placement spans the fewest domains at each level below,
// loosest level first, then the one with the least free room for this gang
// (best fit, so roomy domains stay whole), then the first in tree order.
// Members not bound by topology go wherever they fit, near the gang if they
// can.
//
// A Planner caches the tree of the last node set it saw and is safe for
// concurrent use.
type Planner struct {
	levels []scheduling.Level
	// budget bounds the exact packer's work per call (see defaultBudget).
	budget int64
	// searchBudget bounds the search for a hierarchical gang, in domain
	// trials per call (see DefaultSearchBudget).
	searchBudget int64

	mu sync.Mutex
	// tree is the tree of the last node set seen; guarded by mu. A Tree is
	// immutable, so callers keep using one after unlocking.
	tree *Tree
	// treeEpoch is the labels epoch (placement.Request.LabelsEpoch) of
	// nodes tree was last found to match, zero when unknown; guarded by
	// mu.
	treeEpoch uint64

	// packers recycles the exact packer's buffers across calls.
	packers sync.Pool
	// layouts keeps where the last groups' nodes lie on the tree.
	layouts layouts
	// kept keeps the slot counts of the last plans in groups.
	kept keptSlots
}

var _ placement.Planner = &Planner{}

// NewPlanner returns a Planner for the given label levels, tightest first.
func NewPlanner(levels []scheduling.Level) (*Planner, error) {
	if err := scheduling.ValidateLevels(levels); err != nil {
		return nil, err
	}
	return &Planner{levels: slices.Clone(levels), budget: defaultBudget, searchBudget: DefaultSearchBudget}, nil
}

// Tree returns the tree of req's nodes: the cached one when req.NodeGeneration
// and the node names match the last request's, a new one otherwise. Nodes
// of the labels epoch the tree last matched are not compared again.
func (p *Planner) Tree(req *placement.Request) *Tree {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := p.tree; t != nil && t.generation == req.NodeGeneration &&
		(req.LabelsEpoch != 0 && req.LabelsEpoch == p.treeEpoch || t.matches(req.Nodes)) {
		p.treeEpoch = req.LabelsEpoch
		return t
	}
	p.tree, p.treeEpoch = buildTree(p.levels, req.Nodes, req.NodeGeneration), req.LabelsEpoch
	return p.tree
}

// LowerBound is Tree.LowerBound on the tree of req's nodes.
func (p *Planner) LowerBound(req *placement.Request) ([]LevelSpan, error) {
	return p.Tree(req).LowerBound(req)
}

// Plan implements placement.Planner.
func (p *Planner) Plan(ctx context.Context, req *placement.Request) (*placement.Plan, error) {
	res, err := p.PlanDetailed(ctx, req)
	if err != nil {
		return nil, err
	}
	return res.Plan, nil
}

// PlanDetailed plans like Plan and also returns where the gang went and how
// tight it is. It fails with a *placement.FitError when the gang does not
// fit as its policy demands, and with an error wrapping ErrUnknownLevel when
// its policy names a level the planner does not know. Why other candidate
// domains lost is logged at V(4) on the context's logger.
//
// When req.Groups splits the nodes, each group is an extra, outermost
// domain (see planGroups). A request with a Hierarchy is planned as one
// plan for all its subgroups (see planHierarchy).
func (p *Planner) PlanDetailed(ctx context.Context, req *placement.Request) (*Result, error) {
	if req.Hierarchy != nil {
		return p.planHierarchy(ctx, req)
	}
	if req.Groups.Split() && anyBound(req) {
		return p.planGroups(ctx, req, func(t *Tree, k int, at []int32, sc *slotScratch) (*Result, rank, error) {
			return p.planDetailed(ctx, t, req.InGroupAt(k, sc.nodes, sc.narrowed(len(req.Nodes))), at, sc)
		})
	}
	res, _, err := p.planDetailed(ctx, p.Tree(req), req, nil, nil)
	return res, err
}

// planDetailed is PlanDetailed within one group of nodes, on the tree of
// req's nodes. It also returns how the chosen domain ranks, for comparing
// plans made in different groups. at, when not nil, are the depth-first
// positions of the only nodes req's bound members may use, and sc the
// slot arrays to count them in (newUsageAt).
func (p *Planner) planDetailed(ctx context.Context, t *Tree, req *placement.Request, at []int32, sc *slotScratch) (*Result, rank, error) {
	logger := klog.FromContext(ctx)
	start := 0
	if req.Policy.Level != "" {
		l, err := t.levelOf(req.Policy.Level)
		if err != nil {
			return nil, rank{}, err
		}
		start = l
	}
	var u *usage
	var err error
	if at != nil {
		u, err = newUsageAt(t, req, at, sc)
	} else {
		u, err = newUsage(t, req)
	}
	if err != nil {
		return nil, rank{}, err
	}
	res := &Result{
		Plan:  &placement.Plan{NodeOf: make([]int, len(req.Members))},
		Bound: int(u.total),
		Exact: true,
	}
	var ch *choice
	var lo, hi int32
	if len(u.bound) > 0 {
		if ch, err = p.choose(ctx, logger, u, start); err != nil {
			return nil, rank{}, err
		}
		u.assignRanks(ch.placed, res.Plan.NodeOf)
		lo, hi = t.dom[ch.level][ch.dom].lo, t.dom[ch.level][ch.dom].hi
		res.Level = t.levels[ch.level].Key
		res.LevelName = t.levels[ch.level].Name
		res.Domain = t.path(ch.level, ch.dom)
		res.Spans = t.levelSpans(ch.spans)
		res.Relaxed = req.Policy.Level != "" && ch.level > start
		res.Exact = ch.exact
	}
	var pl []placed
	if ch != nil {
		pl = ch.placed
	}
	loose, err := u.placeLoose(pl, lo, hi, res.Plan.NodeOf)
	if err != nil {
		return nil, rank{}, err
	}
	res.Plan.Summary = u.summary(res, ch, start, loose)
	for _, sp := range res.Spans {
		res.Plan.Spans = append(res.Plan.Spans, placement.Span{Level: sp.Key, Domains: sp.Domains})
	}
	var rk rank
	if ch != nil {
		rk = rank{level: ch.level, room: u.room[ch.level][ch.dom]}
	}
	return res, rk, nil
}

// choice is where the bound members go.
type choice struct {
	// level and dom name the domain that holds them all.
	level int
	dom   int32
	// placed lists their slots; spans counts domains per level.
	placed []placed
	spans  []int
	// exact is set when spans are proven minimal.
	exact bool
}

// choose finds the lowest level, from start up, where some domain holds the
// bound members, and picks among its domains.
func (p *Planner) choose(ctx context.Context, logger logr.Logger, u *usage, start int) (*choice, error) {
	t := u.tree
	top := t.top()
	if !u.fits(top, 0) {
		return nil, u.clusterFitError()
	}
	if len(u.req.Anchors) > 0 {
		return p.chooseNear(ctx, logger, u, start)
	}
	required := u.req.Policy.Required && u.req.Policy.Level != ""
	budget := p.budget
	var cands, scratch []int32
	if sc := u.scratch; sc != nil {
		// One Plan call's groups share the buffers (pick keeps no cands).
		cands, scratch = sc.fit[0], sc.fit[1]
		defer func() { sc.fit[0], sc.fit[1] = cands[:0], scratch[:0] }()
	}
	for l := start; l <= top; l++ {
		cands, scratch = u.fitting(l, cands, scratch)
		if len(cands) == 0 {
			if required {
				return nil, u.requiredFitError(l)
			}
			if v := logger.V(4); v.Enabled() {
				k := u.roomiest(l)
				v.Info("No topology domain holds the gang", "gang", u.req.Gang, "level", t.levels[l].Name,
					"roomiest", t.name(l, k), "room", u.roomFor(l, k), "want", u.total)
			}
			continue
		}
		ch, err := p.pick(ctx, logger, u, l, cands, &budget)
		if err != nil || ch != nil {
			return ch, err
		}
		if required {
			return nil, u.packFitError(l)
		}
	}
	return nil, u.packFitError(top)
}

// chooseNear places members next to the gang's running members, the
// request's anchors: inside the domain that holds most anchors, at the
// lowest level where that domain has room, so a replacement takes the place
// of the member it replaces when it can. A required level bounds the search:
// when the anchors' domain at that level has no room, the members wait
// rather than leave it.
func (p *Planner) chooseNear(ctx context.Context, logger logr.Logger, u *usage, start int) (*choice, error) {
	t := u.tree
	home := t.Homes(u.req.Anchors)
	required := u.req.Policy.Required && u.req.Policy.Level != ""
	last := t.top()
	if required {
		last = start
	}
	budget := p.budget
	for l := 0; l <= last; l++ {
		k := int32(home[l])
		if !u.fits(l, k) {
			logger.V(5).Info("The running gang's domain has no room", "gang", u.req.Gang, "level", t.levels[l].Name, "domain", t.name(l, k))
			continue
		}
		ch, err := p.pick(ctx, logger, u, l, []int32{k}, &budget)
		if err != nil || ch != nil {
			return ch, err
		}
	}
	if required {
		return nil, u.nearFitError(start, int32(home[start]))
	}
	return nil, u.packFitError(t.top())
}

// outcome is one candidate domain's evaluation.
type outcome struct {
	k    int32
	cost uint64
	// greedy is set when the greedy packer placed the gang (placed holds
	// its slots); otherwise the exact packer's tables do.
	greedy bool
	placed []placed
}

// pick chooses among the candidate domains of level l, those whose slots
// suffice for every shape. Candidates are tried in order of a lower bound on
// their cost, so once a bound cannot beat the best found the rest are
// skipped. It returns nil when the gang packs into none of them.
func (p *Planner) pick(ctx context.Context, logger logr.Logger, u *usage, l int, cands []int32, budget *int64) (*choice, error) {
	t := u.tree
	w, exact := u.weights(l)
	// lbs[i] bounds cands[i]: allocated per candidate, not per domain.
	lbs := make([]uint64, len(cands))
	idx := make([]int32, len(cands))
	var scratch []int64
	for i, k := range cands {
		lbs[i], scratch = u.lowerCost(l, k, w, scratch)
		idx[i] = int32(i)
	}
	// Candidates come off a heap in order of bound, then fit (a total
	// order: fit ends in tree order); most plans evaluate one or two, so
	// sorting them all cost more than the evaluations.
	order := newCandidateHeap(idx, func(a, b int32) int {
		if c := cmp.Compare(lbs[a], lbs[b]); c != 0 {
			return c
		}
		return u.compareFit(l, cands[a], cands[b])
	})

	useExact := u.exactFeasible()
	cur, best := p.getPacker(), p.getPacker()
	defer p.putPacker(cur)
	defer p.putPacker(best)

	var evaluated []outcome
	var pruned []int32
	var prunedLB []uint64 // the bounds of pruned
	win := -1
	for order.len() > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		i := order.peek()
		k := cands[i]
		if win >= 0 {
			wk, wc := evaluated[win].k, evaluated[win].cost
			if lbs[i] > wc || lbs[i] == wc && u.compareFit(l, k, wk) > 0 {
				// order is by bound, then fit: no later candidate can win.
				if logger.V(4).Enabled() {
					for _, j := range order.rest() {
						pruned = append(pruned, cands[j])
						prunedLB = append(prunedLB, lbs[j])
					}
				}
				break
			}
		}
		order.pop()
		o := outcome{k: k, cost: inf, greedy: !useExact || *budget <= 0}
		if !o.greedy {
			cur.reset(u, w, *budget)
			o.cost = cur.evaluate(l, k)
			*budget -= cur.work
			o.greedy = cur.aborted
		}
		if o.greedy {
			exact = false
			if pl, ok := u.greedyPack(l, k); ok {
				o.placed = pl
				o.cost = costOf(t.spansOf(positions(pl)), w)
			} else {
				o.cost = inf
			}
		}
		evaluated = append(evaluated, o)
		if o.cost == inf {
			continue
		}
		if win < 0 || o.cost < evaluated[win].cost || o.cost == evaluated[win].cost && u.compareFit(l, k, evaluated[win].k) < 0 {
			win = len(evaluated) - 1
			if !o.greedy {
				cur, best = best, cur // keep the winner's tables
			}
		}
	}
	if logger.V(4).Enabled() {
		logLosers(logger, u, l, w, evaluated, win, pruned, prunedLB)
	}
	if win < 0 {
		return nil, nil
	}
	o := evaluated[win]
	ch := &choice{level: l, dom: o.k, placed: o.placed, exact: exact}
	if !o.greedy {
		b := best.boxOf(l, o.k)
		var c [maxShapes]int32
		for s := range best.n {
			c[s] = int32(u.want[s])
		}
		ch.placed = best.assign(l, o.k, b.encode(best.n, &c), b, nil)
	}
	ch.spans = t.spansOf(positions(ch.placed))
	return ch, nil
}

// compareFit orders domains of level l by best fit for this gang, up to the
// cluster (Tree.compareFit).
func (u *usage) compareFit(l int, a, b int32) int {
	return u.tree.compareFit(l, a, b, u.tree.top()+1, func(m int, k int32) int64 { return u.room[m][k] })
}

// exactFeasible reports whether the exact packer can take this gang at all.
func (u *usage) exactFeasible() bool {
	if len(u.bound) > maxShapes {
		return false
	}
	if len(u.bound) == 1 {
		return true
	}
	states := int64(1)
	for _, n := range u.want {
		states *= n + 1
		if states > maxStates {
			return false
		}
	}
	return true
}

func (p *Planner) getPacker() *packer {
	if pk, ok := p.packers.Get().(*packer); ok {
		return pk
	}
	return &packer{}
}

// putPacker recycles pk's buffers but not its view of the request: a
// planner keeps no reference into a Request once Plan returns.
func (p *Planner) putPacker(pk *packer) {
	pk.u, pk.w = nil, nil
	p.packers.Put(pk)
}

// positions lists the sorted positions of pl.
func positions(pl []placed) []int32 {
	pos := make([]int32, len(pl))
	for i, p := range pl {
		pos[i] = p.pos
	}
	slices.Sort(pos)
	return pos
}

// roomiest is the domain of level l with the most room for the gang.
func (u *usage) roomiest(l int) int32 {
	best, most := int32(0), int64(-1)
	for k := range u.tree.dom[l] {
		if r := u.roomFor(l, int32(k)); r > most {
			best, most = int32(k), r
		}
	}
	return best
}

// logPrunedV4 bounds how many skipped candidates are named one by one at
// V(4); V(5) names them all.
const logPrunedV4 = 10

// logLosers says why each candidate lost to the winner: evaluated ones by
// their spans, skipped ones by their lower bound.
func logLosers(logger logr.Logger, u *usage, l int, w []uint64, evaluated []outcome, win int, pruned []int32, prunedLB []uint64) {
	t := u.tree
	lv := t.levels[l].Name
	var wo outcome
	if win >= 0 {
		wo = evaluated[win]
	}
	because := func(cost uint64, k int32, what string) string {
		switch {
		case cost == inf:
			return "the gang's shapes do not pack into it together"
		case cost > wo.cost:
			return fmt.Sprintf("%s %s, the winner %s", what, u.describeCost(l, w, cost), u.describeCost(l, w, wo.cost))
		case u.room[l][k] > u.room[l][wo.k]:
			return fmt.Sprintf("same %s, more room: %d slots, the winner %d", what, u.room[l][k], u.room[l][wo.k])
		}
		return fmt.Sprintf("same %s and room, later in tree order", what)
	}
	for i, o := range evaluated {
		if i != win {
			logger.V(4).Info("Topology domain lost", "gang", u.req.Gang, "level", lv, "domain", t.name(l, o.k),
				"reason", because(o.cost, o.k, "spans"))
		}
	}
	for i, k := range pruned {
		v := logger.V(4)
		if i >= logPrunedV4 {
			v = logger.V(5)
		}
		v.Info("Topology domain lost", "gang", u.req.Gang, "level", lv, "domain", t.name(l, k),
			"reason", because(prunedLB[i], k, "spans at best"))
	}
	if len(pruned) > logPrunedV4 {
		logger.V(4).Info("More topology domains lost on their lower bound", "gang", u.req.Gang, "level", lv,
			"count", len(pruned)-logPrunedV4)
	}
	if win >= 0 {
		logger.V(4).Info("Topology domain chosen", "gang", u.req.Gang, "level", lv, "domain", t.name(l, wo.k),
			"spans", u.describeCost(l, w, wo.cost), "room", u.room[l][wo.k], "greedy", wo.greedy)
	}
}
