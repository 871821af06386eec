package placement

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Groups partitions a Request's nodes into groups that a gang's members
// bound by topology (Accelerated) must not mix: all of them run on nodes of
// one group. A GPU gang's uniform groups (one GPU product, one driver
// major.minor, one capacity type) are such groups. The policy's owner
// computes them (the GPUFleet plugin, with pkg/fleet); planners only read
// them, treating each group as an extra, outermost domain: they plan the
// gang inside every group that could hold it and keep the best plan by
// their usual rules, ties going to the lower group index.
type Groups struct {
	// Of[i] is the index in Names of node i's group. Of is not changed
	// once a planner has seen it: groups that change come in a new slice,
	// so planners may keep what they derive from Of by its identity.
	Of []int
	// Names describe the groups for people, in group order. The order must
	// not depend on the order of Request.Nodes: it breaks ties.
	Names []string
	// Rule says what the nodes of a group share, for messages, such as
	// "one nvidia.com/gpu.product, driver major.minor and capacity type".
	Rule string
	// Relax says how a gang's owner lets it span groups, for messages,
	// such as "gpu-gang.x-k8s.io/uniform: none lets it mix them".
	Relax string
}

// Split reports whether g constrains a gang at all: it has two groups or
// more. A nil Groups is one group.
func (g *Groups) Split() bool { return g != nil && len(g.Names) > 1 }

// Validate checks g against a request of n nodes.
func (g *Groups) Validate(n int) error {
	if g == nil {
		return nil
	}
	if len(g.Of) != n {
		return fmt.Errorf("groups cover %d nodes, want %d", len(g.Of), n)
	}
	for i, k := range g.Of {
		if k < 0 || k >= len(g.Names) {
			return fmt.Errorf("node %d is in group %d; there are %d groups", i, k, len(g.Names))
		}
	}
	return nil
}

// Grouper partitions nodes into the groups a gang must not mix. A PreFilter
// plugin whose policy groups nodes leaves one in the pod's CycleState for
// the gang plugin (contract.NodeGroupsStateKey).
type Grouper interface {
	// NodeGroups returns the groups of nodes, or nil when the policy does
	// not split them. It only reads names and labels. epoch is the nodes'
	// Request.LabelsEpoch (zero when unknown): a Grouper may answer from
	// what it derived from the same non-zero epoch before.
	NodeGroups(nodes []Node, epoch uint64) *Groups
}

// AnchorGroup is the group that holds most of req's anchors (the lowest
// such group on a tie), or -1 when req has no anchors or no groups. A
// running gang's new members join it there.
func (req *Request) AnchorGroup() int {
	if req.Groups == nil || len(req.Anchors) == 0 {
		return -1
	}
	count := make([]int, len(req.Groups.Names))
	for _, a := range req.Anchors {
		count[req.Groups.Of[a]]++
	}
	best := 0
	for k, n := range count {
		if n > count[best] {
			best = k
		}
	}
	return best
}

// InGroup returns a copy of req in which the members bound by topology may
// use only the nodes of group k, and which has no groups. Members that
// shared an eligibility slice share its narrowed copy, as planners expect
// of members with the same constraints. Loose members keep theirs: groups
// do not bind them. Anchors outside group k are dropped. req is not
// modified; nodes and vectors are shared with it.
func (req *Request) InGroup(k int) *Request {
	var in []int
	for i, g := range req.Groups.Of {
		if g == k {
			in = append(in, i)
		}
	}
	return req.InGroupAt(k, in, nil)
}

// InGroupAt is InGroup for a caller that knows group k's nodes: in lists
// the index of each, once, in any order. A narrowed slice then costs a
// cleared slice and group k's nodes, not a test of every node, so that
// narrowing to every group in turn costs the nodes once. A
// slice rather than an iterator: the copy is then a plain loop, where a
// yield per node cost a plan on 20,000 nodes a tenth of a millisecond.
//
// buf, when not nil, lends the narrowed slices instead of allocating them:
// buf(j) is the j-th, of len(req.Nodes), false on every node not in in (a
// slice only ever narrowed to group k is). The caller keeps them from
// other use while the returned Request lives.
func (req *Request) InGroupAt(k int, in []int, buf func(j int) []bool) *Request {
	out := *req
	out.Groups = nil
	// The map only finds a narrowed copy again; nothing iterates it.
	narrowed := map[*bool][]bool{}
	var all []bool // narrows a nil slice, shared by every member with one
	lent := 0
	alloc := func() []bool {
		if buf == nil {
			return make([]bool, len(req.Nodes))
		}
		lent++
		return buf(lent - 1)
	}
	out.Members = make([]Member, len(req.Members))
	for i, m := range req.Members {
		if m.Accelerated {
			switch {
			case m.Eligible == nil:
				if all == nil {
					all = alloc()
					for _, n := range in {
						all[n] = true
					}
				}
				m.Eligible = all
			case len(m.Eligible) > 0:
				e, ok := narrowed[&m.Eligible[0]]
				if !ok {
					e = alloc()
					for _, n := range in {
						e[n] = m.Eligible[n]
					}
					narrowed[&m.Eligible[0]] = e
				}
				m.Eligible = e
			}
		}
		out.Members[i] = m
	}
	out.Anchors = nil
	for _, a := range req.Anchors {
		if req.Groups.Of[a] == k {
			out.Anchors = append(out.Anchors, a)
		}
	}
	return &out
}

// NoGroupFits is the error of a planner that found no group to hold the
// gang: tries[k] says how group k failed, nil for a group it did not try.
// Placed is the most members any group placed; the reason names the groups
// that came closest and how many members each holds. Their own reasons are
// left out: they speak of the group's nodes as "the cluster".
func (g *Groups) NoGroupFits(wanted int, tries []*FitError) *FitError {
	type try struct {
		k   int
		err *FitError
	}
	var ts []try
	for k, e := range tries {
		if e != nil {
			ts = append(ts, try{k, e})
		}
	}
	// Closest first; group order on ties, never map or node order.
	slices.SortStableFunc(ts, func(a, b try) int { return cmp.Compare(b.err.Placed, a.err.Placed) })
	const named = 3
	var b strings.Builder
	fmt.Fprintf(&b, "the gang's accelerated members must all run on nodes of %s, and none of the %d such groups of nodes holds them", g.Rule, len(g.Names))
	if len(ts) < len(g.Names) {
		fmt.Fprintf(&b, " (%d tried)", len(ts))
	}
	for i, t := range ts {
		if i == named {
			fmt.Fprintf(&b, "; and %d more", len(ts)-named)
			break
		}
		sep := ": "
		if i > 0 {
			sep = "; "
		}
		fmt.Fprintf(&b, "%s%s fits %d of %d", sep, g.Names[t.k], t.err.Placed, t.err.Wanted)
	}
	if g.Relax != "" {
		b.WriteString("; " + g.Relax)
	}
	placed := 0
	if len(ts) > 0 {
		placed = ts[0].err.Placed
	}
	return &FitError{Placed: placed, Wanted: wanted, Reason: b.String()}
}
