package gang

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Unit is an admission unit: the members a scheduler gathers, plans, holds
// and releases as one, keyed in its state by Key. There are three kinds,
// each a type of its own, built by UnitOf and nowhere else:
//   - a plain gang: a PodGroup of either API, whose members are alike;
//   - a segmented gang: a PodGroup whose members are cut into segments of
//     consecutive ranks (SegmentsOf), which start, grow and bind by whole
//     segments (Segments.Start, Join, Ready);
//   - a composite: a gang CompositePodGroup's Tree of PodGroups, which
//     starts once MinGroupCount children are each at their own quorum
//     (TreeQuorumOf, Admit), and whose children join it later whole.
//
// A Unit holds its Spec and its members as they were read; it is built
// afresh for each decision and never written. What only the scheduler
// knows (its reservations, its finished pods, its levels) reaches the
// decisions through a View.
type Unit interface {
	// Key names the unit: its PodGroup's key, or its root composite's.
	Key() Key
	// Spec is what the unit is admitted as: its PodGroup's Spec, or the
	// Spec its tree is admitted as (Tree.Spec), whose MinMember counts
	// children.
	Spec() *Spec
	// Members are the unit's live members: its PodGroup's, or, for a
	// composite, every PodGroup's of its tree, in tree order and by rank
	// within each.
	Members() []*v1.Pod
	// Validate reports what makes the unit's own Spec impossible to honour;
	// a composite's tree was checked whole when it was read (BuildTree).
	Validate() error

	// Quorum is the one answer to "has this unit enough members?":
	// QuorumOf for a gang, TreeQuorumOf at the root for a composite (whose
	// Need, Missing and Absent count children).
	Quorum(v View) GroupQuorum
	// QuorumWith is Quorum counted against minMember, a count recorded
	// earlier (a preemptor's, when it preempted): a gang's members against
	// it; a composite's children against its own MinGroupCount, which such
	// a record copies.
	QuorumWith(v View, minMember int32) Quorum
	// NextBatch picks the members to plan for the attempt that brings the
	// unit, whose quorum is q, to quorum placed, in rank order within each
	// PodGroup: a gang's next Missing pending members, a segmented gang's
	// whole segments (Segments.Start), a composite's members that bring
	// each child Admit chose to its own quorum. A *WaitError says what the
	// unit still waits for.
	NextBatch(v View, q GroupQuorum) ([]*v1.Pod, error)
	// Joining picks the members to plan with pod, a pending member of the
	// running unit: the pod alone (a replacement, an elastic extra), its
	// whole segment when that has not started (Segments.Join), or the
	// members that bring its PodGroup to its own quorum when it is a
	// composite's child that has not started: a late child starts whole.
	Joining(v View, pod *v1.Pod) ([]*v1.Pod, error)
	// Ready reports whether pod, a member of the running unit that holds a
	// node, may bind now: a gang's member may; a segmented gang's once its
	// segment runs or holds all its nodes (Segments.Ready); a composite's
	// once its PodGroup has its own quorum placed or is running already.
	Ready(v View, pod *v1.Pod) bool

	// VictimUnits splits pods, the unit's running members that preemption
	// may take, into the units it may take them as, by key: a gang, and a
	// composite that goes whole, are one unit; a composite that lets
	// children go (ChildSurplusOf) gives each of its newest placed children
	// above MinGroupCount as a unit of its own, under the child's key, and
	// keeps the rest under its own key.
	VictimUnits(v View, pods []*v1.Pod) map[Key][]*v1.Pod
	// Disruption says how pods, the running members of this unit that
	// preemption looks at, may go: minMember is the count its quorum needs
	// (its start is when that many began to run, StartedAt), surplus how
	// many may go alone and leave it at quorum. A composite goes whole: its
	// children above quorum are units of their own already (VictimUnits).
	Disruption(v View, pods []*v1.Pod) (minMember int32, surplus int)

	// Shape hands the building of the unit's placement request to the
	// shaper's method for its kind: one hierarchy for a composite's tree,
	// a gang's own policy and segments otherwise.
	Shape(s Shaper) error

	// Gathering says why the unit, whose quorum q has not gathered, waits.
	Gathering(q GroupQuorum) Gathering
	// WaitingToBind says what a member that holds a node waits for in
	// Permit, the unit's quorum being q.
	WaitingToBind(q GroupQuorum) string
	// Scheduled describes the unit's attempt that reached quorum with c,
	// placed as summary says.
	Scheduled(c Census, summary string) string
	// Lost describes the loss of pod, a running member, which how says
	// ("was deleted", "failed"), the unit's quorum now being q; warning is
	// set when the unit runs below its quorum.
	Lost(pod *v1.Pod, how string, q GroupQuorum) (warning bool, msg string)
	// NoSlot says why pod has no slot in the unit's attempt in flight, or
	// "" when there is nothing to say beyond that.
	NoSlot(pod *v1.Pod) string
}

// View is what the scheduler that holds a unit knows beyond the API
// objects, which the unit's decisions read: the scheduler implements it
// over its own state (its reservations, its finished pods) and its
// configuration (levels, compute domains), none of which pkg/gang sees.
type View interface {
	// Census counts the members of leaf, one of the unit's PodGroups (the
	// unit's own for a gang), whose live members are members: the
	// reserved ones as the unit's attempt reserved them, the succeeded
	// ones as the PodGroup's finished pods show.
	Census(leaf Key, members []*v1.Pod) Census
	// Reserved reports whether the unit's attempt reserved a node for the
	// member uid names.
	Reserved(uid types.UID) bool
	// Segments reads a gang's segments and checks them against its members
	// (every one that exists, in rank order) and its policy, as the
	// scheduler sees them (SegmentsOf, Segments.Validate). An error means
	// no plan can honour them until someone changes the gang; the
	// scheduler has said so, and the decision passes the error on.
	Segments(spec *Spec, members []*v1.Pod) (Segments, error)
}

// Shaper builds a unit's placement request, one method per shape; the
// scheduler implements it (Unit.Shape picks the method).
type Shaper interface {
	// ShapeGang shapes a PodGroup's request: its own policy, its segments
	// and its sharers.
	ShapeGang() error
	// ShapeTree shapes a composite's: one hierarchy over its tree
	// (Tree.Hierarchy), each PodGroup's leaf shaped as its own.
	ShapeTree(t *Tree) error
}

// Gathering says why a unit whose quorum has not gathered waits, for its
// Event and the status its member is held back with.
type Gathering struct {
	// Invalid is set when the unit can never gather as it is (a composite
	// with fewer children than MinGroupCount): Event then names the fix.
	Invalid bool
	// Event is the message of the unit's Event; Status that of the status
	// its member waits with.
	Event, Status string
}

// WaitError is the error of a decision that waits for members: nothing is
// wrong with the unit, but members it needs are not there yet, or not yet
// schedulable. Its Reason says which.
type WaitError struct{ Reason string }

func (e *WaitError) Error() string { return e.Reason }

func waitFor(format string, args ...any) error {
	return &WaitError{Reason: fmt.Sprintf(format, args...)}
}

// HierarchyError is the error of a composite unit whose tree cannot be
// read: a missing parent or child, a cycle, a hierarchy too deep (Err
// wraps ErrMissingParent, ErrInvalidHierarchy or the read's error). The
// composite Root names is where its fix is recorded.
type HierarchyError struct {
	Root Key
	Err  error
}

func (e *HierarchyError) Error() string { return e.Err.Error() }

// Unwrap returns the error reading the tree.
func (e *HierarchyError) Unwrap() error { return e.Err }

// UnitReader is where UnitOf reads a unit's objects: Sources, or a test's
// map.
type UnitReader interface {
	// Spec returns a PodGroup's Spec (Sources.Spec).
	Spec(key Key) (*Spec, error)
	// Tree returns the hierarchy rooted at a composite (BuildTree).
	Tree(key Key) (*Tree, error)
}

// MemberLister lists the live members of one PodGroup (Members over the
// scheduler's pod index).
type MemberLister func(key Key) ([]*v1.Pod, error)

// UnitOf reads the admission unit key names, a PodGroup or a gang
// composite that is a unit's root (RootOf), with its members, and decides
// its kind: this is the one place that does. A composite whose tree cannot
// be read returns a *HierarchyError; a PodGroup the Spec's error, which is
// Sources.Spec's (not found, not watched). Its Spec is not validated
// (Unit.Validate).
func UnitOf(r UnitReader, list MemberLister, key Key) (Unit, error) {
	if key.API == Composite {
		tree, err := r.Tree(key)
		if err != nil {
			return nil, &HierarchyError{Root: key, Err: err}
		}
		members, err := treeMembers(tree, list)
		if err != nil {
			return nil, err
		}
		return &compositeUnit{tree: tree, spec: tree.Spec(), members: members}, nil
	}
	spec, err := r.Spec(key)
	if err != nil {
		return nil, err
	}
	members, err := list(key)
	if err != nil {
		return nil, err
	}
	return gangUnitOf(spec, members), nil
}

// SpecOf reads what the unit key names is admitted as (Unit.Spec) without
// its members: for an Event or a metric about a unit.
func SpecOf(r UnitReader, key Key) (*Spec, error) {
	if key.API == Composite {
		t, err := r.Tree(key)
		if err != nil {
			return nil, err
		}
		return t.Spec(), nil
	}
	return r.Spec(key)
}

// MembersOf lists the live members of the unit key names (Unit.Members)
// without deciding its kind.
func MembersOf(r UnitReader, list MemberLister, key Key) ([]*v1.Pod, error) {
	if key.API == Composite {
		tree, err := r.Tree(key)
		if err != nil {
			return nil, err
		}
		return treeMembers(tree, list)
	}
	return list(key)
}

// InterchangeableMembers reports whether the members of the unit key names
// may take each other's slots in a plan without a hierarchy: a gang's are
// alike; a composite's never are, whatever its planner reports, since each
// child plans inside its own subgroup's domain.
func InterchangeableMembers(key Key) bool { return key.API != Composite }

// treeMembers lists the live members of every PodGroup of a tree, in tree
// order and by rank within each PodGroup.
func treeMembers(tree *Tree, list MemberLister) ([]*v1.Pod, error) {
	var out []*v1.Pod
	for _, i := range tree.Leaves() {
		ms, err := list(tree.Nodes[i].Key)
		if err != nil {
			return nil, err
		}
		SortByRank(ms)
		out = append(out, ms...)
	}
	return out, nil
}

// pendingOf returns the members that have no node and no reservation and
// that the scheduler may place: a member with scheduling gates (a queueing
// system holds it) is not planned, so that its siblings do not hold nodes
// for it in Permit until the gang times out.
func pendingOf(v View, members []*v1.Pod) []*v1.Pod {
	var out []*v1.Pod
	for _, p := range members {
		if !v.Reserved(p.UID) && p.Spec.NodeName == "" && len(p.Spec.SchedulingGates) == 0 {
			out = append(out, p)
		}
	}
	return out
}
