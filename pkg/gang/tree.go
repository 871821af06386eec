package gang

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// MaxTreeDepth is how deep a hierarchy may nest, the root counting as one:
// Kubernetes' WorkloadMaxTreeDepth.
const MaxTreeDepth = schedulingv1alpha3.WorkloadMaxTreeDepth

var (
	// ErrInvalidHierarchy is wrapped by the error of a hierarchy that cannot
	// be honoured until someone changes it: a cycle of parents, more than
	// MaxTreeDepth levels, PodGroups of another Workload, or a node whose
	// own spec is invalid.
	ErrInvalidHierarchy = errors.New("invalid PodGroup hierarchy")
	// ErrMissingParent is wrapped by the error of a hierarchy in which a
	// PodGroup or composite names a parent that does not exist: one still
	// being created, or one deleted under its children.
	ErrMissingParent = errors.New("parent CompositePodGroup not found")
)

// HierarchyReader is where RootOf and BuildTree read a hierarchy: Sources
// from the scheduler's informers, the status controller from its cache, a
// test from a map.
type HierarchyReader interface {
	// PodGroup returns a native PodGroup's Spec; the error satisfies
	// apierrors.IsNotFound when there is none.
	PodGroup(namespace, name string) (*Spec, error)
	// Composite returns a composite; the error satisfies
	// apierrors.IsNotFound when there is none.
	Composite(namespace, name string) (*CompositeSpec, error)
	// Children returns, in any order, the composites and the native
	// PodGroups that name the composite parent as theirs.
	Children(namespace, parent string) ([]*CompositeSpec, []*Spec, error)
}

// Node is one node of a Tree: a composite or a native PodGroup.
type Node struct {
	Key Key
	// Composite is set on a composite's node, Spec on a PodGroup's.
	Composite *CompositeSpec
	Spec      *Spec
	// Parent is the index in Tree.Nodes of the parent; -1 for the root.
	Parent int
	// Children are the indices in Tree.Nodes of a composite's children, in
	// the order they are preferred: oldest first, then by name.
	Children []int
	// Depth counts the levels from the top of the workload's hierarchy, 1
	// for its top, whether or not the tree's root is the top.
	Depth int
}

// created is when the node's object was created.
func (n *Node) created() time.Time {
	if n.Composite != nil {
		return n.Composite.Created
	}
	return n.Spec.Created
}

// Tree is a hierarchy of PodGroups: a root and its descendants. Its root is
// a composite with its subtree, or a lone PodGroup. Trees are built afresh
// (BuildTree) and never written afterwards.
type Tree struct {
	// Nodes holds the nodes in pre-order: the root first, then each
	// child's subtree in the order of Node.Children.
	Nodes []Node
}

// Root returns the tree's root.
func (t *Tree) Root() *Node { return &t.Nodes[0] }

// Terms are the terms the root sets for the whole tree: its priority,
// preemption policy and disruption mode. A composite's children and their
// members are scheduled and preempted at the root's priority; a composite
// victim goes whole when its mode is DisruptionAll, and may otherwise lose
// children above its quorum, each as its own Terms say (ChildSurplusOf).
func (t *Tree) Terms() Terms {
	if r := t.Root(); r.Composite != nil {
		return r.Composite.Terms
	}
	return t.Root().Spec.Terms()
}

// Leaves returns the nodes of the tree's PodGroups, in pre-order.
func (t *Tree) Leaves() []int {
	var out []int
	for i := range t.Nodes {
		if t.Nodes[i].Spec != nil {
			out = append(out, i)
		}
	}
	return out
}

// Hierarchy builds the placement hierarchy (placement.Request.Hierarchy)
// of the PodGroups in plan (node indices, as Admit returns them): one
// subgroup per composite on the way from the root to a planned PodGroup,
// under the composite's topology, and one per planned PodGroup, as leaf
// returns it (its members and anchors, its own policy, its segments if it
// has them). Composites with nothing planned below them are left out. The
// root's subgroup has the root composite's topology, which the Request's
// Policy must equal; a lone PodGroup's tree returns leaf(0).
func (t *Tree) Hierarchy(plan []int, leaf func(node int) placement.Subgroup) *placement.Subgroup {
	planned := make([]bool, len(t.Nodes))
	for _, i := range plan {
		for j := i; j >= 0 && !planned[j]; j = t.Nodes[j].Parent {
			planned[j] = true
		}
	}
	var build func(i int) placement.Subgroup
	build = func(i int) placement.Subgroup {
		n := &t.Nodes[i]
		if n.Spec != nil {
			return leaf(i)
		}
		g := placement.Subgroup{Name: n.Key.String()}
		if p := n.Composite.Topology; p != nil {
			g.Policy = *p
		}
		for _, c := range n.Children {
			if planned[c] {
				g.Children = append(g.Children, build(c))
			}
		}
		return g
	}
	if len(plan) == 0 {
		return nil
	}
	root := build(0)
	return &root
}

// RootOf returns the root of the gang a native PodGroup belongs to: the
// highest composite above it whose policy is gang, whose tree (BuildTree)
// starts whole or not at all; or the PodGroup itself when no gang composite
// is above it (none at all, or only basic ones, which let their children
// go on their own). A scheduler-plugins PodGroup is its own root. The walk
// follows spec.parentCompositePodGroupName to the top of the workload's
// hierarchy, so the error reports a cycle or a hierarchy deeper than
// MaxTreeDepth (ErrInvalidHierarchy) and a parent that does not exist
// (ErrMissingParent), each with its fix.
func RootOf(r HierarchyReader, key Key) (Key, error) {
	if key.API == XK8s {
		return key, nil
	}
	path, err := Ancestors(r, key)
	if err != nil {
		return Key{}, err
	}
	root := key
	for _, c := range path {
		if c.Gang {
			root = c.Key
		}
	}
	return root, nil
}

// Ancestors returns the composites above the node key names (a native
// PodGroup or a composite), nearest first, up to the top of its hierarchy;
// none for a scheduler-plugins PodGroup. The error is RootOf's.
func Ancestors(r HierarchyReader, key Key) ([]*CompositeSpec, error) {
	var parent string
	switch key.API {
	case Native:
		s, err := r.PodGroup(key.Namespace, key.Name)
		if err != nil {
			return nil, err
		}
		parent = s.Parent
	case Composite:
		c, err := r.Composite(key.Namespace, key.Name)
		if err != nil {
			return nil, err
		}
		parent = c.Parent
	default:
		return nil, nil
	}
	var path []*CompositeSpec
	child := key
	for parent != "" {
		if len(path) == MaxTreeDepth { // the node itself is one more level
			return nil, fmt.Errorf("%w: %s has more than %d levels above it (%s); a hierarchy has at most %d levels, root included: "+
				"flatten it, or break a cycle of spec.parentCompositePodGroupName", ErrInvalidHierarchy, key, MaxTreeDepth, describePath(path), MaxTreeDepth)
		}
		c, err := r.Composite(key.Namespace, parent)
		if err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("%w: %s names CompositePodGroup %s/%s as its parent, which does not exist: create it, "+
					"or recreate %s without spec.parentCompositePodGroupName", ErrMissingParent, child, key.Namespace, parent, child)
			}
			return nil, fmt.Errorf("reading CompositePodGroup %s, the parent of %s: %w", parent, child, err)
		}
		for _, seen := range path {
			if seen.Key == c.Key {
				return nil, fmt.Errorf("%w: the parents of %s form a cycle (%s, then %s again): a hierarchy needs a top; recreate one of them without spec.parentCompositePodGroupName",
					ErrInvalidHierarchy, key, describePath(path), c.Key)
			}
		}
		if c.Key == key {
			return nil, fmt.Errorf("%w: %s is its own ancestor (%s): recreate it without spec.parentCompositePodGroupName", ErrInvalidHierarchy, key, describePath(path))
		}
		path = append(path, c)
		child, parent = c.Key, c.Parent
	}
	if len(path)+1 > MaxTreeDepth {
		return nil, fmt.Errorf("%w: %s sits %d levels deep (%s); a hierarchy has at most %d levels, root included: flatten it",
			ErrInvalidHierarchy, key, len(path)+1, describePath(path), MaxTreeDepth)
	}
	return path, nil
}

func describePath(path []*CompositeSpec) string {
	if len(path) == 0 {
		return "no parent"
	}
	s := "under " + path[0].Key.Name
	for _, c := range path[1:] {
		s += ", under " + c.Key.Name
	}
	return s
}

// BuildTree reads the tree whose root key names, a composite or a PodGroup,
// with every descendant. It checks the whole hierarchy: each node's own
// spec (Spec.Validate, CompositeSpec.Validate), the depth from the top of
// the workload's hierarchy, cycles, and that every node comes from the
// root's Workload, as kube-scheduler does; the error wraps
// ErrInvalidHierarchy or ErrMissingParent and names the fix.
func BuildTree(r HierarchyReader, key Key) (*Tree, error) {
	above, err := Ancestors(r, key)
	if err != nil {
		return nil, err
	}
	t := &Tree{}
	var root Node
	switch key.API {
	case Composite:
		c, err := r.Composite(key.Namespace, key.Name)
		if err != nil {
			return nil, err
		}
		root = Node{Key: key, Composite: c}
	default:
		s, err := r.PodGroup(key.Namespace, key.Name)
		if err != nil {
			return nil, err
		}
		root = Node{Key: key, Spec: s}
	}
	root.Parent, root.Depth = -1, len(above)+1
	if err := t.grow(r, root); err != nil {
		return nil, err
	}
	return t, t.validate()
}

// grow adds n and its subtree to t, in pre-order.
func (t *Tree) grow(r HierarchyReader, n Node) error {
	if n.Depth > MaxTreeDepth {
		return fmt.Errorf("%w: %s sits %d levels deep; a hierarchy has at most %d levels, root included: flatten it",
			ErrInvalidHierarchy, n.Key, n.Depth, MaxTreeDepth)
	}
	i := len(t.Nodes)
	t.Nodes = append(t.Nodes, n)
	if n.Composite == nil {
		return nil
	}
	composites, specs, err := r.Children(n.Key.Namespace, n.Key.Name)
	if err != nil {
		return fmt.Errorf("listing the children of %s: %w", n.Key, err)
	}
	children := make([]Node, 0, len(composites)+len(specs))
	for _, c := range composites {
		children = append(children, Node{Key: c.Key, Composite: c, Parent: i, Depth: n.Depth + 1})
	}
	for _, s := range specs {
		children = append(children, Node{Key: s.Key, Spec: s, Parent: i, Depth: n.Depth + 1})
	}
	slices.SortFunc(children, func(a, b Node) int {
		return cmp.Or(a.created().Compare(b.created()), cmp.Compare(a.Key.Name, b.Key.Name), cmp.Compare(a.Key.API, b.Key.API))
	})
	for _, c := range children {
		t.Nodes[i].Children = append(t.Nodes[i].Children, len(t.Nodes))
		if err := t.grow(r, c); err != nil {
			return err
		}
	}
	return nil
}

// validate checks each node's spec and that all come from one Workload.
func (t *Tree) validate() error {
	var errs []error
	var workload *WorkloadRef
	var from Key
	for i := range t.Nodes {
		n := &t.Nodes[i]
		var err error
		var w *WorkloadRef
		if n.Composite != nil {
			err, w = n.Composite.Validate(), n.Composite.Workload
		} else {
			err, w = n.Spec.Validate(), n.Spec.Workload
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n.Key, err))
		}
		switch {
		case w == nil:
		case workload == nil:
			workload, from = w, n.Key
		case w.Name != workload.Name:
			errs = append(errs, fmt.Errorf("%s comes from Workload %s and %s from Workload %s: a hierarchy is one Workload's; "+
				"recreate %s under a composite of its own Workload", from, workload.Name, n.Key, w.Name, n.Key))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidHierarchy, errors.Join(errs...))
	}
	return nil
}

// Spec is the gang the scheduler admits a gang composite's tree as, rooted
// at its composite: one unit whose key, object reference (for Events),
// creation, priority and topology are the root composite's. Its MinMember
// is the root's MinGroupCount, so a quorum counted for the unit
// (TreeQuorumOf at the root) reads against it, in children; the attempt's
// Timeout is the longest of its PodGroups'. A lone PodGroup's tree returns
// that PodGroup's own Spec.
func (t *Tree) Spec() *Spec {
	r := t.Root()
	if r.Composite == nil {
		return r.Spec
	}
	c := r.Composite
	s := &Spec{
		Key:               c.Key,
		UID:               c.UID,
		Created:           c.Created,
		Generation:        c.Generation,
		MinMember:         c.MinGroupCount,
		Annotations:       c.Annotations,
		Topology:          &placement.Policy{},
		Disruption:        c.Disruption,
		PriorityClassName: c.PriorityClassName,
		Priority:          c.Priority,
		PreemptionPolicy:  c.PreemptionPolicy,
		Workload:          c.Workload,
		Parent:            c.Parent,
		Deleting:          c.Deleting,
		Ref:               c.Ref,
		quorumField:       "spec.schedulingPolicy.gang.minGroupCount",
	}
	// The root subgroup of Hierarchy carries the composite's topology, and
	// a Request's Policy must equal it: no constraint is the empty policy,
	// never the members' annotations.
	if c.Topology != nil {
		*s.Topology = *c.Topology
	}
	for _, i := range t.Leaves() {
		s.Timeout = max(s.Timeout, t.Nodes[i].Spec.Timeout)
	}
	return s
}
