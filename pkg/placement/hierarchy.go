package placement

import (
	"errors"
	"fmt"
	"slices"
)

// MaxHierarchyDepth bounds how deep a Request's hierarchy may nest, the root
// counting as one: the four levels of a CompositePodGroup tree (Kubernetes'
// WorkloadMaxTreeDepth), plus segments inside its PodGroups.
const MaxHierarchyDepth = 5

// Subgroup is one group of a hierarchical gang: a tree of subgroups whose
// root is the whole gang. A leaf subgroup lists members; an inner one lists
// child subgroups, never both. Each subgroup's members bound by topology
// must run inside one domain of its Policy's level (required), or of the
// tightest level at or above it that works (preferred), and a child always
// runs inside its parent's domain.
//
// Which members a request carries is the caller's decision: a planner places
// every member of the Request. A composite whose minGroupCount is smaller
// than its number of children is planned by passing the children the caller
// chose to start now and leaving the others out of the hierarchy and of
// Members.
type Subgroup struct {
	// Name identifies the subgroup in summaries and messages: a PodGroup's
	// namespace/name, or "segment 2".
	Name string
	// Policy is the subgroup's own topology constraint. An empty Level
	// means none of its own: it only stays inside its parent's domain.
	// The root's policy is Request.Policy; the root's Policy must be empty
	// or equal to it.
	Policy Policy
	// Members are indices into Request.Members, on leaf subgroups only.
	// Every member of the Request is in exactly one leaf.
	Members []int
	// Anchors are indices into Request.Anchors, on leaf subgroups only:
	// the nodes that run this subgroup's members already. When a Request
	// has both a hierarchy and anchors, every anchor is in exactly one
	// leaf, so a replacement returns to its own subgroup's domain.
	Anchors []int
	// Children are the child subgroups of an inner subgroup.
	Children []Subgroup
}

// SubgroupRef is one subgroup of a Request's hierarchy as Subgroups lists
// it, with what it inherits from the tree. Plan.Subgroups and planners'
// detailed results number subgroups the same way.
type SubgroupRef struct {
	// Subgroup is the subgroup in the Request; read it, never write it.
	Subgroup *Subgroup
	// Parent is the index of the parent subgroup in the list; -1 for the
	// root.
	Parent int
	// Depth is 0 for the root, 1 for its children and so on.
	Depth int
	// Path names the subgroup by its place in the tree, for messages:
	// "hierarchy", "hierarchy.children[1]" and so on.
	Path string
	// Members are the indices into Request.Members of the members of the
	// subgroup and of all its descendants, ascending (rank order).
	Members []int
	// Anchors are the indices into Request.Anchors of the subgroup's and
	// its descendants' anchors, ascending.
	Anchors []int
}

// Label names the subgroup for people: its Name, or its Path when it has
// none.
func (r *SubgroupRef) Label() string {
	if r.Subgroup.Name != "" {
		return r.Subgroup.Name
	}
	return r.Path
}

// Subgroups lists the subgroups of req's hierarchy in pre-order (the root
// first, then each child's subtree in order); nil when req has none. It
// assumes a hierarchy that ValidateHierarchy accepts.
func (req *Request) Subgroups() []SubgroupRef {
	if req.Hierarchy == nil {
		return nil
	}
	var out []SubgroupRef
	var walk func(g *Subgroup, parent, depth int, path string) (members, anchors []int)
	walk = func(g *Subgroup, parent, depth int, path string) ([]int, []int) {
		i := len(out)
		out = append(out, SubgroupRef{Subgroup: g, Parent: parent, Depth: depth, Path: path})
		members := append([]int(nil), g.Members...)
		anchors := append([]int(nil), g.Anchors...)
		for c := range g.Children {
			m, a := walk(&g.Children[c], i, depth+1, fmt.Sprintf("%s.children[%d]", path, c))
			members = append(members, m...)
			anchors = append(anchors, a...)
		}
		out[i].Members = slices.Sorted(slices.Values(members))
		out[i].Anchors = slices.Sorted(slices.Values(anchors))
		return members, anchors
	}
	walk(req.Hierarchy, -1, 0, "hierarchy")
	return out
}

// ValidateHierarchy checks req's hierarchy: at most MaxHierarchyDepth deep,
// members on leaves only and each member of the Request in exactly one leaf,
// each anchor in exactly one leaf, no required policy without a level, and a
// root policy that agrees with Request.Policy. It does not check that levels
// exist: only a planner knows its levels. Nil means valid, or no hierarchy.
func (req *Request) ValidateHierarchy() error {
	if req.Hierarchy == nil {
		return nil
	}
	var errs []error
	if p := req.Hierarchy.Policy; p != (Policy{}) && p != req.Policy {
		errs = append(errs, fmt.Errorf("hierarchy: the root's policy %+v differs from the gang's %+v; leave it empty", p, req.Policy))
	}
	memberOf := make([]string, len(req.Members))
	anchorOf := make([]string, len(req.Anchors))
	var walk func(g *Subgroup, depth int, path string)
	walk = func(g *Subgroup, depth int, path string) {
		where := path
		if g.Name != "" {
			where = fmt.Sprintf("%s (%q)", path, g.Name)
		}
		if depth == MaxHierarchyDepth+1 { // once per path; members below are still claimed
			errs = append(errs, fmt.Errorf("%s: the hierarchy nests %d levels deep; at most %d", where, depth, MaxHierarchyDepth))
		}
		if g.Policy.Required && g.Policy.Level == "" && depth > 1 {
			errs = append(errs, fmt.Errorf("%s: a required policy needs a level", where))
		}
		switch {
		case len(g.Children) > 0 && len(g.Members)+len(g.Anchors) > 0:
			errs = append(errs, fmt.Errorf("%s: has both children and members or anchors; only leaves hold members", where))
		case len(g.Children) == 0 && len(g.Members)+len(g.Anchors) == 0:
			errs = append(errs, fmt.Errorf("%s: has no members, anchors or children; leave out subgroups with nothing to place", where))
		}
		claim(&errs, where, "member", g.Members, memberOf)
		claim(&errs, where, "anchor", g.Anchors, anchorOf)
		for c := range g.Children {
			walk(&g.Children[c], depth+1, fmt.Sprintf("%s.children[%d]", path, c))
		}
	}
	walk(req.Hierarchy, 1, "hierarchy")
	for i, where := range memberOf {
		if where == "" {
			errs = append(errs, fmt.Errorf("member %d (%s) is in no subgroup", i, req.Members[i].Name))
		}
	}
	for i, where := range anchorOf {
		if where == "" {
			errs = append(errs, fmt.Errorf("anchor %d (node %d) is in no subgroup", i, req.Anchors[i]))
		}
	}
	return errors.Join(errs...)
}

// claim records that the subgroup at where lists indices into a slice of
// len(owner) entries, and reports indices out of range or listed twice.
func claim(errs *[]error, where, what string, indices []int, owner []string) {
	for _, i := range indices {
		switch {
		case i < 0 || i >= len(owner):
			*errs = append(*errs, fmt.Errorf("%s: %s %d does not exist; the request has %d", where, what, i, len(owner)))
		case owner[i] != "":
			*errs = append(*errs, fmt.Errorf("%s: %s %d is also in %s; each is in exactly one subgroup", where, what, i, owner[i]))
		default:
			owner[i] = where
		}
	}
}

// SubgroupPlan says where one subgroup of a hierarchical gang went.
type SubgroupPlan struct {
	// Name is the subgroup's label (SubgroupRef.Label).
	Name string
	// Parent is the index in Plan.Subgroups of the parent; -1 for the root.
	Parent int
	// Level is the label key of the level of the domain that holds the
	// subgroup's members bound by topology: its policy's level, or a
	// looser one when Relaxed; the tightest level that holds them when it
	// has no level of its own. kubernetes.io/hostname for one node, empty
	// for the whole cluster or when no member is bound by topology.
	Level string
	// Domain names that domain for people.
	Domain string
	// Relaxed is set when a preferred level could not hold the subgroup.
	Relaxed bool
	// Spans counts, per level loosest first and then nodes, the domains
	// the subgroup's members bound by topology use, as Plan.Spans does for
	// the whole gang.
	Spans []Span
}
