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
	// Pinned, when not zero, is the only rail set the gang may use: the
	// one its running members use.
	Pinned capacity.RailSet
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
	nodes := make([]int, len(g.Classes))
	for n, c := range g.Class {
		if eligible == nil || eligible(n) {
			nodes[c]++
		}
	}
	free := make([]capacity.RailSet, len(g.Classes))
	for c := range g.Classes {
		if nodes[c] > 0 {
			free[c] = g.free(int32(c))
		}
	}
	var sets []capacity.RailSet
	if g.Pinned != 0 {
		sets = []capacity.RailSet{g.Pinned}
	} else {
		sets = g.sets(free)
	}
	var out []Candidate
	for _, s := range sets {
		c := Candidate{Set: s}
		for k, f := range free {
			if nodes[k] == 0 || !f.Contains(s) {
				continue
			}
			c.Slots += nodes[k] * g.Classes[k].Free.Slots(s)
			if g.Classes[k].Used {
				c.UsedNodes += nodes[k]
			}
		}
		if c.Slots >= want && c.Slots > 0 {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b Candidate) int {
		return cmp.Or(cmp.Compare(b.UsedNodes, a.UsedNodes), cmp.Compare(a.Slots, b.Slots), compareSets(a.Set, b.Set))
	})
	return out
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
// aligned members as its slots on s. When the aligned members are one kind
// of member (one request, one eligibility slice) and every such node has
// as many slots, a per-node cap on them says it; otherwise the copy counts
// slots as one more resource, which each aligned member asks one of. req is
// not written; the copy shares what it does not change.
func (g *Gang) Narrow(req *placement.Request, s capacity.RailSet) *placement.Request {
	out := *req
	out.Members = slices.Clone(req.Members)
	narrowed := map[*bool][]bool{}
	var all []bool
	// slots per class on s.
	slots := make([]int, len(g.Classes))
	for c := range g.Classes {
		if g.free(int32(c)).Contains(s) {
			slots[c] = g.Classes[c].Free.Slots(s)
		}
	}
	offers := make([]bool, len(req.Nodes))
	fewest, most := 0, 0
	for n := range req.Nodes {
		if k := slots[g.Class[n]]; k > 0 {
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
		free[dims] = int64(slots[g.Class[n]])
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

// Plan plans req with the gang's aligned members on one rail set and
// returns the plan and its set. It plans the candidates in order and keeps
// the tightest plan (fewest domains at the loosest level first, then the
// next) of those that hold the gang, as many as planBudget allows,
// stopping at once at a plan in one domain of every level. When no set holds the gang it returns the
// last candidate's error, or a FitError that places nobody when there was
// no candidate at all.
func (g *Gang) Plan(ctx context.Context, planner placement.Planner, req *placement.Request) (*placement.Plan, capacity.RailSet, error) {
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
	var last error
	var best *placement.Plan
	var bestSet capacity.RailSet
	planned := 0
	for _, c := range g.Candidates(eligible, want) {
		plan, err := planner.Plan(ctx, g.Narrow(req, c.Set))
		if err != nil {
			var fit *placement.FitError
			if !errors.As(err, &fit) {
				return nil, 0, err
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
	if best != nil {
		return best, bestSet, nil
	}
	if last == nil {
		last = &placement.FitError{Wanted: len(req.Members), Reason: ErrNoRailSet.Error()}
	}
	return nil, 0, last
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

// Most plans as many of the aligned members as one rail set holds (fewer
// than all of them: Plan found no set for all), the lowest ranks first,
// and the others anywhere; a gang that prefers alignment loses fewer pairs
// of aligned members so than by a plan without rails. It returns the plan,
// the set and which members it aligned; an error when no set holds two.
func (g *Gang) Most(ctx context.Context, planner placement.Planner, req *placement.Request) (*placement.Plan, capacity.RailSet, []bool, error) {
	want := 0
	var eligible func(n int) bool
	for i, a := range g.Aligned {
		if a {
			want++
			if e := req.Members[i].Eligible; e != nil && eligible == nil {
				eligible = func(n int) bool { return e[n] }
			}
		}
	}
	var best *Candidate
	for _, c := range g.Candidates(eligible, 2) {
		if best == nil || c.Slots > best.Slots {
			best = &c
		}
	}
	if best == nil || want < 3 {
		return nil, 0, nil, &placement.FitError{Wanted: len(req.Members), Reason: ErrNoRailSet.Error()}
	}
	some := *g
	some.Aligned = make([]bool, len(g.Aligned))
	k := min(best.Slots, want-1)
	for i, a := range g.Aligned {
		if a && k > 0 {
			some.Aligned[i] = true
			k--
		}
	}
	plan, err := planner.Plan(ctx, some.Narrow(req, best.Set))
	if err != nil {
		return nil, 0, nil, err
	}
	return plan, best.Set, some.Aligned, nil
}

// ErrNoRailSet says that no rail set is free on enough nodes.
var ErrNoRailSet = errors.New("no set of rails is free on enough nodes for every member to use the same rails")
