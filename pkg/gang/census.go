package gang

import (
	"slices"

	v1 "k8s.io/api/core/v1"
)

// Census counts a gang's members by where they are in their life. The
// scheduler and the status controller fill it from the pods they see and
// decide quorum from it with QuorumOf, so both mean the same thing by it.
type Census struct {
	// Waiting members have no node yet and are not being deleted.
	Waiting int32
	// Reserved members have a node that the scheduler reserved but that
	// the API does not show yet (assumed, waiting in Permit, binding).
	// Only the scheduler knows them; they are counted out of Waiting.
	Reserved int32
	// Bound members have a node and have not finished.
	Bound int32
	// Succeeded members finished successfully. They held a node and did
	// their part, so they count towards quorum.
	Succeeded int32
	// Failed members finished unsuccessfully. They do not count: the
	// workload's controller replaces them or fails the job.
	Failed int32
	// Deleting members are being deleted. They do not count.
	Deleting int32
}

// Count builds a census from a gang's pods. Pods may come in any order and
// in any phase; each is counted once.
func Count(pods []*v1.Pod) Census {
	var c Census
	for _, p := range pods {
		c.Add(p)
	}
	return c
}

// Add counts one more pod.
func (c *Census) Add(p *v1.Pod) {
	switch {
	case p.DeletionTimestamp != nil:
		c.Deleting++
	case p.Status.Phase == v1.PodSucceeded:
		c.Succeeded++
	case p.Status.Phase == v1.PodFailed:
		c.Failed++
	case p.Spec.NodeName != "":
		c.Bound++
	default:
		c.Waiting++
	}
}

// Reserve moves n waiting members to Reserved.
func (c *Census) Reserve(n int32) {
	n = min(n, c.Waiting)
	c.Waiting -= n
	c.Reserved += n
}

// Present counts the members that exist and count towards quorum.
func (c Census) Present() int32 { return c.Waiting + c.Reserved + c.Bound + c.Succeeded }

// Placed counts the members that hold or held a node.
func (c Census) Placed() int32 { return c.Reserved + c.Bound + c.Succeeded }

// Quorum is the one answer to "has this gang enough members?".
type Quorum struct {
	// Gathered is true once at least minMember members exist (waiting,
	// placed or succeeded): the gang may be planned.
	Gathered bool
	// Placed is true once at least minMember members hold or held a node
	// (reserved, bound, running or succeeded): the gang may run.
	Placed bool
	// Bound is true once at least minMember members are bound, running or
	// succeeded: the API shows the gang placed, not only this scheduler.
	Bound bool
	// Missing is how many members must still be placed to reach
	// minMember; 0 once Placed.
	Missing int32
	// Absent is how many members must still be created to reach
	// minMember; 0 once Gathered.
	Absent int32
}

// QuorumOf decides quorum for a gang that needs minMember members.
// Succeeded members count while some member of the gang is still bound and
// running: they did their part of the run in progress. Once none is, the
// run is over, and members that appear start a new run (a job restarted
// under the same PodGroup) that gathers as a whole; members the scheduler
// has only reserved do not revive the old run.
func QuorumOf(minMember int32, c Census) Quorum {
	c = c.ofThisRun()
	return Quorum{
		Gathered: c.Present() >= minMember,
		Placed:   c.Placed() >= minMember,
		Bound:    c.Bound+c.Succeeded >= minMember,
		Missing:  max(0, minMember-c.Placed()),
		Absent:   max(0, minMember-c.Present()),
	}
}

// SurplusOf is how many of a gang's members may go alone (be preempted or
// evicted one by one) and leave it at quorum: those placed above minMember,
// counted as QuorumOf counts them. A gang that may only be disrupted whole
// (DisruptionAll) has no surplus; its callers check that first.
func SurplusOf(minMember int32, c Census) int32 {
	return max(0, c.ofThisRun().Placed()-minMember)
}

// ofThisRun leaves out succeeded members once no member is bound: they did
// their part of a run that is over (see QuorumOf).
func (c Census) ofThisRun() Census {
	if c.Bound == 0 {
		c.Succeeded = 0
	}
	return c
}

// GroupQuorum is the quorum of one node of a hierarchy (Tree): for a
// PodGroup its own, for a composite the one its children reach.
type GroupQuorum struct {
	// Quorum says whether the node gathered, is placed and is bound. For a
	// composite, Missing and Absent count children: how many more must be
	// placed, or gather, to reach Need.
	Quorum
	// Need is what the quorum counts to: a PodGroup's minMember, a
	// composite's MinGroupCount.
	Need int32
	// Census sums the members of the node's PodGroups, itself or those of
	// its subtree, for status.
	Census Census
	// Children counts a composite's children by their own quorum; zero for
	// a PodGroup.
	Children ChildCounts
}

// ChildCounts counts a composite's children by where their quorum is.
type ChildCounts struct {
	// Total is how many children the composite has.
	Total int32
	// Gathered, Placed and Bound count the children whose quorum gathered,
	// is placed and is bound.
	Gathered, Placed, Bound int32
}

// TreeQuorumOf is the one answer to "has this hierarchy enough members?",
// at every node of t, indexed like t.Nodes. A PodGroup's quorum is
// QuorumOf its minMember and its census, which census returns. A
// composite's counts its children: it gathered once MinGroupCount of them
// gathered, is placed once that many are placed and bound once that many
// are bound, each child by its own quorum, a child composite recursively.
// The scheduler admits a gang composite once its quorum is placed, and the
// status controller reports from the same answer.
func TreeQuorumOf(t *Tree, census func(Key) Census) []GroupQuorum {
	out := make([]GroupQuorum, len(t.Nodes))
	// Children come after their parent in pre-order: walk backwards.
	for i := len(t.Nodes) - 1; i >= 0; i-- {
		n := &t.Nodes[i]
		if n.Spec != nil {
			c := census(n.Key)
			out[i] = GroupQuorum{Quorum: QuorumOf(n.Spec.MinMember, c), Need: n.Spec.MinMember, Census: c}
			continue
		}
		g := GroupQuorum{Need: n.Composite.MinGroupCount}
		for _, c := range n.Children {
			q := &out[c]
			g.Census = g.Census.plus(q.Census)
			g.Children.Total++
			g.Children.Gathered += b2i(q.Gathered)
			g.Children.Placed += b2i(q.Placed)
			g.Children.Bound += b2i(q.Bound)
		}
		g.Quorum = Quorum{
			Gathered: g.Children.Gathered >= g.Need,
			Placed:   g.Children.Placed >= g.Need,
			Bound:    g.Children.Bound >= g.Need,
			Missing:  max(0, g.Need-g.Children.Placed),
			Absent:   max(0, g.Need-g.Children.Gathered),
		}
		out[i] = g
	}
	return out
}

func b2i(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// plus returns the sum of two censuses.
func (c Census) plus(o Census) Census {
	return Census{Waiting: c.Waiting + o.Waiting, Reserved: c.Reserved + o.Reserved, Bound: c.Bound + o.Bound,
		Succeeded: c.Succeeded + o.Succeeded, Failed: c.Failed + o.Failed, Deleting: c.Deleting + o.Deleting}
}

// Admission says which PodGroups of a hierarchy to plan now (Admit).
type Admission struct {
	// Ready is set when the root may be planned: its quorum gathered (or
	// is placed already). Unset, Plan is empty and the hierarchy waits for
	// members.
	Ready bool
	// Admitted is set when the root's quorum is placed already: Plan then
	// lists the PodGroups that gathered since, which join it as an elastic
	// gang's members above its quorum do.
	Admitted bool
	// Plan lists the nodes (indices in Tree.Nodes) of the PodGroups to plan
	// now, in tree order; their members go in one plan (Tree.Hierarchy).
	Plan []int
}

// Admit says which PodGroups to plan to place the quorum of t's root, from
// its quorum (TreeQuorumOf). A composite not yet at quorum counts its
// children already placed (a repair keeps them) and adds, in the order of
// its children (oldest first, then by name), the first of those that
// gathered but are not placed, until MinGroupCount are; the others wait and
// join once it is admitted. A composite at quorum plans every child that
// gathered since. A PodGroup is planned when it gathered and is not placed.
func Admit(t *Tree, q []GroupQuorum) Admission {
	var plan []int
	var choose func(i int) bool
	choose = func(i int) bool {
		n := &t.Nodes[i]
		if n.Spec != nil {
			if q[i].Placed {
				return true
			}
			if q[i].Gathered {
				plan = append(plan, i)
				return true
			}
			return false
		}
		if q[i].Placed {
			for _, c := range n.Children {
				if q[c].Placed || q[c].Gathered {
					choose(c)
				}
			}
			return true
		}
		count := q[i].Children.Placed
		mark := len(plan)
		for _, c := range n.Children {
			if count >= q[i].Need {
				break
			}
			if !q[c].Placed && q[c].Gathered && choose(c) {
				count++
			}
		}
		if count < q[i].Need {
			plan = plan[:mark]
			return false
		}
		return true
	}
	if !choose(0) {
		return Admission{}
	}
	slices.Sort(plan)
	return Admission{Ready: true, Admitted: q[0].Placed, Plan: plan}
}

// ChildSurplusOf is how many of a running composite's children may go alone
// (be preempted or evicted, each as its own Terms say) and leave it at
// quorum: those placed above MinGroupCount. A composite that may only be
// disrupted whole (DisruptionAll) has none.
func ChildSurplusOf(c *CompositeSpec, q GroupQuorum) int32 {
	if c.Disruption == DisruptionAll {
		return 0
	}
	return max(0, q.Children.Placed-q.Need)
}
