package coscheduling

import (
	"time"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// The head hold keeps a large gang from being starved by small ones that
// keep taking whatever frees up. The first gang in queue order that would
// fit once running jobs finish, but does not fit the free capacity now,
// holds the free part of its plan and gathers the rest as other pods finish.
// Holding capacity reserves no pod, and only one gang holds this way, so
// holds cannot deadlock.
//
// A hold is bounded so that it cannot stall the cluster:
//   - only a gang that would fit the capacity that can free up holds at all:
//     pods that never leave (services, DaemonSets) are not counted as room;
//   - a turn lasts at most the gang's schedule timeout and is never renewed;
//   - when a turn ends without the gang starting, the gang yields for as long
//     as it held: the gangs queued behind it use the capacity (backfill).
//     Then it may hold again, so it still is not starved;
//   - a gang whose members are all gone holds nothing.
//
// So the longest any hold keeps capacity from others at a stretch is the
// holding gang's schedule timeout (permitWaitingTimeSeconds, 60 s by
// default, when the PodGroup sets none).

// headHold is the capacity the head gang holds while it waits for room.
type headHold struct {
	key   gang.Key
	order queueOrder
	// slots are the free places of a plan for part of the gang.
	slots []slot
	// since and until bound the turn; until is never moved.
	since, until time.Time
}

// liveHead returns the head hold if its turn has not ended. Callers hold
// mu.
func (gs *gangs) liveHead(now time.Time) *headHold {
	if gs.head == nil || !now.Before(gs.head.until) {
		return nil
	}
	return gs.head
}

// takeHead makes key the head gang holding slots, if no live head comes
// before it in queue order and it is not yielding. A gang that is the head
// already keeps its turn's end; only its slots are refreshed, so what freed
// up since joins the hold. It reports whether key holds now, and the start
// of its turn when the turn started with this call.
func (gs *gangs) takeHead(key gang.Key, order queueOrder, slots []slot, turn time.Duration) (holds bool, started time.Time) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	now := gs.clock.Now()
	if g, ok := gs.byKey[key]; ok && now.Before(g.yieldUntil) {
		return false, time.Time{}
	}
	h := gs.liveHead(now)
	if h != nil && h.key == key {
		h.slots = slots
		return true, time.Time{}
	}
	if h != nil && !order.before(h.order) {
		return false, time.Time{}
	}
	gs.get(key) // the gang's timers live in its state
	gs.head = &headHold{key: key, order: order, slots: slots, since: now, until: now.Add(turn)}
	return true, now
}

// endTurn ends key's head turn that started at since, if it is still the
// head, and makes the gang yield for as long as it held. It reports how long
// the gang yields and false if that turn had already ended otherwise (the
// gang started, lost its place to an earlier gang, or went away).
func (gs *gangs) endTurn(key gang.Key, since time.Time) (time.Duration, bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	h := gs.head
	if h == nil || h.key != key || !h.since.Equal(since) {
		return 0, false
	}
	gs.head = nil
	held := h.until.Sub(h.since)
	if g, ok := gs.byKey[key]; ok {
		g.yieldUntil = gs.clock.Now().Add(held)
	}
	return held, true
}

// headOf returns the gang holding as the head, if any.
func (gs *gangs) headOf() (gang.Key, bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if h := gs.liveHead(gs.clock.Now()); h != nil {
		return h.key, true
	}
	return gang.Key{}, false
}
