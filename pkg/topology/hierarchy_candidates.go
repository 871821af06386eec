package topology

import (
	"cmp"
	"slices"
)

// This file holds how a search finds and orders the candidate domains of one
// decision (see search).

// cand is one candidate domain with its sort keys.
type cand struct {
	k int32
	// fresh has bit m-l set when the candidate's domain of level m holds
	// neither a decided subgroup nor a running member of the gang yet.
	fresh uint64
}

// candidates lists the domains of level l inside the parent's domain (pl,
// pk) that have room for subgroup g, best first. A subgroup with anchors
// inside the parent's domain has one: the domain holding most of them, when
// it keeps the subtree's pins; otherwise any domain that keeps them. For
// a member of a class with left members still to decide, domains above
// level l come first by how they cover the class (see coverOrder).
func (s *search) candidates(i, g, pl int, pk int32, l, left int) []cand {
	t := s.h.t
	var out []cand
	if k, ok := s.homeOf(g, pl, pk, l); ok {
		p := t.dom[l][k].lo
		for m := l; m < min(pl, t.top()+1); m++ {
			if !s.fits(g, m, t.anc[m][p]) {
				return nil
			}
		}
		return []cand{s.cand(g, l, k, pl)}
	}
	var descend func(m int, a int32)
	descend = func(m int, a int32) {
		if !s.fits(g, m, a) || !s.keepsPins(g, m, a) {
			return
		}
		if m == l {
			if !s.isForbidden(i, a) {
				out = append(out, s.cand(g, l, a, pl))
			}
			return
		}
		for c := t.dom[m][a].first; c < t.dom[m][a].end; c++ {
			descend(m-1, c)
		}
	}
	s.eachChild(pl, pk, descend)
	slices.SortFunc(out, func(a, b cand) int {
		pa, pb := t.dom[l][a.k].lo, t.dom[l][b.k].lo
		if left > 0 {
			if c := s.coverOrder(g, pl, l, pa, pb, int64(left)); c != 0 {
				return c
			}
		}
		if c := cmp.Compare(a.fresh, b.fresh); c != 0 {
			return c
		}
		return t.compareFit(l, a.k, b.k, min(pl, t.top()+1), func(m int, k int32) int64 { return s.roomLeft(g, m, k) })
	})
	return out
}

// eachChild calls f on each child of the parent's domain (pl, pk), or on
// the cluster for the root.
func (s *search) eachChild(pl int, pk int32, f func(m int, a int32)) {
	t := s.h.t
	if pl > t.top() {
		f(t.top(), 0)
		return
	}
	for c := t.dom[pl][pk].first; c < t.dom[pl][pk].end; c++ {
		f(pl-1, c)
	}
}

func (s *search) cand(g, l int, k int32, pl int) cand {
	t := s.h.t
	c := cand{k: k}
	p := t.dom[l][k].lo
	for m := l; m < min(pl, t.top()+1); m++ {
		if s.h.used[m][t.anc[m][p]] == 0 {
			c.fresh |= 1 << (m - l)
		}
	}
	return c
}

func (s *search) isForbidden(i int, k int32) bool {
	if s.class[i] < 0 {
		return false
	}
	return slices.Contains(s.forbidden, forbid{class: s.class[i], k: k})
}

// homeOf is subgroup g's home (see home) when it keeps g's pins; false
// when it has none or breaks one.
func (s *search) homeOf(g, pl int, pk int32, l int) (int32, bool) {
	k, ok := s.h.home(g, pl, pk, l)
	return k, ok && s.keepsPins(g, l, k)
}

// keepsPins reports whether domain a of level m agrees with every pin of
// subgroup g's subtree: it lies inside the pinned domain, or holds it when
// it is looser. A domain that breaks a pin would put a required subgroup
// apart from its running members.
func (s *search) keepsPins(g, m int, a int32) bool {
	t := s.h.t
	for _, p := range s.h.sg[g].pins {
		l := max(m, p.level)
		if t.anc[l][t.dom[m][a].lo] != t.anc[l][p.pos] {
			return false
		}
	}
	return true
}

// home is the domain of level l, inside the parent's domain (pl, pk), that
// holds most of subgroup g's anchors there, found level by level as
// Tree.Homes does; false when none of them is inside. Level top+1 stands
// for the whole tree.
func (h *hier) home(g, pl int, pk int32, l int) (int32, bool) {
	t := h.t
	m, k := pl, pk
	if pl > t.top() {
		m, k = t.top(), 0
	}
	var inside []int32
	for _, p := range h.sg[g].anchors {
		if t.anc[m][p] == k {
			inside = append(inside, p)
		}
	}
	if len(inside) == 0 {
		return 0, false
	}
	for ; m > l; m-- {
		// Anchors are sorted by position, so each child's are one run.
		best, most, run := int32(-1), 0, 0
		var kept []int32
		for j, p := range inside {
			c := t.anc[m-1][p]
			if j > 0 && c == t.anc[m-1][inside[j-1]] {
				run++
			} else {
				run = 1
			}
			if run > most {
				best, most = c, run
			}
		}
		for _, p := range inside {
			if t.anc[m-1][p] == best {
				kept = append(kept, p)
			}
		}
		k, inside = best, kept
	}
	return k, true
}

// classLeft counts the members of decision i's class still to decide, i
// included.
func (s *search) classLeft(i int) int {
	n := 0
	for j := i; j < len(s.order) && s.class[j] == s.class[i]; j++ {
		n++
	}
	return n
}

// classFits checks that the domains of level l inside the parent's domain
// can hold the left members of decision i's class still to decide, each
// shape counted alone. How many a domain holds is bounded by its own room
// and by what its children hold; classFits leaves the counts in h.holds for
// coverOrder.
func (s *search) classFits(i, g, pl int, pk int32, l, left int) bool {
	h, t := s.h, s.h.t
	var holds func(m int, a int32) int64
	holds = func(m int, a int32) int64 {
		own := int64(-1)
		for sh, n := range h.sg[g].demand {
			if n > 0 {
				q := (h.u.slots[sh][m][a] - h.reserved[sh][m][a]) / n
				if own < 0 || q < own {
					own = q
				}
			}
		}
		own = max(own, 0)
		switch {
		case m == l && s.isForbidden(i, a):
			own = 0
		case m > l && own > 0:
			var sum int64
			for c := t.dom[m][a].first; c < t.dom[m][a].end; c++ {
				sum += holds(m-1, c)
			}
			own = min(own, sum)
		}
		h.holds[m][a] = own
		return own
	}
	var total int64
	s.eachChild(pl, pk, func(m int, a int32) { total += holds(m, a) })
	if total >= int64(left) || total == 0 {
		return true // with no room at all, candidates explains it better
	}
	s.noteClass(i, g, pl, pk, l, left, total)
	return false
}

// coverOrder orders two candidates of level l, at positions pa and pb, for
// a class with left members to place, by their domains between level l and
// the parent's level pl, loosest first, as the greedy packer covers a
// demand: a domain the class's subgroups already use before a fresh one;
// among fresh ones, those that hold all left members, tightest first, then
// the others, those that hold most first. So identical siblings gather in
// as few domains as they can, and leave roomy domains whole where they can.
func (s *search) coverOrder(g, pl, l int, pa, pb int32, left int64) int {
	h, t := s.h, s.h.t
	for m := min(pl, t.top()+1) - 1; m > l; m-- {
		ka, kb := t.anc[m][pa], t.anc[m][pb]
		if ka == kb {
			continue
		}
		fa, fb := h.used[m][ka] == 0, h.used[m][kb] == 0
		if fa != fb {
			return boolInt(fa) - boolInt(fb)
		}
		if !fa {
			continue
		}
		ha, hb := h.holds[m][ka], h.holds[m][kb]
		ca, cb := ha >= left, hb >= left
		switch {
		case ca != cb:
			return boolInt(cb) - boolInt(ca)
		case ca:
			if c := cmp.Compare(s.roomLeft(g, m, ka), s.roomLeft(g, m, kb)); c != 0 {
				return c
			}
		case ha != hb:
			return cmp.Compare(hb, ha)
		}
	}
	return 0
}
