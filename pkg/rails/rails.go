// Package rails plans rail-aligned gangs: every member that uses part of a
// node takes its devices on the same set of rails, so that the k-th GPU of
// one member talks to the k-th GPU of another through one leaf switch.
//
// capacity reads the rails (which NIC is rail k, which GPU sits with it);
// this package chooses the rail set a gang uses and narrows a placement
// request to the nodes that have that set free, so that the planner's
// domain choice, best fit and backtracking count rail-aligned slots the
// way they count GPUs.
package rails

import (
	"cmp"
	"context"
	"errors"
	"math/bits"
	"slices"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Gang is what the planner knows of a gang's rails in one pass.
type Gang struct {
	// Size is how many rails each aligned member uses: one device of
	// each aligned dimension per rail.
	Size int
	// Aligned[i] is set for members bound by rails (Request.Members[i]).
	Aligned []bool
	// Class[n] is the class of node n (an index into Request.Nodes):
	// an index into Classes. Nodes of one class read alike, so most of
	// the work is done once per class: a fleet has few.
	Class []int32
	// Classes are the distinct ways nodes read; class 0 is conventionally
	// a node without rails.
	Classes []Class
	// Unit[n] is the scalable unit of node n (an index into Units): the
	// nodes whose NICs plug into the same rail switches. Members in one
	// unit must use one rail set; members in different units talk through
	// the spine whatever their rails, so each unit may use its own. Nil:
	// every node is in one unit.
	Unit []int32
	// Units name the units, for people.
	Units []string
	// Pinned[u], when not zero, is the only rail set the gang may use in
	// unit u: the one its running members there use.
	Pinned []capacity.RailSet
}

// unitOf is node n's unit.
func (g *Gang) unitOf(n int) int32 {
	if g.Unit == nil {
		return 0
	}
	return g.Unit[n]
}

// units is how many units there are.
func (g *Gang) units() int { return max(1, len(g.Units)) }

// pinnedOf is unit u's pinned set, 0 when none.
func (g *Gang) pinnedOf(u int32) capacity.RailSet {
	if int(u) < len(g.Pinned) {
		return g.Pinned[u]
	}
	return 0
}

// onePin is the rail set every pinned unit uses; ok is false when pinned
// units use different sets, so that no one set serves the whole gang.
func (g *Gang) onePin() (set capacity.RailSet, ok bool) {
	for _, p := range g.Pinned {
		switch {
		case p == 0:
		case set == 0:
			set = p
		case p != set:
			return 0, false
		}
	}
	return set, true
}

// Class is how the nodes of one class read.
type Class struct {
	// Free counts, per rail, the devices free in every aligned dimension.
	Free capacity.RailCounts
	// Used is set when some of the nodes' railed devices are taken: a
	// gang on their free rails keeps other nodes whole.
	Used bool
}

// free is the rail set class c has free.
func (g *Gang) free(c int32) capacity.RailSet { return g.Classes[c].Free.Free() }

// maxEnumerated bounds the rail sets enumerated from the rails every node
// has; past it, only the sets some node has free are tried.
const maxEnumerated = 512

// Candidate is a rail set and what the nodes offer on it.
type Candidate struct {
	Set capacity.RailSet
	// Slots is how many aligned members the nodes can take on Set.
	Slots int
	// UsedNodes is how many nodes already in use offer Set.
	UsedNodes int
}

// Candidates lists the rail sets on which eligible nodes (nil: every
// node) could take want aligned members, best first: the set most nodes
// already in use offer (other gangs' complementary rails, so that
// alignment does not cost whole nodes), then the set with the fewest
// slots (the tightest fit), then the lowest rails.
func (g *Gang) Candidates(eligible func(n int) bool, want int) []Candidate {
	if g.Size <= 0 {
		return nil
	}
	// Nodes counted by class, once; each candidate then costs a pass over
	// the classes.
	counts, free := g.tally(eligible, 1, func(int) int32 { return 0 })
	var sets []capacity.RailSet
	switch pin, ok := g.onePin(); {
	case !ok:
		return nil
	case pin != 0:
		sets = []capacity.RailSet{pin}
	default:
		sets = g.sets(free)
	}
	var out []Candidate
	for _, s := range sets {
		if c := g.offer(s, free, counts[0]); c.Slots >= want && c.Slots > 0 {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b Candidate) int {
		return cmp.Or(cmp.Compare(b.UsedNodes, a.UsedNodes), cmp.Compare(a.Slots, b.Slots), compareSets(a.Set, b.Set))
	})
	return out
}

// classCount is how many of the nodes counted a class has.
type classCount struct{ class, nodes int }

// tally counts the eligible nodes (nil: every node) by class in each of
// groups groups, node n in group(n), and returns each group's classes with
// their counts and, per class, its free rails where some node of it was
// counted (0 elsewhere).
func (g *Gang) tally(eligible func(n int) bool, groups int, group func(n int) int32) ([][]classCount, []capacity.RailSet) {
	nc := len(g.Classes)
	dense := make([]int, groups*nc)
	for n, c := range g.Class {
		if eligible == nil || eligible(n) {
			dense[int(group(n))*nc+int(c)]++
		}
	}
	counts := make([][]classCount, groups)
	free := make([]capacity.RailSet, nc)
	for i, k := range dense {
		if k > 0 {
			c := i % nc
			counts[i/nc] = append(counts[i/nc], classCount{c, k})
			free[c] = g.free(int32(c))
		}
	}
	return counts, free
}

// offer is what nodes counted by class offer on rail set s, free being
// each class's free rails.
func (g *Gang) offer(s capacity.RailSet, free []capacity.RailSet, counts []classCount) Candidate {
	c := Candidate{Set: s}
	for _, x := range counts {
		if !free[x.class].Contains(s) {
			continue
		}
		c.Slots += x.nodes * g.Classes[x.class].Free.Slots(s)
		if g.Classes[x.class].Used {
			c.UsedNodes += x.nodes
		}
	}
	return c
}

// compareSets orders rail sets by their lowest rails first.
func compareSets(a, b capacity.RailSet) int {
	return cmp.Compare(bits.Reverse64(uint64(b)), bits.Reverse64(uint64(a)))
}

// sets are the rail sets of g.Size rails worth trying: every such subset
// of the rails some class has free while they are few, else the lowest and
// the highest g.Size rails of each class's free set.
func (g *Gang) sets(free []capacity.RailSet) []capacity.RailSet {
	var all capacity.RailSet
	for _, f := range free {
		if f.Len() >= g.Size {
			all |= f
		}
	}
	rails := all.Rails()
	if binomial(len(rails), g.Size) <= maxEnumerated {
		var out []capacity.RailSet
		combinations(rails, g.Size, func(s capacity.RailSet) { out = append(out, s) })
		return out
	}
	seen := map[capacity.RailSet]bool{}
	var out []capacity.RailSet
	for _, f := range free {
		if f.Len() < g.Size {
			continue
		}
		r := f.Rails()
		for _, pick := range [][]int{r[:g.Size], r[len(r)-g.Size:]} {
			var s capacity.RailSet
			for _, x := range pick {
				s |= 1 << x
			}
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	slices.SortFunc(out, compareSets)
	return out
}

func binomial(n, k int) int {
	if k < 0 || k > n {
		return 0
	}
	r := 1
	for i := 1; i <= k; i++ {
		r = r * (n - k + i) / i
		if r > 1<<20 {
			return r
		}
	}
	return r
}

// combinations calls f with every k-subset of rails, lowest first.
func combinations(rails []int, k int, f func(capacity.RailSet)) {
	var rec func(start int, k int, s capacity.RailSet)
	rec = func(start, k int, s capacity.RailSet) {
		if k == 0 {
			f(s)
			return
		}
		for i := start; i <= len(rails)-k; i++ {
			rec(i+1, k-1, s|1<<rails[i])
		}
	}
	rec(0, k, 0)
}

// SlotsResource names the dimension Narrow adds when a per-node cap
// cannot say how many aligned members a node takes.
const SlotsResource = "gpu-gang.x-k8s.io/rail-slots"

// Narrow returns a copy of req in which every aligned member may go only
// to nodes with rail set s free, and each such node takes at most as many
// aligned members as its slots on s; see narrow.
func (g *Gang) Narrow(req *placement.Request, s capacity.RailSet) *placement.Request {
	byClass := g.classSlots(s)
	slots := make([]int, len(req.Nodes))
	for n := range slots {
		slots[n] = byClass[g.Class[n]]
	}
	return g.narrow(req, slots)
}

// classSlots is, per class, how many aligned members a node of it takes on
// rail set s.
func (g *Gang) classSlots(s capacity.RailSet) []int {
	slots := make([]int, len(g.Classes))
	for c := range g.Classes {
		if g.free(int32(c)).Contains(s) {
			slots[c] = g.Classes[c].Free.Slots(s)
		}
	}
	return slots
}

// narrow returns a copy of req in which every aligned member may go only
// to nodes with slots, and node n takes at most slots[n] aligned members.
// When the aligned members are one kind of member (one request, one
// eligibility slice) and every node with slots has as many, a per-node cap
// on them says it; otherwise the copy counts slots as one more resource,
// which each aligned member asks one of. req is not written; the copy
// shares what it does not change.
func (g *Gang) narrow(req *placement.Request, slots []int) *placement.Request {
	out := *req
	out.Members = slices.Clone(req.Members)
	narrowed := map[*bool][]bool{}
	var all []bool
	offers := make([]bool, len(req.Nodes))
	fewest, most := 0, 0
	for n := range req.Nodes {
		if k := slots[n]; k > 0 {
			offers[n] = true
			if fewest == 0 || k < fewest {
				fewest = k
			}
			most = max(most, k)
		}
	}
	oneKind := true
	var kind *placement.Member
	for i := range req.Members {
		if m := &req.Members[i]; g.Aligned[i] {
			if kind == nil {
				kind = m
			} else if !sameSlice(kind.Eligible, m.Eligible) || !slices.Equal(kind.Request, m.Request) || kind.MaxPerNode != m.MaxPerNode {
				oneKind = false
			}
		}
	}
	for i := range out.Members {
		if !g.Aligned[i] {
			continue
		}
		m := &out.Members[i]
		switch {
		case m.Eligible == nil:
			if all == nil {
				all = offers
			}
			m.Eligible = all
		case len(m.Eligible) > 0:
			e, ok := narrowed[&m.Eligible[0]]
			if !ok {
				e = make([]bool, len(m.Eligible))
				for n := range e {
					e[n] = m.Eligible[n] && offers[n]
				}
				narrowed[&m.Eligible[0]] = e
			}
			m.Eligible = e
		}
	}
	if oneKind && fewest == most {
		for i := range out.Members {
			if m := &out.Members[i]; g.Aligned[i] && fewest > 0 && (m.MaxPerNode == 0 || fewest < m.MaxPerNode) {
				m.MaxPerNode = fewest
			}
		}
		return &out
	}
	// Slots as a resource: every node's vectors grow by one.
	dims := len(req.Resources)
	out.Resources = append(slices.Clone(req.Resources), SlotsResource)
	out.StableFree = false
	out.Nodes = slices.Clone(req.Nodes)
	backing := make([]int64, 2*(dims+1)*len(req.Nodes))
	for n := range out.Nodes {
		node := &out.Nodes[n]
		free, alloc := backing[:dims+1:dims+1], backing[dims+1:2*(dims+1):2*(dims+1)]
		backing = backing[2*(dims+1):]
		copy(free, node.Free)
		copy(alloc, node.Allocatable)
		free[dims] = int64(slots[n])
		alloc[dims] = free[dims]
		node.Free, node.Allocatable = free, alloc
	}
	for i := range out.Members {
		m := &out.Members[i]
		r := make(placement.Vector, dims+1)
		copy(r, m.Request)
		if g.Aligned[i] {
			r[dims] = 1
		}
		m.Request = r
	}
	return &out
}

// sameSlice reports whether a and b are one slice (or both nil).
func sameSlice(a, b []bool) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b) && (a == nil) == (b == nil)
	}
	return &a[0] == &b[0]
}

// planBudget bounds the work of trying rail sets, in nodes planned over:
// a small cluster tries every set that could hold the gang, a large one
// the first few (at least minTried); the candidates' order puts the
// likely best first.
const (
	planBudget = 16384
	minTried   = 4
)

// Plan plans req with the gang's aligned members rail-aligned and returns
// the plan and each member's rail set (0 for members not bound by rails).
// It first tries one set for the whole gang: the candidates in order,
// keeping the tightest plan (fewest domains at the loosest level first,
// then the next) of those that hold the gang, as many as planBudget
// allows, stopping at once at a plan in one domain of every level. Unless
// it found such a plan, it then plans every unit on its own set (unitSets)
// and keeps that plan when it is tighter or the only one. When nothing
// holds the gang it returns the last error, or a FitError that places
// nobody when there was no set to try.
func (g *Gang) Plan(ctx context.Context, planner placement.Planner, req *placement.Request) (*placement.Plan, []capacity.RailSet, error) {
	want, eligible := g.wanted(req)
	var last error
	var best *placement.Plan
	var bestSet capacity.RailSet
	planned := 0
	for _, c := range g.Candidates(eligible, want) {
		plan, err := planner.Plan(ctx, g.Narrow(req, c.Set))
		if err != nil {
			var fit *placement.FitError
			if !errors.As(err, &fit) {
				return nil, nil, err
			}
			last = err
			continue
		}
		if best == nil || tighter(plan, best) {
			best, bestSet = plan, c.Set
		}
		if planned++; planned >= max(minTried, planBudget/max(1, len(req.Nodes))) || tightest(best) {
			break
		}
	}
	if (best == nil || !tightest(best)) && g.units() > 1 {
		sets, slots := g.unitSets(eligible)
		if offered(slots, eligible) >= want {
			plan, err := planner.Plan(ctx, g.narrow(req, slots))
			var fit *placement.FitError
			switch {
			case err == nil && (best == nil || tighter(plan, best)):
				return plan, g.memberSets(plan, sets), nil
			case err != nil && !errors.As(err, &fit):
				return nil, nil, err
			case err != nil:
				last = err
			}
		}
	}
	if best != nil {
		sets := make([]capacity.RailSet, g.units())
		for u := range sets {
			sets[u] = bestSet
		}
		return best, g.memberSets(best, sets), nil
	}
	if last == nil {
		last = &placement.FitError{Wanted: len(req.Members), Reason: ErrNoRailSet.Error()}
	}
	return nil, nil, last
}

// wanted counts the aligned members and returns their eligibility (nil:
// every node), that of the first aligned member that has one.
func (g *Gang) wanted(req *placement.Request) (int, func(n int) bool) {
	want := 0
	var eligible func(n int) bool
	for i, a := range g.Aligned {
		if !a {
			continue
		}
		want++
		if e := req.Members[i].Eligible; e != nil && eligible == nil {
			eligible = func(n int) bool { return e[n] }
		}
	}
	return want, eligible
}

// offered sums the slots of eligible nodes.
func offered(slots []int, eligible func(n int) bool) int {
	total := 0
	for n, k := range slots {
		if eligible == nil || eligible(n) {
			total += k
		}
	}
	return total
}

// memberSets is each member's rail set under plan: its unit's set for
// the aligned members, else 0.
func (g *Gang) memberSets(plan *placement.Plan, units []capacity.RailSet) []capacity.RailSet {
	out := make([]capacity.RailSet, len(plan.NodeOf))
	for i, n := range plan.NodeOf {
		if i < len(g.Aligned) && g.Aligned[i] {
			out[i] = units[g.unitOf(n)]
		}
	}
	return out
}

// unitSets chooses every unit's rail set: its pinned set, or else the set
// on which the unit's eligible nodes take the most aligned members, then
// the one most of its nodes already in use offer, then the lowest rails.
// It returns the sets and each node's slots on its unit's set.
func (g *Gang) unitSets(eligible func(n int) bool) ([]capacity.RailSet, []int) {
	// Each unit's nodes counted by class, once: a unit's classes are few.
	byUnit, free := g.tally(eligible, g.units(), g.unitOf)
	sets := g.sets(free)
	chosen := make([]capacity.RailSet, g.units())
	for u, counts := range byUnit {
		if pin := g.pinnedOf(int32(u)); pin != 0 {
			chosen[u] = pin
			continue
		}
		var best Candidate
		for _, s := range sets {
			if c := g.offer(s, free, counts); c.Slots > 0 && cmp.Or(cmp.Compare(c.Slots, best.Slots), cmp.Compare(c.UsedNodes, best.UsedNodes), compareSets(best.Set, c.Set)) > 0 {
				best = c
			}
		}
		chosen[u] = best.Set
	}
	slots := make([]int, len(g.Class))
	for n, c := range g.Class {
		if s := chosen[g.unitOf(n)]; s != 0 && g.free(c).Contains(s) {
			slots[n] = g.Classes[c].Free.Slots(s)
		}
	}
	return chosen, slots
}

// tighter reports whether plan a uses fewer domains than b, at the
// loosest level where they differ.
func tighter(a, b *placement.Plan) bool {
	for l := range min(len(a.Spans), len(b.Spans)) {
		if a.Spans[l].Domains != b.Spans[l].Domains {
			return a.Spans[l].Domains < b.Spans[l].Domains
		}
	}
	return false
}

// tightest reports whether a plan uses one domain of every level above the
// node: no rail set can do better.
func tightest(p *placement.Plan) bool {
	for _, s := range p.Spans {
		if s.Level != scheduling.HostnameKey && s.Domains > 1 {
			return false
		}
	}
	return true
}

// Most plans as many of the aligned members as the units' rail sets hold
// (fewer than all of them: Plan found no plan for all), the lowest ranks
// first, and the others anywhere; a gang that prefers alignment loses
// fewer pairs of aligned members so than by a plan without rails. It
// returns the plan and each member's rail set (0 for those not aligned);
// an error when the sets hold fewer than two.
func (g *Gang) Most(ctx context.Context, planner placement.Planner, req *placement.Request) (*placement.Plan, []capacity.RailSet, error) {
	want, eligible := g.wanted(req)
	sets, slots := g.unitSets(eligible)
	total := offered(slots, eligible)
	if total < 2 || want < 3 {
		return nil, nil, &placement.FitError{Wanted: len(req.Members), Reason: ErrNoRailSet.Error()}
	}
	some := *g
	some.Aligned = make([]bool, len(g.Aligned))
	k := min(total, want-1)
	for i, a := range g.Aligned {
		if a && k > 0 {
			some.Aligned[i] = true
			k--
		}
	}
	plan, err := planner.Plan(ctx, some.narrow(req, slots))
	if err != nil {
		return nil, nil, err
	}
	return plan, some.memberSets(plan, sets), nil
}

// ErrNoRailSet says that no rail set is free on enough nodes.
var ErrNoRailSet = errors.New("no set of rails is free on enough nodes for the members in each scalable unit to use the same rails")
