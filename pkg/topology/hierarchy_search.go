package topology

import (
	"cmp"
	"errors"
	"slices"
)

// errBudget ends a search whose budget ran out.
var errBudget = errors.New("search budget spent")

// A search asks whether every subgroup g fits inside one domain of level
// caps[g], or of its parent's level when that is tighter, and returns a
// plan that shows it (a witness).
//
// It decides subgroups one at a time, parents before children (breadth
// first; among siblings the tighter level, then the larger, first), and
// gives each a domain inside its parent's. A subgroup whose level is its
// parent's takes the parent's domain and is no decision. Candidates come in
// best-fit order (see candidates): identical siblings by how they cover
// what is left of them; then the domains that add the fewest new domains to
// what the subgroups decided so far and the gang's running members use,
// loosest level first, so that siblings gather; then the least room left
// for the subgroup's shapes, so that roomy domains stay whole; then the
// fuller parent, grandparent and so on; then tree order. When a later
// subgroup finds no candidate, or the members do not pack, the search backs
// off to the previous decision's next candidate (backtracking), so a
// sibling never keeps a domain another needs.
//
// Capacity is counted per bound shape and domain: a decision reserves the
// subgroup's members in its domain and in the domains around it up to its
// parent's, which reserved them above. With one shape the counts are exact:
// a domain whose counts hold its subgroups holds their members. With
// several, the counts are necessary only, and packing (see pack) is the
// final test of every complete set of decisions.
//
// Two pruning rules keep failed searches short. Identical siblings (leaves
// with the same shapes, the same level and no anchors) are decided one
// after another, and a domain one of them failed in is closed to the ones
// after it: swapping two identical siblings changes nothing. Before
// deciding one of them, the search checks that the domains left can hold
// all of those still to decide.
type search struct {
	h    *hier
	caps []int
	// eff[g] is the level subgroup g is placed at: min(caps[g], its
	// parent's). dom[g] is its domain there, for decisions once decided.
	eff []int
	dom []int32
	// order lists the decisions; decision[g] says whether g is one.
	// owner[g] is the nearest strict ancestor of g that is a decision (-1
	// for the root), whose domain g's lies in.
	order    []int
	decision []bool
	owner    []int
	// class[i] is the index in order of the first decision of the class of
	// identical siblings of order[i], or -1 when it has no identical
	// sibling.
	class []int
	// forbidden lists the domains closed to later members of a class.
	forbidden []forbid
	// deepest is the most decisions made at once; note explains the
	// failure of the deepest decision that failed.
	deepest int
	note    failNote
	// w is the witness once the search succeeds.
	w *witness
}

type forbid struct {
	class int
	k     int32
}

// failNote explains why a search failed at decision depth.
type failNote struct {
	depth int
	// placed counts the bound members whose subgroups all had domains.
	placed int
	reason string
}

// witness is a complete plan for the bound members.
type witness struct {
	// nodeOf[i] is member i's node; -1 for members not bound by topology.
	nodeOf []int
	// common[g] is the tightest level holding subgroup g's bound members;
	// -1 when it has none.
	common []int
	// exact is set when every pack was proven the tightest.
	exact bool
	// caps are the caps of the search that found it, and s the search,
	// whose decisions pack can turn into nodes later.
	caps []int
	s    *search
}

// domainLevels is, for every subgroup, the tightest level one of whose
// domains holds the domains the search gave its leaves: where its members
// will be, at worst, once packed; -1 for a subgroup without bound members.
func (s *search) domainLevels() []int {
	h, t := s.h, s.h.t
	lvl := make([]int, len(h.sg))
	pos := make([]int32, len(h.sg))
	for g := len(h.sg) - 1; g >= 0; g-- { // children before parents
		lvl[g] = -1
		sg := &h.sg[g]
		switch {
		case sg.total == 0:
		case sg.leaf:
			lvl[g] = s.eff[g]
			pos[g] = t.dom[lvl[g]][s.domOf(g)].lo
		default:
			for _, c := range sg.children {
				if lvl[c] < 0 {
					continue
				}
				if lvl[g] < 0 {
					lvl[g], pos[g] = lvl[c], pos[c]
					continue
				}
				l := max(lvl[g], lvl[c])
				for l < t.top() && t.anc[l][pos[g]] != t.anc[l][pos[c]] {
					l++
				}
				lvl[g] = l
			}
		}
	}
	return lvl
}

// search runs one search with the given caps and reports whether it found
// a witness. It fails with errBudget when the budget runs out and with the
// context's error when that ends. It leaves h's counts as it found them.
func (h *hier) search(caps []int) (*witness, bool, error) {
	h.searches++
	s := h.newSearch(caps)
	h.markAnchors(1)
	ok, err := s.decide(0)
	h.markAnchors(-1)
	h.last = s
	if ok && err == nil {
		s.w.caps = slices.Clone(caps)
	}
	return s.w, ok && err == nil, err
}

func (h *hier) newSearch(caps []int) *search {
	t, n := h.t, len(h.sg)
	s := &search{h: h, caps: caps, eff: make([]int, n), dom: make([]int32, n), owner: make([]int, n), note: failNote{depth: -1}}
	for g := range h.sg { // pre-order: parents first
		s.eff[g] = min(caps[g], t.top())
		if p := h.sg[g].parent; p >= 0 {
			s.eff[g] = min(s.eff[g], s.eff[p])
		}
	}
	rep := make([]int, n)
	queue := []int{0}
	for i := 0; i < len(queue); i++ {
		kids := slices.Clone(h.sg[queue[i]].children)
		for _, a := range kids {
			rep[a] = a
			for _, b := range kids {
				if b < a && s.identical(a, b) {
					rep[a] = b
					break
				}
			}
		}
		slices.SortStableFunc(kids, func(a, b int) int {
			return cmp.Or(cmp.Compare(s.eff[a], s.eff[b]), cmp.Compare(h.sg[b].total, h.sg[a].total), cmp.Compare(rep[a], rep[b]))
		})
		queue = append(queue, kids...)
	}
	s.decision = make([]bool, n)
	for _, g := range queue {
		p := h.sg[g].parent
		if h.sg[g].total > 0 && (p < 0 || s.eff[g] < s.eff[p]) {
			s.decision[g] = true
			s.order = append(s.order, g)
		}
	}
	for g := range h.sg {
		s.owner[g] = -1
		if p := h.sg[g].parent; p >= 0 {
			s.owner[g] = p
			if !s.decision[p] {
				s.owner[g] = s.owner[p]
			}
		}
	}
	s.class = make([]int, len(s.order))
	for i, g := range s.order {
		s.class[i] = -1
		if i > 0 && h.sg[g].parent == h.sg[s.order[i-1]].parent && rep[g] == rep[s.order[i-1]] {
			if s.class[i-1] < 0 {
				s.class[i-1] = i - 1
			}
			s.class[i] = s.class[i-1]
		}
	}
	return s
}

// identical reports whether siblings a and b are interchangeable: leaves
// with the same demand, the same level and no anchors.
func (s *search) identical(a, b int) bool {
	ga, gb := &s.h.sg[a], &s.h.sg[b]
	return ga.leaf && gb.leaf && len(ga.anchors) == 0 && len(gb.anchors) == 0 &&
		s.eff[a] == s.eff[b] && slices.Equal(ga.demand, gb.demand)
}

// decide makes decision i and the ones after it.
func (s *search) decide(i int) (bool, error) {
	if i == len(s.order) {
		return s.finish()
	}
	h := s.h
	s.deepest = max(s.deepest, i)
	g := s.order[i]
	pl, pk := s.parentDomain(g)
	l := s.eff[g]
	left := 0 // members of g's class still to decide, g included
	if s.class[i] >= 0 {
		if left = s.classLeft(i); !s.classFits(i, g, pl, pk, l, left) {
			return false, nil
		}
	}
	cands := s.candidates(i, g, pl, pk, l, left)
	if len(cands) == 0 {
		s.noteNoRoom(i, g, pl, pk, l)
		return false, nil
	}
	mark := len(s.forbidden)
	defer func() { s.forbidden = s.forbidden[:mark] }()
	for _, c := range cands {
		if err := h.spend(); err != nil {
			return false, err
		}
		s.dom[g] = c.k
		s.reserve(g, l, c.k, pl, 1)
		ok, err := s.decide(i + 1)
		s.reserve(g, l, c.k, pl, -1)
		if ok || err != nil {
			return ok, err
		}
		if s.class[i] >= 0 {
			s.forbidden = append(s.forbidden, forbid{class: s.class[i], k: c.k})
		}
	}
	return false, nil
}

// spend takes one trial from the budget.
func (h *hier) spend() error {
	if h.trials <= 0 {
		return errBudget
	}
	h.trials--
	if h.trials%256 == 0 {
		return h.ctx.Err()
	}
	return nil
}

// finish packs the members once every subgroup has a domain.
func (s *search) finish() (bool, error) {
	s.deepest = len(s.order)
	if !s.h.packAll {
		s.w = &witness{common: s.domainLevels(), s: s}
		return true, nil
	}
	w, reason, err := s.pack()
	if err != nil || w == nil {
		if reason != "" {
			s.noteAt(len(s.order), func() string { return reason })
		}
		return false, err
	}
	s.w = w
	return true, nil
}

// parentDomain is the level and domain subgroup g must stay inside; level
// top+1 stands for no bound at all, for the root.
func (s *search) parentDomain(g int) (int, int32) {
	o := s.owner[g]
	if o < 0 {
		return s.h.t.top() + 1, 0
	}
	return s.eff[o], s.dom[o]
}

// domOf is the domain of level eff[g] that holds subgroup g once every
// decision is made.
func (s *search) domOf(g int) int32 {
	if s.decision[g] {
		return s.dom[g]
	}
	return s.dom[s.owner[g]]
}

// fits reports whether domain a of level m has room left for subgroup g's
// demand, shape by shape.
func (s *search) fits(g, m int, a int32) bool {
	for sh, n := range s.h.sg[g].demand {
		if n > 0 && s.h.u.slots[sh][m][a]-s.h.reserved[sh][m][a] < n {
			return false
		}
	}
	return true
}

// roomLeft is the room left in domain a of level m for subgroup g's shapes.
func (s *search) roomLeft(g, m int, a int32) int64 {
	var r int64
	for sh, n := range s.h.sg[g].demand {
		if n > 0 {
			r += s.h.u.slots[sh][m][a] - s.h.reserved[sh][m][a]
		}
	}
	return r
}

// reserve adds (sign 1) or removes (-1) subgroup g's demand in domain k of
// level l and around it up to its parent's level pl, and marks the domains
// it uses at every level.
func (s *search) reserve(g, l int, k int32, pl, sign int) {
	h, t := s.h, s.h.t
	p := t.dom[l][k].lo
	for m := l; m < min(pl, t.top()+1); m++ {
		a := t.anc[m][p]
		for sh, n := range h.sg[g].demand {
			h.reserved[sh][m][a] += int64(sign) * n
		}
	}
	for m := l; m <= t.top(); m++ {
		h.used[m][t.anc[m][p]] += int32(sign)
	}
}

// markAnchors counts (sign 1) or uncounts (-1) the domains that run the
// gang's anchors as used, so that new subgroups gather near the running
// ones as siblings gather.
func (h *hier) markAnchors(sign int32) {
	t := h.t
	for _, p := range h.sg[0].anchors {
		for m := range t.dom {
			h.used[m][t.anc[m][p]] += sign
		}
	}
}
