package topology

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// ErrUnknownLevel is wrapped by the error returned for a Policy that names a
// level the planner was not configured with. It is
// scheduling.ErrUnknownLevel, whose LevelRank decides it: waiting will not
// help such a gang, so callers report it as unresolvable rather than as a
// fit failure.
var ErrUnknownLevel = scheduling.ErrUnknownLevel

// PathElem names a domain at one level.
type PathElem struct {
	// Key is the level's label key.
	Key string
	// Value is the label value the domain's nodes share. For an Unlabelled
	// domain it is what holds the domain together instead: the value of
	// the nearest tighter label, or the name of its only node.
	Value string
	// Unlabelled is set for a domain of nodes that lack Key.
	Unlabelled bool
}

// LevelSpan counts the domains of one level that a gang uses.
type LevelSpan struct {
	// Key is the level's label key; scheduling.HostnameKey for the node level.
	Key string
	// Name is the level's name for people.
	Name string
	// Domains is how many domains of the level hold members.
	Domains int
}

// Result is a Plan with the structure behind it, so that the gang plugin
// can emit events and metrics without parsing the summary.
type Result struct {
	// Plan is what placement.Planner returns.
	Plan *placement.Plan
	// Level is the label key of the level of the domain that holds the gang:
	// scheduling.HostnameKey for a single node, empty for the whole cluster or when no
	// member is bound by topology.
	Level string
	// LevelName names Level for people ("leaf", "node", "cluster").
	LevelName string
	// Domain is the path to that domain, loosest level first; empty for the
	// whole cluster.
	Domain []PathElem
	// Spans counts, for every label level (loosest first) and then for
	// nodes, the domains that hold members bound by topology.
	Spans []LevelSpan
	// Bound is how many members are bound by topology (Accelerated).
	Bound int
	// Relaxed is set when the gang went above the level its policy asked
	// for because no domain there holds it.
	Relaxed bool
	// Exact is set when the spans are proven minimal. It is false when the
	// planner fell back to its greedy packer, for gangs whose exact search
	// would cost too much.
	Exact bool
	// Group names the group of nodes the bound members went to, when the
	// request split the nodes into groups (placement.Request.Groups).
	Group string
	// Subgroups says where each subgroup of a hierarchical gang went, in
	// the order placement.Request.Subgroups lists them; nil for a flat
	// gang. The fields above then describe the root, the whole gang.
	Subgroups []SubgroupResult
}

// spansOf counts, per tree level below the cluster, the domains holding the
// given depth-first positions. pos must be sorted: domains are contiguous
// position ranges, so a new domain shows as a change of ancestor.
func (t *Tree) spansOf(pos []int32) []int {
	counts := make([]int, t.top())
	for l := range counts {
		last := int32(-1)
		for _, p := range pos {
			if a := t.anc[l][p]; a != last {
				counts[l]++
				last = a
			}
		}
	}
	return counts
}

// levelSpans turns per-level counts into LevelSpans, loosest level first.
func (t *Tree) levelSpans(counts []int) []LevelSpan {
	out := make([]LevelSpan, 0, len(counts))
	for l := len(counts) - 1; l >= 0; l-- {
		out = append(out, LevelSpan{Key: t.levels[l].Key, Name: t.levels[l].Name, Domains: counts[l]})
	}
	return out
}

// Spans counts the domains per level that a plan for req uses, counting only
// members bound by topology; it works for any planner's plan, so a simulator
// can compare planners. Levels are loosest first, then nodes. req must hold
// the nodes the tree was built from.
func (t *Tree) Spans(req *placement.Request, nodeOf []int) []LevelSpan {
	pos := make([]int32, 0, len(nodeOf))
	for i, n := range nodeOf {
		if req.Members[i].Accelerated {
			pos = append(pos, t.pos[n])
		}
	}
	slices.Sort(pos)
	return t.levelSpans(t.spansOf(pos))
}

// summary tells people where the gang goes: "16 pods in leaf s1-l3: 1 leaf,
// 2 NVLink domains, 2 nodes".
func (u *usage) summary(res *Result, ch *choice, start int, loose []int32) string {
	t := u.tree
	var b strings.Builder
	if ch == nil {
		fmt.Fprintf(&b, "%s on %s", count(len(u.req.Members), "pod"), count(len(loose), "node"))
		return b.String()
	}
	switch {
	case ch.level == 0:
		fmt.Fprintf(&b, "%s on node %s", count(res.Bound, "pod"), t.name(0, ch.dom))
	case ch.level == t.top():
		fmt.Fprintf(&b, "%s across the cluster", count(res.Bound, "pod"))
	default:
		fmt.Fprintf(&b, "%s in %s %s", count(res.Bound, "pod"), t.levels[ch.level].Name, t.name(ch.level, ch.dom))
	}
	if res.Relaxed {
		fmt.Fprintf(&b, " (no %s holds them)", t.levels[start].Name)
	}
	if ch.level > 0 {
		b.WriteString(":")
		for l := min(ch.level, t.top()-1); l >= 0; l-- {
			if l < min(ch.level, t.top()-1) {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, " %s", count(ch.spans[l], t.levels[l].Name))
		}
	}
	switch n := len(u.req.Members) - res.Bound; {
	case n == 0:
	case len(loose) == 1:
		fmt.Fprintf(&b, "; %s without accelerators on node %s", count(n, "pod"), u.req.Nodes[t.node[loose[0]]].Name)
	default:
		fmt.Fprintf(&b, "; %s without accelerators on %s", count(n, "pod"), count(len(loose), "node"))
	}
	return b.String()
}

// count renders "1 leaf" or "3 leaves".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	switch {
	case strings.HasSuffix(noun, "leaf"):
		noun = strings.TrimSuffix(noun, "f") + "ves"
	case strings.HasSuffix(noun, "s"), strings.HasSuffix(noun, "x"),
		strings.HasSuffix(noun, "ch"), strings.HasSuffix(noun, "sh"):
		noun += "es"
	default:
		noun += "s"
	}
	return fmt.Sprintf("%d %s", n, noun)
}
