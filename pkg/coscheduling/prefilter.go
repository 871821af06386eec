package coscheduling

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/contract"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/core"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// PreFilter plans the member's gang if it has no plan yet, and restricts the
// member to the nodes its plan has room on. A running gang's replacement is
// planned on its own, next to the gang. For every pod it notes the capacity
// other gangs hold, for Filter.
func (pl *Plugin) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if contract.Simulated(ctx) {
		// The plugin itself is asking the profile's other plugins about a
		// member it plans; it has nothing to add.
		return nil, fwk.NewStatus(fwk.Skip)
	}
	// DynamicResources has read the allocated devices: the fence it read
	// them through comes down before anything else reads them.
	raised := pl.fences.Lower()
	key, isMember := pl.unitOf(pod)
	s := &cycleState{request: capacity.PodAmounts(pod), held: pl.ledger.HeldByOthers(key, pl.queueOrderOf(pod))}
	if len(s.held) > 0 {
		s.devices = pl.devices.PodFit(ctx, pod, s.request)
	}
	cs.Write(stateKey, s)
	if !isMember {
		if len(s.held) == 0 {
			return nil, fwk.NewStatus(fwk.Skip)
		}
		return nil, nil
	}
	u, status := pl.unit(pod, key)
	if status != nil {
		return nil, status
	}
	spec := u.Spec()
	if until, reason, ok := pl.ledger.Reservations.Backoff(key); ok {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("gang %s retries at %s after: %s", key, until.UTC().Format(time.RFC3339), reason))
	}
	if pl.ledger.Reservations.Expired(key) && len(pl.claims.Claims(key)) > 0 {
		// The plan expired before its members reserved, and the claims
		// written for it may pin them to a node that can no longer take
		// them: end the attempt so that they are given back, and plan
		// afresh once they are.
		pl.failGang(ctx, key, ReasonGangTimedOut, "its plan expired before its members reserved; the claims written for it are given back", false)
	}
	if pl.claims.Busy(key) {
		// The plan is kept while what its members share is written: none
		// reserves with a claim about to change.
		return nil, dra.ClaimsBusy(key)
	}
	view := pl.viewOf(key)
	q := u.Quorum(view)
	var nodes []string
	if pl.running(key, q) {
		batch, err := u.Joining(view, pod)
		if err != nil {
			return nil, core.UnitStatus(err)
		}
		if status := pl.core.PlanGang(ctx, spec, batch, s.held); !status.IsSuccess() {
			s.unplaced, s.spec, s.unplacedStatus = batch, spec, status
			return nil, status
		}
		nodes, _ = pl.ledger.Reservations.PlanSlots(key, pod.UID, s.request)
	} else {
		if q.Placed {
			return nil, nil // the attempt in flight has its quorum already
		}
		var planned bool
		nodes, planned = pl.ledger.Reservations.PlanSlots(key, pod.UID, s.request)
		if planned && pl.core.Realigns(key) {
			// A preemption's plan, made for rails: planned again on what
			// the victims freed, once they are gone.
			if n, waiting := pl.ledger.Preemptions.AwaitingVictims(pl.ownerOf(pod)); waiting {
				return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("%s: %d of the pods preempted for %s have not gone yet; their room is held for it",
					ErrReasonAwaitingVictims, n, pl.preemptorName(pod)))
			}
			planned = false
		}
		if !planned {
			batch, err := u.NextBatch(view, q)
			if err != nil {
				return nil, core.UnitStatus(err)
			}
			if status := pl.core.PlanGang(ctx, spec, batch, s.held); !status.IsSuccess() {
				s.unplaced, s.spec, s.unplacedStatus = batch, spec, status
				return nil, status
			}
			nodes, _ = pl.ledger.Reservations.PlanSlots(key, pod.UID, s.request)
		}
	}
	if len(nodes) == 0 {
		if why := u.NoSlot(pod); why != "" {
			return nil, fwk.NewStatus(fwk.Unschedulable, ErrReasonNoSlot+": "+why)
		}
		return nil, fwk.NewStatus(fwk.Unschedulable, ErrReasonNoSlot)
	}
	if !pl.fences.AsFenced(pod, raised) {
		return nil, pl.fenceNextCycle(pod, key)
	}
	s.planNodes = nodes
	return &fwk.PreFilterResult{NodeNames: sets.New(nodes...)}, nil
}

// fenceNextCycle turns away a member whose plan chose its devices after
// DynamicResources read the allocated devices in this cycle, unfenced
// (railfence.go): its next cycle raises the fence. The next cycle of any
// pod activates it; activated now, while in flight, it comes back after
// its backoff at the latest.
func (pl *Plugin) fenceNextCycle(pod *v1.Pod, key gang.Key) *fwk.Status {
	pl.fences.Later(pod)
	pl.handle.Activate(pl.logger, map[string]*v1.Pod{pod.Namespace + "/" + pod.Name: pod})
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gang %s: %s", key, ErrReasonFenceNextCycle))
}

// ErrReasonFenceNextCycle is the status of a member turned away to raise
// its fence in its next cycle.
const ErrReasonFenceNextCycle = "the plan chose this member's devices on its rails after DynamicResources read them: it schedules in its next cycle, with the other devices fenced"

// PreFilterExtensions returns nil: held capacity does not change when
// preemption simulates adding or removing pods.
func (pl *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return nil }
