package core

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// The head hold as planning drives it. The model (one turn at a time,
// never renewed, a yield after a turn that ran out) is ledger.Head's; the
// planner picks the part of a plan that is free now, takes the turn, says
// so, and ends the turn with a timer.

// holdAsHead lets a gang that would fit once running jobs finish, but does
// not fit now, hold the places of that eventual plan, if it is the first
// such gang in queue order (see package ledger, Head): the places free now,
// and, as waiting places, those that running pods still use, so that what
// frees up there stays the gang's even when another gang is tried before
// it plans again.
func (pl *Planner) holdAsHead(ctx context.Context, spec *gang.Spec, members []*v1.Pod, req *placement.Request, reqs []capacity.Amounts, eventual *placement.Plan) {
	free := make([]placement.Vector, len(req.Nodes))
	slots := make([]ledger.Slot, 0, len(members))
	var freeSlots int
	heldTotal := capacity.Amounts{}
	waitingOn := map[string]bool{}
	for i, p := range members {
		n := eventual.NodeOf[i]
		if free[n] == nil {
			free[n] = req.Nodes[n].Free.Clone()
		}
		s := ledger.Slot{UID: p.UID, Node: req.Nodes[n].Name, Request: reqs[i]}
		if req.Members[i].Request.FitsIn(free[n]) {
			free[n].Sub(req.Members[i].Request)
			freeSlots++
			heldTotal.Add(reqs[i])
		} else {
			s.Waiting = true
			waitingOn[s.Node] = true
		}
		slots = append(slots, s)
	}
	// A gang with nothing free yet still takes its turn at the head: it
	// holds only places it waits for, but no gang behind it may take the
	// turn, and what frees up there is kept for it until it plans again.
	// Otherwise a later gang of which a part happens to fit would hold
	// instead and keep absorbing what frees up, and the first gang would
	// starve.
	turn := pl.Timeout(spec)
	holds, since := pl.ledger.Head.Take(spec.Key, pl.gangs.QueueOrderOf(members[0]), slots, turn)
	if !holds || since.IsZero() {
		return
	}
	pl.reporter.HoldTaken()
	klog.FromContext(ctx).V(3).Info("Gang holds its plan's places while it waits for room",
		"podGroup", spec.Key, "free", freeSlots, "members", len(members), "waitingOnNodes", len(waitingOn), "turn", turn)
	if freeSlots == 0 {
		pl.reporter.GangEvent(spec, nil, v1.EventTypeNormal, ReasonGangHolding,
			"first in the queue, the gang takes its turn at the head for up to %s: nothing is free for it yet; what frees up on the %d nodes its plan waits for is held for it as running jobs finish, and gangs and pods queued behind it stay out",
			turn, len(waitingOn))
	} else {
		pl.reporter.GangEvent(spec, nil, v1.EventTypeNormal, ReasonGangHolding,
			"first in the queue, the gang holds the free places of %d of its %d members (%s) for up to %s, and what frees up on the %d nodes its plan waits for as running jobs finish; gangs and pods queued behind it stay out of them",
			freeSlots, len(members), heldTotal.Describe(), turn, len(waitingOn))
	}
	key := spec.Key
	pl.ledger.Timers.After(key, ledger.HoldEndTimer, turn, func() { pl.endHeadTurn(key, since) })
}

// endHeadTurn ends a head turn that ran out of time: the gang yields for as
// long as it held, so the gangs behind it can use the capacity (backfill),
// and it is tried again when the yield ends.
func (pl *Planner) endHeadTurn(key gang.Key, since time.Time) {
	yield, ok := pl.ledger.Head.EndTurn(key, since)
	if !ok {
		return
	}
	pl.reporter.HoldEnded(false)
	pl.logger.V(3).Info("Head hold expired: the gangs behind it may use the capacity", "podGroup", key, "yield", yield)
	if spec, ok := pl.gangs.Spec(key); ok {
		pl.reporter.GangEvent(spec, nil, v1.EventTypeNormal, ReasonHoldExpired,
			"held its places for %s without room for the whole gang; they are released for %s so the gangs queued behind it can run (backfill), then it may hold again",
			yield, yield)
	}
	pl.queue.ActivateBlocked()
	pl.ledger.Timers.After(key, ledger.YieldEndTimer, yield, func() { pl.queue.Activate(key) })
}
