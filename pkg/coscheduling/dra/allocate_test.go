package dra

import (
	"context"
	"errors"
	"testing"

	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
)

// gatherTracker refuses the read of allocated devices fails times, as the
// scheduler's tracker does when the read races a change.
type gatherTracker struct {
	fwk.ResourceClaimTracker
	fails int
}

func (g *gatherTracker) GatherAllocatedState() (*structured.AllocatedState, error) {
	if g.fails > 0 {
		g.fails--
		return nil, errors.New("conflicting concurrent modification")
	}
	return &structured.AllocatedState{}, nil
}

type gatherManager struct {
	fwk.SharedDRAManager
	tracker *gatherTracker
}

func (m gatherManager) ResourceClaims() fwk.ResourceClaimTracker { return m.tracker }

// TestGatherRetriesRacedReads checks that a read of allocated devices that
// raced a change is read again, and that one that keeps racing is a
// transient failure (the gang tries again without a penalty), not a
// failure of the plan.
func TestGatherRetriesRacedReads(t *testing.T) {
	for _, tc := range []struct {
		fails     int
		transient bool
	}{{fails: 0}, {fails: 3}, {fails: gatherTries + 1, transient: true}} {
		a := &Allocator{DRA: gatherManager{tracker: &gatherTracker{fails: tc.fails}}}
		_, err := a.gather(context.Background())
		if (err != nil) != tc.transient || (err != nil && !Transient(err)) {
			t.Errorf("%d raced reads: err %v, want a transient error: %v", tc.fails, err, tc.transient)
		}
	}
}
