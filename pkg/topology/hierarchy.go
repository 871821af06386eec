package topology

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/klog/v2"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// DefaultSearchBudget bounds the search for a hierarchical gang, in domain
// trials per Plan call: each time the search puts one subgroup into one
// candidate domain to see whether the rest still fits, and each time it
// packs the members of a set of subgroups onto the nodes of their domain,
// counts one. A segmented gang on a cluster with room takes about one trial
// per subgroup and search stage; ten thousand leave room for heavy
// backtracking while keeping a gang that cannot fit to a few tens of
// milliseconds on 5,000 nodes. Past it the planner returns the best complete
// plan it found, or, when it has none, a *placement.FitError saying that the
// budget ran out.
const DefaultSearchBudget = 10_000

// planHierarchy plans a gang whose Request has a Hierarchy (see the package
// doc): one plan for all subgroups, inside one group of nodes when
// req.Groups splits them.
func (p *Planner) planHierarchy(ctx context.Context, req *placement.Request) (*Result, error) {
	if err := req.ValidateHierarchy(); err != nil {
		return nil, err
	}
	if len(req.Hierarchy.Children) == 0 {
		return p.planOneSubgroup(ctx, req)
	}
	if req.Groups.Split() && anyBound(req) {
		return p.planGroups(ctx, req, func(t *Tree, k int, at []int32, _ *slotScratch) (*Result, rank, error) {
			return p.planHierarchyIn(ctx, t, req, k, at)
		})
	}
	res, _, err := p.planHierarchyIn(ctx, p.Tree(req), req, -1, nil)
	return res, err
}

// planOneSubgroup plans a hierarchy of one subgroup as the flat gang it is,
// and describes it as the root subgroup.
func (p *Planner) planOneSubgroup(ctx context.Context, req *placement.Request) (*Result, error) {
	flat := *req
	flat.Hierarchy = nil
	res, err := p.PlanDetailed(ctx, &flat)
	if err != nil {
		return nil, err
	}
	t := p.Tree(req)
	refs := req.Subgroups()
	l := t.top()
	if res.Level != "" {
		if l, err = t.levelOf(res.Level); err != nil {
			return nil, err
		}
	}
	res.Subgroups = []SubgroupResult{t.subgroupResult(req, &refs[0], res.Plan.NodeOf, l, res.Relaxed)}
	res.Plan.Subgroups = []placement.SubgroupPlan{res.Subgroups[0].plan()}
	return res, nil
}

// planHierarchyIn plans the hierarchy on tree t, inside group k of
// req.Groups (-1 for all nodes), whose nodes are at depth-first positions
// at.
func (p *Planner) planHierarchyIn(ctx context.Context, t *Tree, req *placement.Request, k int, at []int32) (*Result, rank, error) {
	sub := req
	if k >= 0 {
		sub = req.InGroupAt(k, t.nodesAt(at), nil)
	}
	h, err := newHier(ctx, p, t, sub, req, k)
	if err != nil {
		return nil, rank{}, err
	}
	if len(h.u.bound) > 0 && !h.u.fits(t.top(), 0) {
		return nil, rank{}, h.u.clusterFitError()
	}
	w, err := h.run()
	if err != nil {
		return nil, rank{}, err
	}
	return h.result(w)
}

// hier is one hierarchical Plan call inside one group of nodes: the
// subgroups as the search sees them, and the whole gang as one flat gang,
// whose usage counts slots per shape and places the loose members. It
// belongs to that call alone.
type hier struct {
	ctx context.Context
	p   *Planner
	t   *Tree
	req *placement.Request
	u   *usage
	// refs are the request's subgroups in pre-order; sg holds what the
	// search needs of each, by the same index.
	refs []placement.SubgroupRef
	sg   []subgroup
	// prio is the order of preference between subgroups: breadth first,
	// siblings in the order the request gives them.
	prio []int
	// shapeOf[i] is the index in u.bound of member i's shape; -1 for a
	// member not bound by topology.
	shapeOf []int
	// trials is what is left of the search budget; pack of the exact
	// packer's budget (see defaultBudget), shared by every pack.
	trials, pack int64
	// cut is set once a search ran out of budget after a plan was found:
	// the levels of the plan are then not proven the least.
	cut bool
	// packAll is set when the gang has several bound shapes: slot counts
	// then do not prove that members pack, so every search packs them.
	// With one shape only the final plan is packed.
	packAll bool
	// searches counts the searches run, for logs; last is the last one,
	// whose note explains a failure.
	searches int
	last     *search
	// reserved[s][l][k] and used[l][k] are the search's counts (see
	// search), kept here so every search reuses them; each search leaves
	// them as it found them.
	reserved [][][]int64
	used     [][]int32
	// nodes is the request's nodes for packing, copied once per call; a
	// pack writes the Free of the nodes it takes from (mark) and gives it
	// back.
	nodes []placement.Node
	mark  []bool
	// holds[l][k] is scratch for classFits and coverOrder: how many more
	// members of the class being decided domain k of level l holds. Only
	// the entries under the current parent's domain are meaningful.
	holds [][]int64
}

// subgroup is what the search knows of one subgroup.
type subgroup struct {
	parent   int
	children []int
	// start is the tree level of the subgroup's policy, 0 without one;
	// own is set when the policy names a level, required when it must hold.
	start         int
	own, required bool
	// demand[s] counts the subtree's members of bound shape s; total is
	// their sum.
	demand []int64
	total  int64
	// leaf is set for a subgroup with members; bound lists its members
	// bound by topology, in rank order.
	leaf  bool
	bound []int
	// anchors are the depth-first positions of the subtree's anchors that
	// lie in the group of nodes being planned, sorted.
	anchors []int32
	// pins are the domains the subtree's required subgroups with bound
	// members and anchors must sit in (see pin); a domain of the subgroup
	// that leaves one of them out is no candidate.
	pins []pin
}

// pin is the domain a required subgroup with anchors must sit in: the
// domain of its level that holds most of its anchors, as a position inside
// it. The running members decided it, so a tighter or looser domain for the
// subgroup or an ancestor must agree with it.
type pin struct {
	level int
	pos   int32
}

// newHier prepares the search for req, the request narrowed to group k of
// orig.Groups (k -1 and req orig for all nodes). Anchors come from orig, so
// that the indices subgroups give stay valid.
func newHier(ctx context.Context, p *Planner, t *Tree, req, orig *placement.Request, k int) (*hier, error) {
	u, err := newUsage(t, req)
	if err != nil {
		return nil, err
	}
	refs := req.Subgroups()
	h := &hier{ctx: ctx, p: p, t: t, req: req, u: u, refs: refs, sg: make([]subgroup, len(refs)),
		trials: p.searchBudget, pack: p.budget, packAll: len(u.bound) > 1}
	h.shapeOf = make([]int, len(req.Members))
	for i := range h.shapeOf {
		h.shapeOf[i] = -1
	}
	for s := range u.bound {
		for _, i := range u.bound[s].members {
			h.shapeOf[i] = s
		}
	}
	for g := range refs {
		ref := &refs[g]
		sg := &h.sg[g]
		sg.parent = ref.Parent
		if ref.Parent >= 0 {
			h.sg[ref.Parent].children = append(h.sg[ref.Parent].children, g)
		}
		policy := ref.Subgroup.Policy
		if g == 0 {
			policy = req.Policy
		}
		if policy.Level != "" {
			if sg.start, err = t.levelOf(policy.Level); err != nil {
				return nil, fmt.Errorf("%s: %w", ref.Label(), err)
			}
			sg.own, sg.required = true, policy.Required
		}
		sg.leaf = len(ref.Subgroup.Children) == 0
		sg.demand = make([]int64, len(u.bound))
		for _, i := range ref.Members {
			if s := h.shapeOf[i]; s >= 0 {
				sg.demand[s]++
				sg.total++
				if sg.leaf {
					sg.bound = append(sg.bound, i)
				}
			}
		}
		for _, a := range ref.Anchors {
			if n := orig.Anchors[a]; k < 0 || orig.Groups.Of[n] == k {
				sg.anchors = append(sg.anchors, t.pos[n])
			}
		}
		slices.Sort(sg.anchors)
	}
	for g := range h.sg { // after every subgroup's anchors and totals are known
		sg := &h.sg[g]
		if !sg.required || sg.total == 0 || len(sg.anchors) == 0 {
			continue
		}
		k, _ := h.home(g, t.top()+1, 0, sg.start)
		for o := g; o >= 0; o = h.sg[o].parent {
			h.sg[o].pins = append(h.sg[o].pins, pin{level: sg.start, pos: t.dom[sg.start][k].lo})
		}
	}
	// Breadth first: a subgroup is preferred to its descendants, and
	// siblings go in the order the caller gave.
	h.prio = append(h.prio, 0)
	for i := 0; i < len(h.prio); i++ {
		h.prio = append(h.prio, h.sg[h.prio[i]].children...)
	}
	h.reserved = make([][][]int64, len(u.bound))
	for s := range h.reserved {
		h.reserved[s] = make([][]int64, len(t.dom))
		for l := range t.dom {
			h.reserved[s][l] = make([]int64, len(t.dom[l]))
		}
	}
	h.used = make([][]int32, len(t.dom))
	h.holds = make([][]int64, len(t.dom))
	for l := range t.dom {
		h.used[l] = make([]int32, len(t.dom[l]))
		h.holds[l] = make([]int64, len(t.dom[l]))
	}
	return h, nil
}

// run finds the plan in stages, each made of searches (see search) that ask
// whether every subgroup fits inside one domain of a given level, its cap:
//
//  1. Every subgroup with a level at that level. This is the common case,
//     and then the only search of this stage.
//  2. When that fails: required levels alone, then, in order of preference,
//     each preferred subgroup at the tightest level at or above its own
//     that still lets every subgroup fit, given the levels fixed before it.
//  3. In order of preference, each subgroup as tight as it goes below what
//     stage 1 or 2 gave it, given the caps fixed before it, so that a
//     gang preferring a spine that fits in a leaf goes in a leaf, as a flat
//     gang would.
//
// Every search that succeeds yields a complete plan that keeps every cap
// fixed so far (its witness), and the witness's own levels spare the
// searches they already answer; a last search at the final caps then makes
// every choice by best fit. When the budget runs out after a plan was
// found, run returns the last one and sets cut.
func (h *hier) run() (*witness, error) {
	w, err := h.stages()
	if err != nil || w.nodeOf != nil {
		return w, err
	}
	packed, reason, err := w.s.pack()
	if err != nil {
		return nil, err
	}
	if packed == nil { // the counts are exact with one shape: a bug
		return nil, fmt.Errorf("gang %s: a placement that fits by slot counts does not pack: %s", h.req.Gang, reason)
	}
	return packed, nil
}

// stages runs the stages run describes and returns the last witness.
func (h *hier) stages() (*witness, error) {
	top := h.t.top()
	caps := make([]int, len(h.sg))
	for g := range caps {
		caps[g] = top
		if h.sg[g].own {
			caps[g] = h.sg[g].start
		}
	}
	best, ok, err := h.search(caps)
	if err != nil {
		return nil, h.failure(err)
	}
	if !ok {
		for g := range caps {
			if !h.sg[g].required {
				caps[g] = top
			}
		}
		if best, ok, err = h.search(caps); err != nil || !ok {
			return nil, h.failure(err)
		}
		for _, g := range h.prio {
			sg := &h.sg[g]
			if !sg.own || sg.required || sg.total == 0 {
				continue
			}
			caps[g] = max(sg.start, best.common[g])
			for v := sg.start; v < caps[g]; v++ {
				w, ok, err := h.search(withCap(caps, g, v))
				if err != nil {
					return h.stop(best, err)
				}
				if ok {
					best, caps[g] = w, v
				}
			}
		}
	}
	for _, g := range h.prio {
		if h.sg[g].total == 0 {
			continue
		}
		caps[g] = min(caps[g], best.common[g])
		for v := caps[g] - 1; v >= 0 && h.someDomainHolds(g, v); v = caps[g] - 1 {
			w, ok, err := h.search(withCap(caps, g, v))
			if err != nil {
				return h.stop(best, err)
			}
			if !ok {
				break
			}
			best, caps[g] = w, w.common[g]
		}
	}
	// A witness may sit tighter than the caps it was found with; one more
	// search at the final caps makes every choice by best fit at its final
	// level. It cannot fail for want of room: the witness fits.
	if !slices.Equal(best.caps, caps) {
		w, ok, err := h.search(caps)
		if err != nil {
			return h.stop(best, err)
		}
		if ok {
			best = w
		}
	}
	return best, nil
}

// withCap returns caps with subgroup g's set to v. The search only reads
// it, so the copy is cheap insurance against a stage that keeps caps.
func withCap(caps []int, g, v int) []int {
	c := append([]int(nil), caps...)
	c[g] = v
	return c
}

// stop ends the search early on err: a context error ends the call, and a
// spent budget returns the best plan found so far, whose levels are then not
// proven the least.
func (h *hier) stop(best *witness, err error) (*witness, error) {
	if err != errBudget {
		return nil, err
	}
	h.cut = true
	klog.FromContext(h.ctx).V(4).Info("Search budget spent; keeping the best plan found", "gang", h.req.Gang,
		"budget", h.p.searchBudget, "searches", h.searches)
	return best, nil
}

// someDomainHolds reports whether some domain of level l has, before
// anything is placed, the slots of every shape subgroup g asks for: no
// search with g capped at l can succeed otherwise.
func (h *hier) someDomainHolds(g, l int) bool {
	d := h.sg[g].demand
next:
	for k := range h.t.dom[l] {
		for s, n := range d {
			if n > 0 && h.u.slots[s][l][k] < n {
				continue next
			}
		}
		return true
	}
	return false
}
