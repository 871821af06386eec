package preemption

import (
	"cmp"
	"math"
	"slices"
)

// priorityOffset lifts int32 priorities to positive numbers, so that sums of
// priorities only grow as victims are added and can bound the search.
const priorityOffset = int64(math.MaxInt32) + 1

// cost is Cost as the search keeps it: every field only grows as victims are
// added, so the cost of a partial set bounds all its extensions.
type cost struct {
	violations int64
	level      int64
	gangs      int64
	elastic    int64
	// maxPrio is math.MinInt64 for no victims.
	maxPrio int64
	// sumPrio sums priority+priorityOffset over victims.
	sumPrio int64
	// unmovable sums the work of victims that are not movable, work that
	// of all victims, in GPU-seconds.
	unmovable int64
	work      int64
	gpus      int64
}

// compare orders costs field by field: the numeric part of the cost order.
func (a *cost) compare(b *cost) int {
	if c := cmp.Compare(a.violations, b.violations); c != 0 {
		return c
	}
	if c := cmp.Compare(a.level, b.level); c != 0 {
		return c
	}
	if c := cmp.Compare(a.gangs, b.gangs); c != 0 {
		return c
	}
	if c := cmp.Compare(a.elastic, b.elastic); c != 0 {
		return c
	}
	if c := cmp.Compare(a.maxPrio, b.maxPrio); c != 0 {
		return c
	}
	if c := cmp.Compare(a.sumPrio, b.sumPrio); c != 0 {
		return c
	}
	if c := cmp.Compare(a.unmovable, b.unmovable); c != 0 {
		return c
	}
	if c := cmp.Compare(a.work, b.work); c != 0 {
		return c
	}
	return cmp.Compare(a.gpus, b.gpus)
}

// export turns the search's cost into the Cost people read.
func (a *cost) export() Cost {
	n := a.gangs + a.elastic
	c := Cost{
		Violations:          int(a.violations),
		Level:               int(a.level),
		Gangs:               int(a.gangs),
		Elastic:             int(a.elastic),
		SumPriority:         a.sumPrio - n*priorityOffset,
		UnmovableGPUSeconds: a.unmovable,
		WorkLostGPUSeconds:  a.work,
		GPUs:                a.gpus,
	}
	if n > 0 {
		c.MaxPriority = int32(a.maxPrio)
	}
	return c
}

// Victim sets tie-break on their items in canonical order (item ids are
// canonical ranks): the set whose first differing item comes first wins.
// Sets that tie on cost have as many items, so no list is a prefix of the
// other.

// listLess reports whether sorted id list a wins the tie-break against b.
func listLess(a, b []int32) bool {
	return slices.Compare(a, b) < 0
}

// tieLost reports whether every extension of the partial set chosen (sorted
// ids, all below q) by items with ids q and above loses the tie-break to the
// incumbent's sorted ids inc: their first difference below q is an item
// only the incumbent has.
func tieLost(chosen, inc []int32, q int32) bool {
	i, j := 0, 0
	for {
		hasC := i < len(chosen)
		hasI := j < len(inc) && inc[j] < q
		switch {
		case !hasC && !hasI:
			return false // equal so far: the outcome depends on items from q on
		case !hasI:
			return false // chosen has an item below q the incumbent lacks: it wins
		case !hasC:
			return true
		case chosen[i] == inc[j]:
			i++
			j++
		case chosen[i] < inc[j]:
			return false
		default:
			return true
		}
	}
}
