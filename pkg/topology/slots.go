package topology

// slotScratch lends the slot arrays of counts on a group's nodes
// (newUsageAt) from one group's plan to the next within one Plan call, so
// that planning G groups allocates and zeroes the tree's arrays once, not G
// times. A count writes only its nodes' slots and the domains above them,
// which reset zeroes again: the cost follows the group, not the tree. It
// belongs to one planGroups call; a usage that borrowed it is dead once
// reset runs.
type slotScratch struct {
	// per[s][l] are shape s's slots per domain of level l.
	per [][][]int64
	// at and above are what the last count wrote (see domainsAbove).
	at    []int32
	above [][]int32
	// next, when not nil, are the domains above the nodes nextAt, as the
	// caller knew them (groupLayout): a count on those very nodes uses
	// them. reset forgets them.
	next   [][]int32
	nextAt []int32
	// kept, when not nil, serves the counts on group's nodes from the
	// Planner's kept counts (keptslots.go) instead of these arrays.
	kept  *slotLease
	group int
	// fit are the buffers of the candidate search (choose), handed from
	// one group's plan to the next.
	fit [2][]int32
	// nodes are the indices in the Request of group's nodes, nextAt's
	// (groupLayout.indices), for Request.InGroupAt.
	nodes []int
}

// aboveOf returns the domains above the nodes at (ascending): next when at
// is nextAt itself, else what domainsAbove finds.
func (sc *slotScratch) aboveOf(t *Tree, at []int32) [][]int32 {
	if sc != nil && sc.next != nil && len(at) == len(sc.nextAt) && (len(at) == 0 || &at[0] == &sc.nextAt[0]) {
		return sc.next
	}
	return t.domainsAbove(at)
}

// arrays returns shape s's per-level slot arrays on t, all zero, and
// remembers that the count writes at and above.
func (sc *slotScratch) arrays(t *Tree, s int, at []int32, above [][]int32) [][]int64 {
	for len(sc.per) <= s {
		sc.per = append(sc.per, nil)
	}
	if sc.per[s] == nil {
		per := make([][]int64, t.top()+1)
		for l := range per {
			per[l] = make([]int64, len(t.dom[l]))
		}
		sc.per[s] = per
	}
	sc.at, sc.above = at, above
	return sc.per[s]
}

// reset zeroes what the last count wrote.
func (sc *slotScratch) reset() {
	for _, per := range sc.per {
		for _, p := range sc.at {
			per[0][p] = 0
		}
		for l := 1; l < len(per) && l < len(sc.above); l++ {
			for _, k := range sc.above[l] {
				per[l][k] = 0
			}
		}
	}
	sc.at, sc.above, sc.next, sc.nextAt = nil, nil, nil, nil
}

// narrowed lends Request.InGroupAt the kept eligibility buffers of group
// (slotLease.buffer) for a Request of n nodes, or returns nil (allocate)
// when no lease is held.
func (sc *slotScratch) narrowed(n int) func(j int) []bool {
	if sc == nil || sc.kept == nil {
		return nil
	}
	return func(j int) []bool { return sc.kept.buffer(sc.group, j, n) }
}
