package topology

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// hierOracle enumerates assignments of a hierarchical request.
type hierOracle struct {
	req *placement.Request
	// dom[n][l] is node n's domain id at level l: 0 node .. 4 cluster.
	dom [][5]int
	// groups in order of preference (breadth first, siblings as given).
	groups []oracleGroup
	// bound are the members bound by topology; along[i] lists the
	// required levels that hold bound[i] with the group that imposes them.
	bound         []int
	along         [][]oracleRule
	depth, shapes int
	required      bool
}

type oracleGroup struct {
	name    string
	members []int // bound members of the subtree
	level   int   // policy level 0..3, -1 for none
	req     bool
	// anchors are the nodes of the subtree's anchors: running members. A
	// required group with bound members must share its domain with them.
	anchors []int
}

type oracleRule struct{ group, level int }

// hierBest is the least assignment found.
type hierBest struct {
	keys   []int
	nodeOf []int
	// roots[l] holds each domain of level l that holds the gang's bound
	// members in some least assignment.
	roots [5]map[string]bool
}

func newHierOracle(req *placement.Request) *hierOracle {
	o := &hierOracle{req: req}
	ids := map[string]int{}
	for n := range req.Nodes {
		var d [5]int
		for l := range 5 {
			key := fmt.Sprint(l, "/", domainOf(req, n, l))
			if _, ok := ids[key]; !ok {
				ids[key] = len(ids)
			}
			d[l] = ids[key]
		}
		o.dom = append(o.dom, d)
	}
	levelOf := func(p placement.Policy) int {
		if p.Level == "" {
			return -1
		}
		return levelIndex(p.Level)
	}
	var subtree func(g *placement.Subgroup, of func(*placement.Subgroup) []int) []int
	subtree = func(g *placement.Subgroup, of func(*placement.Subgroup) []int) []int {
		out := slices.Clone(of(g))
		for c := range g.Children {
			out = append(out, subtree(&g.Children[c], of)...)
		}
		return out
	}
	type item struct {
		g     *placement.Subgroup
		depth int
	}
	queue := []item{{req.Hierarchy, 1}}
	for i := 0; i < len(queue); i++ {
		g := queue[i].g
		o.depth = max(o.depth, queue[i].depth)
		policy := g.Policy
		if i == 0 {
			policy = req.Policy
		}
		var members []int
		for _, m := range subtree(g, func(g *placement.Subgroup) []int { return g.Members }) {
			if req.Members[m].Accelerated {
				members = append(members, m)
			}
		}
		slices.Sort(members)
		var anchors []int
		for _, a := range subtree(g, func(g *placement.Subgroup) []int { return g.Anchors }) {
			anchors = append(anchors, req.Anchors[a])
		}
		o.groups = append(o.groups, oracleGroup{name: g.Name, members: members, level: levelOf(policy),
			req: policy.Required && policy.Level != "", anchors: anchors})
		o.required = o.required || i > 0 && policy.Required && policy.Level != ""
		for c := range g.Children {
			queue = append(queue, item{&g.Children[c], queue[i].depth + 1})
		}
	}
	kinds := map[string]bool{}
	for i, m := range req.Members {
		if !m.Accelerated {
			continue
		}
		kinds[fmt.Sprint(m.Request)] = true
		var rules []oracleRule
		for g, og := range o.groups {
			if og.req && slices.Contains(og.members, i) {
				rules = append(rules, oracleRule{g, og.level})
			}
		}
		o.bound = append(o.bound, i)
		o.along = append(o.along, rules)
	}
	o.shapes = len(kinds)
	return o
}

// search tries every assignment of bound members to nodes; members of one
// leaf and one kind are interchangeable, so they take nodes in order.
func (o *hierOracle) search() *hierBest {
	req := o.req
	free := make([]placement.Vector, len(req.Nodes))
	for n := range free {
		free[n] = req.Nodes[n].Free.Clone()
	}
	nodeOf := make([]int, len(req.Members))
	// first[g]: a node of g's domain at its required level once known:
	// its anchors', or its first placed member's; -1 before.
	first := make([]int, len(o.groups))
	for g, og := range o.groups {
		first[g] = -1
		if og.req && len(og.anchors) > 0 {
			first[g] = og.anchors[0]
		}
	}
	perKind := map[[2]string]int{}
	var best *hierBest
	var rec func(b int)
	rec = func(b int) {
		if b == len(o.bound) {
			k := o.keys(nodeOf)
			switch c := -1; {
			case best != nil:
				if c = slices.Compare(k, best.keys); c > 0 {
					return
				}
				fallthrough
			default:
				if c < 0 {
					best = &hierBest{keys: k, nodeOf: slices.Clone(nodeOf)}
					for l := range best.roots {
						best.roots[l] = map[string]bool{}
					}
				}
				root := o.groups[0].members
				for l := o.common(root, nodeOf); l < 5; l++ {
					best.roots[l][domainOf(req, nodeOf[root[0]], l)] = true
				}
			}
			return
		}
		i := o.bound[b]
		m := &req.Members[i]
		lo := 0
		if b > 0 && o.sameLeafAndKind(o.bound[b-1], i) {
			lo = nodeOf[o.bound[b-1]]
		}
		for n := lo; n < len(req.Nodes); n++ {
			if !m.EligibleOn(n) || !m.Request.FitsIn(free[n]) {
				continue
			}
			kind := [2]string{fmt.Sprint(m.Request, m.MaxPerNode), req.Nodes[n].Name}
			if m.MaxPerNode > 0 && perKind[kind] >= m.MaxPerNode {
				continue
			}
			ok := true
			var set []int
			for _, r := range o.along[b] {
				switch {
				case first[r.group] < 0:
					first[r.group] = n
					set = append(set, r.group)
				case o.dom[first[r.group]][r.level] != o.dom[n][r.level]:
					ok = false
				}
			}
			if ok {
				free[n].Sub(m.Request)
				perKind[kind]++
				nodeOf[i] = n
				rec(b + 1)
				perKind[kind]--
				free[n].Add(m.Request)
			}
			for _, g := range set {
				first[g] = -1
			}
		}
	}
	rec(0)
	return best
}

func (o *hierOracle) sameLeafAndKind(a, b int) bool {
	var leafA, leafB int
	for g := range o.groups {
		if slices.Contains(o.groups[g].members, a) {
			leafA = g
		}
		if slices.Contains(o.groups[g].members, b) {
			leafB = g
		}
	}
	ma, mb := &o.req.Members[a], &o.req.Members[b]
	return leafA == leafB && slices.Equal(ma.Request, mb.Request) && ma.MaxPerNode == mb.MaxPerNode
}

// common is the tightest level with one domain holding the members.
func (o *hierOracle) common(members, nodeOf []int) int {
	nodes := make([]int, len(members))
	for i, m := range members {
		nodes[i] = nodeOf[m]
	}
	return o.commonNodes(nodes)
}

// commonNodes is the tightest level with one domain holding the nodes.
func (o *hierOracle) commonNodes(nodes []int) int {
	for l := range 5 {
		same := true
		for _, n := range nodes {
			same = same && o.dom[n][l] == o.dom[nodes[0]][l]
		}
		if same {
			return l
		}
	}
	return 4
}

// anchorsAgree reports whether every required group with bound members has
// its anchors in one domain of its level, as a gang the planner placed has:
// the oracle then knows that group's domain without guessing which of its
// anchors' domains the planner would keep.
func (o *hierOracle) anchorsAgree() bool {
	for _, og := range o.groups {
		if og.req && len(og.members) > 0 && len(og.anchors) > 0 && o.commonNodes(og.anchors) > og.level {
			return false
		}
	}
	return true
}

// keys is key1 then key2 (see the test's doc comment).
func (o *hierOracle) keys(nodeOf []int) []int {
	k := make([]int, 2*len(o.groups))
	for g, og := range o.groups {
		if len(og.members) == 0 {
			continue
		}
		c := o.common(og.members, nodeOf)
		if og.level >= 0 {
			k[g] = max(og.level, c)
		}
		k[len(o.groups)+g] = c
	}
	return k
}

// pins counts the required groups with bound members and anchors: those
// the anchors hold to a domain.
func (o *hierOracle) pins() int {
	n := 0
	for _, og := range o.groups {
		if og.req && len(og.members) > 0 && len(og.anchors) > 0 {
			n++
		}
	}
	return n
}

// valid reports whether every required level holds in a plan, anchors
// counted with the members they run beside.
func (o *hierOracle) valid(nodeOf []int) bool {
	for _, og := range o.groups {
		if !og.req || len(og.members) == 0 {
			continue
		}
		nodes := slices.Clone(og.anchors)
		for _, m := range og.members {
			nodes = append(nodes, nodeOf[m])
		}
		if o.commonNodes(nodes) > og.level {
			return false
		}
	}
	return true
}

// checkReported compares the subgroups the planner reports with the plan.
func (o *hierOracle) checkReported(t *testing.T, res *Result) {
	t.Helper()
	keys := []string{scheduling.HostnameKey, cliqueKey, leafKey, spineKey, ""}
	byName := map[string]SubgroupResult{}
	for _, r := range res.Subgroups {
		byName[r.Name] = r
	}
	for g, og := range o.groups {
		name := og.name
		if g == 0 {
			name = "hierarchy"
		}
		r, ok := byName[name]
		require.True(t, ok, "no result for subgroup %s", name)
		require.Equal(t, len(og.members), r.Bound, "subgroup %s", name)
		if len(og.members) == 0 {
			continue
		}
		c := o.common(og.members, res.Plan.NodeOf)
		require.Equal(t, keys[max(og.level, c)], r.Level, "level of subgroup %s", name)
		var nodes []int
		for _, m := range og.members {
			nodes = append(nodes, res.Plan.NodeOf[m])
		}
		require.Equal(t, spansOfNodes(o.req, nodes), spanCounts(r.Spans), "spans of subgroup %s", name)
	}
}

func (o *hierOracle) describe() string {
	s := describeRequest(o.req)
	for g, og := range o.groups {
		s += fmt.Sprintf("  subgroup %d %q level %d required %v members %v anchors on nodes %v\n", g, og.name, og.level, og.req, og.members, og.anchors)
	}
	return s
}
