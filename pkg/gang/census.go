package gang

import (
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
