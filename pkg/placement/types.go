package placement

import (
	"context"
	"fmt"
	"strings"
)

// Vector holds one quantity per resource dimension. The dimensions, and so the
// meaning of each index, are fixed by the Request that carries the vector.
type Vector []int64

// QuantityFits is the one rule for whether a request fits in free room,
// one dimension at a time: a dimension the request does not ask for
// (request <= 0) never stands in the way, even where the room is
// overcommitted; any other needs free >= request. Pruning, the planners'
// slot counts, the holds and capacity.Amounts all ask it, through FitsIn
// and FitCount: a plan is pruned correctly only while they agree.
func QuantityFits(request, free int64) bool {
	return request <= 0 || free >= request
}

// FitsIn reports whether one copy of v fits in free (QuantityFits on every
// dimension).
func (v Vector) FitsIn(free Vector) bool {
	for i, q := range v {
		if !QuantityFits(q, free[i]) {
			return false
		}
	}
	return true
}

// FitCount is how many copies of request fit in free, at most limit; a
// request of nothing fits limit times. It counts by QuantityFits: it is
// above zero exactly when request.FitsIn(free).
func FitCount(request, free Vector, limit int64) int64 {
	n := limit
	for d, q := range request {
		if q <= 0 {
			continue
		}
		if !QuantityFits(q, free[d]) {
			return 0
		}
		n = min(n, free[d]/q)
	}
	return n
}

// Add adds o to v in place.
func (v Vector) Add(o Vector) {
	for i := range v {
		v[i] += o[i]
	}
}

// Sub subtracts o from v in place.
func (v Vector) Sub(o Vector) {
	for i := range v {
		v[i] -= o[i]
	}
}

// Clone returns a copy of v that shares no memory with it.
func (v Vector) Clone() Vector {
	return append(Vector(nil), v...)
}

// IsZero reports whether every quantity in v is zero.
func (v Vector) IsZero() bool {
	for _, q := range v {
		if q != 0 {
			return false
		}
	}
	return true
}

// Node is a candidate node as one gang sees it.
type Node struct {
	// Name is the node's name.
	Name string
	// Labels are the node's labels. Planners only read them.
	Labels map[string]string
	// Allocatable is the node's whole capacity.
	Allocatable Vector
	// Free is the capacity this gang may use now: allocatable, minus what
	// running and assumed pods request, minus what other gangs have claimed.
	Free Vector
	// LabelsVersion, when not zero, versions Labels: two Nodes of the same
	// name and the same non-zero LabelsVersion carry the same labels, so
	// what a planner derived from one node's labels holds for the other
	// without reading them again. Zero says nothing: the labels must be
	// read. Whoever builds the nodes (the gang plugin's planning snapshot)
	// moves it only when a node's labels change.
	LabelsVersion uint64
}

// SameLabels reports whether n carries the labels that were read from a
// node named name at labels version version (see LabelsVersion): only
// when both name one node and a version. False means "read them again",
// not "they differ".
func (n *Node) SameLabels(name string, version uint64) bool {
	return version != 0 && n.LabelsVersion == version && n.Name == name
}

// Member is one gang member still to be placed.
type Member struct {
	// Name identifies the member in messages, as namespace/name.
	Name string
	// Rank orders members: neighbouring ranks should land close together.
	Rank int
	// Request is what the member asks for, in the Request's dimensions.
	Request Vector
	// Eligible[i] says whether the member may run on Nodes[i] at all (taints,
	// node selector, required node affinity). Nil means every node is.
	// Members with the same constraints share one slice.
	Eligible []bool
	// Accelerated is true for members that request accelerators. Only they
	// are bound by topology; the others (an MPI launcher, say) go anywhere.
	Accelerated bool
	// MaxPerNode caps how many members of this member's kind (the same
	// Request, Eligible slice and cap) may share one node; 0 means no cap.
	// Members that exclude each other set it, such as members with
	// required anti-affinity on the hostname or the same host port.
	MaxPerNode int
}

// EligibleOn reports whether the member may run on node i.
func (m *Member) EligibleOn(i int) bool {
	return m.Eligible == nil || m.Eligible[i]
}

// Policy is a gang's topology constraint.
type Policy struct {
	// Level is the node label key of the topology level the policy names.
	// Empty means the planner's default (preferred, tightest level first).
	Level string
	// Required makes Level a hard constraint: the gang must fit inside one
	// domain of that level or not start.
	Required bool
}

// Request is everything a planner needs to place one gang.
type Request struct {
	// Gang is the gang's namespace/name, for messages.
	Gang string
	// Resources names the vector dimensions, for messages.
	Resources []string
	// Nodes are the candidates, in a deterministic order.
	Nodes []Node
	// NodeGeneration changes whenever the node set or any node's labels
	// change. Planners may use it to cache what they derive from Nodes'
	// names and labels, but must check that Nodes still match what they
	// cached: the snapshot Nodes come from may lag behind the event that
	// changed the generation. They must not cache anything derived from
	// Free, unless StableFree is set.
	NodeGeneration uint64
	// LabelsEpoch, when not zero, versions Nodes' names, order and labels
	// as a whole: two requests with the same non-zero LabelsEpoch carry
	// the same nodes in the same order, each with the same labels and
	// LabelsVersion, so what a planner derived from them holds without
	// reading them node by node. Zero says nothing. Whoever builds the
	// nodes (the gang plugin's planning snapshot) moves it only when a
	// node comes, goes or changes labels.
	LabelsEpoch uint64
	// StableFree says that no Free vector of Nodes is written once a
	// planner has seen it: a node whose free capacity changes comes with a
	// new vector. Planners may then keep what they derive from a node's
	// Free by the vector's identity, holding the vector so that its memory
	// is not reused.
	StableFree bool
	// Members are the members to place, in rank order.
	Members []Member
	// Policy is the gang's topology constraint.
	Policy Policy
	// Anchors are the nodes (indices into Nodes) that already run members
	// of this gang, one entry per such member that topology binds. When
	// set, Members are the gang's replacements or late elastic members:
	// they go as close to the anchors as they fit, in the tightest domain
	// around most of them that has room, and never outside the domain of a
	// required Policy level that holds most of them.
	Anchors []int
	// Groups, when set, splits Nodes into groups that the members bound by
	// topology must not mix (see Groups). Nil means one group. With
	// Anchors, the new members join the group holding most anchors.
	Groups *Groups
	// Hierarchy, when set, makes the gang a tree of subgroups, each with
	// its own topology constraint (see Subgroup); its root is the whole
	// gang, under Policy. Nil is a flat gang.
	Hierarchy *Subgroup
}

// Plan puts every member of a Request on a node.
type Plan struct {
	// NodeOf[i] is the index in Request.Nodes of the node chosen for
	// Request.Members[i].
	NodeOf []int
	// Summary says, for people, where the gang goes and how tight the
	// placement is, e.g. "4 pods on 1 node" or "16 pods in leaf s1-l3: ...".
	Summary string
	// Spans counts, per topology level, the domains the plan's members
	// use, loosest level first. A planner that knows no topology reports
	// the node level only.
	Spans []Span
	// Subgroups says where each subgroup of a Request's Hierarchy went, in
	// the order Request.Subgroups lists them; nil for a flat gang.
	Subgroups []SubgroupPlan
}

// Span is how many domains of one topology level a plan uses.
type Span struct {
	// Level is the level's node label key; kubernetes.io/hostname for nodes.
	Level string
	// Domains is how many domains of that level hold members.
	Domains int
}

// Planner chooses where a whole gang goes.
type Planner interface {
	Plan(ctx context.Context, req *Request) (*Plan, error)
}

// FitError says that a gang does not fit, and how far placement got.
type FitError struct {
	// Placed is how many members found a node before placement stopped.
	Placed int
	// Wanted is how many members the request had.
	Wanted int
	// Reason explains the failure for people.
	Reason string
}

func (e *FitError) Error() string {
	return fmt.Sprintf("%d of %d members fit: %s", e.Placed, e.Wanted, e.Reason)
}

// Describe renders a vector with its dimension names, skipping zeros, in
// dimension order: "cpu=4000m nvidia.com/gpu=8".
func Describe(names []string, v Vector) string {
	var b strings.Builder
	for i, q := range v {
		if q == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", names[i], FormatQuantity(names[i], q))
	}
	if b.Len() == 0 {
		return "nothing"
	}
	return b.String()
}

// FormatQuantity renders one quantity in the unit the scheduler keeps it in:
// millicores for cpu, bytes for memory and storage, plain counts otherwise.
func FormatQuantity(name string, q int64) string {
	switch name {
	case "cpu":
		if q%1000 == 0 {
			return fmt.Sprintf("%d", q/1000)
		}
		return fmt.Sprintf("%dm", q)
	case "memory", "ephemeral-storage":
		const gi = 1 << 30
		if q%gi == 0 {
			return fmt.Sprintf("%dGi", q/gi)
		}
		return fmt.Sprintf("%d", q)
	}
	return fmt.Sprintf("%d", q)
}
