package topology

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/klog/v2"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// SubgroupResult says where one subgroup of a hierarchical gang went, with
// the structure behind placement.SubgroupPlan.
type SubgroupResult struct {
	// Name is the subgroup's label (placement.SubgroupRef.Label).
	Name string
	// Parent is the index in Result.Subgroups of the parent; -1 for the
	// root.
	Parent int
	// Level is the label key of the level of the domain that holds the
	// subgroup's bound members: its policy's level, a looser one when
	// Relaxed, or the tightest that holds them when it has no level of its
	// own. scheduling.HostnameKey for one node; empty for the whole
	// cluster, or when no member is bound by topology.
	Level string
	// LevelName names Level for people.
	LevelName string
	// Domain is the path to that domain, loosest level first; DomainName
	// names it for people.
	Domain     []PathElem
	DomainName string
	// Spans counts, per label level loosest first and then nodes, the
	// domains holding the subgroup's bound members.
	Spans []LevelSpan
	// Bound is how many of its members topology binds.
	Bound int
	// Relaxed is set when its preferred level could not hold it.
	Relaxed bool
}

// plan is r as placement.SubgroupPlan.
func (r *SubgroupResult) plan() placement.SubgroupPlan {
	out := placement.SubgroupPlan{Name: r.Name, Parent: r.Parent, Level: r.Level, Domain: r.DomainName, Relaxed: r.Relaxed}
	for _, sp := range r.Spans {
		out.Spans = append(out.Spans, placement.Span{Level: sp.Key, Domains: sp.Domains})
	}
	return out
}

// SubgroupSpans counts, for every subgroup of req's hierarchy in the order
// req.Subgroups lists them, the domains per level (loosest first, then
// nodes) that the subgroup's members bound by topology use in a plan. Like
// Spans it works for any planner's plan, so a simulator can check that
// segments stay inside their domains whichever planner placed them. req
// must hold the nodes the tree was built from.
func (t *Tree) SubgroupSpans(req *placement.Request, nodeOf []int) [][]LevelSpan {
	refs := req.Subgroups()
	out := make([][]LevelSpan, len(refs))
	for g := range refs {
		out[g] = t.levelSpans(t.spansOf(t.boundPositions(req, refs[g].Members, nodeOf)))
	}
	return out
}

// boundPositions lists, sorted, the positions of the nodes of the given
// members that topology binds.
func (t *Tree) boundPositions(req *placement.Request, members, nodeOf []int) []int32 {
	var pos []int32
	for _, i := range members {
		if req.Members[i].Accelerated {
			pos = append(pos, t.pos[nodeOf[i]])
		}
	}
	slices.Sort(pos)
	return pos
}

// subgroupResult describes subgroup ref in a plan, with its domain taken at
// level l (ignored when it has no bound member).
func (t *Tree) subgroupResult(req *placement.Request, ref *placement.SubgroupRef, nodeOf []int, l int, relaxed bool) SubgroupResult {
	pos := t.boundPositions(req, ref.Members, nodeOf)
	r := SubgroupResult{Name: ref.Label(), Parent: ref.Parent, Spans: t.levelSpans(t.spansOf(pos)), Bound: len(pos)}
	if len(pos) > 0 {
		d := t.anc[l][pos[0]]
		r.Level, r.LevelName = t.levels[l].Key, t.levels[l].Name
		r.Domain, r.DomainName = t.path(l, d), t.name(l, d)
		r.Relaxed = relaxed
	}
	return r
}

// result turns the final witness into a Result: it places the loose
// members, describes every subgroup and says how the root's domain ranks
// against plans made in other groups of nodes.
func (h *hier) result(w *witness) (*Result, rank, error) {
	t := h.t
	nodeOf := slices.Clone(w.nodeOf)
	res := &Result{
		Plan:  &placement.Plan{NodeOf: nodeOf},
		Bound: int(h.u.total),
		Exact: !h.cut && w.exact,
	}
	levels := make([]int, len(h.sg))
	for g := range h.sg {
		levels[g] = max(h.sg[g].start, w.common[g])
	}
	var ch *choice
	var rk rank
	lo, hi := int32(0), int32(0)
	if h.u.total > 0 {
		pos := t.boundPositions(h.req, h.refs[0].Members, nodeOf)
		l := levels[0]
		ch = &choice{level: l, dom: t.anc[l][pos[0]], spans: t.spansOf(pos)}
		lo, hi = t.dom[l][ch.dom].lo, t.dom[l][ch.dom].hi
		rk = rank{level: l, room: h.u.room[l][ch.dom]}
	}
	loose, err := h.placeLoose(nodeOf, lo, hi)
	if err != nil {
		return nil, rank{}, err
	}
	res.Subgroups = make([]SubgroupResult, len(h.refs))
	for g := range h.refs {
		sg := &h.sg[g]
		relaxed := sg.own && !sg.required && levels[g] > sg.start
		res.Subgroups[g] = t.subgroupResult(h.req, &h.refs[g], nodeOf, levels[g], relaxed)
		res.Plan.Subgroups = append(res.Plan.Subgroups, res.Subgroups[g].plan())
	}
	root := &res.Subgroups[0]
	res.Level, res.LevelName, res.Domain, res.Spans, res.Relaxed = root.Level, root.LevelName, root.Domain, root.Spans, root.Relaxed
	for _, sp := range res.Spans {
		res.Plan.Spans = append(res.Plan.Spans, placement.Span{Level: sp.Key, Domains: sp.Domains})
	}
	res.Plan.Summary = h.u.summary(res, ch, h.sg[0].start, loose) + res.describeChildren(0, "; ")
	if v := klog.FromContext(h.ctx).V(4); v.Enabled() {
		v.Info("Hierarchical gang planned", "gang", h.req.Gang, "summary", res.Plan.Summary, "searches", h.searches,
			"trials", h.p.searchBudget-h.trials, "exact", res.Exact)
	}
	return res, rk, nil
}

// describeChildren says where subgroup g's children went, after sep:
// "4 subgroups in NVLink domains c1, c2, c5, c6" for leaves that share a
// level, else "subgroups: a in leaf l1 (a-0 in NVLink domain c1, ...), b in
// NVLink domain c4". Children without bound members are left out.
func (res *Result) describeChildren(g int, sep string) string {
	var kids []int
	for c := range res.Subgroups {
		if res.Subgroups[c].Parent == g && res.Subgroups[c].Bound > 0 {
			kids = append(kids, c)
		}
	}
	if len(kids) == 0 {
		return ""
	}
	same := true
	for _, c := range kids {
		r := &res.Subgroups[c]
		same = same && !r.Relaxed && r.Level == res.Subgroups[kids[0]].Level && res.describeChildren(c, "") == ""
	}
	if first := &res.Subgroups[kids[0]]; same && len(kids) > 1 && first.Level != "" {
		names := make([]string, len(kids))
		for i, c := range kids {
			names[i] = res.Subgroups[c].DomainName
		}
		return fmt.Sprintf("%s%s in %s %s", sep, count(len(kids), "subgroup"), plural(first.LevelName), strings.Join(names, ", "))
	}
	parts := make([]string, len(kids))
	for i, c := range kids {
		parts[i] = res.Subgroups[c].describe()
		if inner := res.describeChildren(c, ""); inner != "" {
			parts[i] += " (" + strings.TrimPrefix(inner, "subgroups: ") + ")"
		}
	}
	return sep + "subgroups: " + strings.Join(parts, ", ")
}

// describe says where one subgroup went: "a in leaf l1".
func (r *SubgroupResult) describe() string {
	where := "across the cluster"
	if r.Level != "" {
		where = "in " + r.LevelName + " " + r.DomainName
	}
	s := r.Name + " " + where
	if r.Relaxed {
		s += " (relaxed)"
	}
	return s
}

// plural is noun's plural, as count spells it.
func plural(noun string) string { return strings.TrimPrefix(count(2, noun), "2 ") }

// noteAt records why decision depth failed, when no deeper decision failed
// before; reason is only called then.
func (s *search) noteAt(depth int, reason func() string) {
	if depth <= s.note.depth {
		return
	}
	s.note = failNote{depth: depth, placed: s.placedBefore(depth), reason: reason()}
}

// placedBefore counts the bound members of leaves whose every decision
// comes before depth.
func (s *search) placedBefore(depth int) int {
	at := make([]int, len(s.h.sg))
	for g := range at {
		at[g] = -1
	}
	for i, g := range s.order {
		at[g] = i
	}
	n := 0
	for g := range s.h.sg {
		sg := &s.h.sg[g]
		if !sg.leaf || sg.total == 0 {
			continue
		}
		last := -1
		for o := g; o >= 0; o = s.h.sg[o].parent {
			last = max(last, at[o])
		}
		if last < depth {
			n += int(sg.total)
		}
	}
	return n
}

// noteNoRoom records that no domain of level l inside the parent's domain
// has room for subgroup g at decision i.
func (s *search) noteNoRoom(i, g, pl int, pk int32, l int) {
	s.noteAt(i, func() string {
		t := s.h.t
		if k, ok := s.homeOf(g, pl, pk, l); ok {
			var r int64
			for sh, n := range s.h.sg[g].demand {
				r += min(n, max(s.h.u.slots[sh][l][k]-s.h.reserved[sh][l][k], 0))
			}
			return fmt.Sprintf("%s: %s, the %s that runs its other members, has room for %d of its %s",
				s.wants(g, l), t.name(l, k), t.levels[l].Name, r, s.h.describePods(g))
		}
		best, room := int32(-1), int64(-1)
		s.eachChild(pl, pk, func(m int, a int32) {
			lo, hi := t.dom[m][a].lo, t.dom[m][a].hi
			for k := t.anc[l][lo]; k <= t.anc[l][hi-1]; k++ {
				var r int64
				for sh, n := range s.h.sg[g].demand {
					r += min(n, max(s.h.u.slots[sh][l][k]-s.h.reserved[sh][l][k], 0))
				}
				if r > room {
					best, room = k, r
				}
			}
		})
		return fmt.Sprintf("%s: no %s%s has room for its %s; the roomiest, %s, has room for %d",
			s.wants(g, l), t.levels[l].Name, s.inside(pl, pk), s.h.describePods(g), t.name(l, best), room)
	})
}

// noteClass records that the domains left hold fewer of decision i's
// identical siblings than are left to place.
func (s *search) noteClass(i, g, pl int, pk int32, l, left int, hold int64) {
	s.noteAt(i, func() string {
		return fmt.Sprintf("%s, and %s like it: the %s%s have room for %d of the %d, %s each",
			s.wants(g, l), count(left-1, "more subgroup"), plural(s.h.t.levels[l].Name), s.inside(pl, pk), hold, left, s.h.describePods(g))
	})
}

// wants says what the search asked of subgroup g: `subgroup "a" must run
// inside one leaf (required)`.
func (s *search) wants(g, l int) string {
	sg := &s.h.sg[g]
	why := ""
	switch {
	case sg.own && sg.required && l == sg.start:
		why = " (required)"
	case sg.own && l == sg.start:
		why = " (preferred)"
	}
	return fmt.Sprintf("subgroup %q must run inside one %s%s", s.h.refs[g].Label(), s.h.t.levels[l].Name, why)
}

// inside names the parent's domain for messages: " in spine s0", or
// nothing for the cluster.
func (s *search) inside(pl int, pk int32) string {
	if pl >= s.h.t.top() {
		return ""
	}
	return fmt.Sprintf(" in %s %s", s.h.t.levels[pl].Name, s.h.t.name(pl, pk))
}

// describePods names subgroup g's bound members: "16 pods asking cpu=1
// nvidia.com/gpu=4", or "16 pods" with several shapes.
func (h *hier) describePods(g int) string {
	sg := &h.sg[g]
	shapes := 0
	var request placement.Vector
	for s, n := range sg.demand {
		if n > 0 {
			shapes++
			request = h.u.bound[s].request
		}
	}
	if shapes == 1 {
		return fmt.Sprintf("%s asking %s", count(int(sg.total), "pod"), placement.Describe(h.req.Resources, request))
	}
	return count(int(sg.total), "pod")
}

// failure turns the end of the last search into the error Plan returns: the
// context's error, a budget that ran out before any plan was found, or why
// no placement exists.
func (h *hier) failure(err error) error {
	s := h.last
	switch {
	case err == errBudget:
		reason := fmt.Sprintf("the search budget of %d domain trials ran out before every subgroup had a domain; "+
			"the furthest attempt gave domains to %d of %d subgroups", h.p.searchBudget, s.deepest, len(s.order))
		if s.note.reason != "" {
			reason += "; the deepest failure: " + s.note.reason
		}
		return &placement.FitError{Placed: s.note.placed, Wanted: len(h.req.Members), Reason: reason}
	case err != nil:
		return err
	}
	return &placement.FitError{Placed: s.note.placed, Wanted: len(h.req.Members), Reason: s.note.reason}
}
