package ledger

import (
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// Head is the head hold: at most one gang, the first in queue order that
// would fit once running jobs finish, holds its plan's places, the free
// ones and the ones it waits for, while the rest frees up, for one bounded
// turn at a time. See doc.go for why it cannot stall the cluster.
type Head struct {
	clock clock.PassiveClock

	// mu guards turn and yields. Taken after Reservations.mu when both are held
	// (see doc.go).
	mu sync.Mutex
	// turn is the gang holding as the head; nil when none does. A turn
	// that has run out stays here until settle ends it.
	turn *turn
	// yields are, per gang, its last turn that ran out: the gang may not
	// hold again before the yield ends.
	yields map[gang.Key]*yield
}

// turn is the capacity the head gang holds while it waits for room.
type turn struct {
	key   gang.Key
	order QueueOrder
	// slots are the places of the gang's eventual plan: free ones, and
	// waiting ones that running pods still use.
	slots []Slot
	// since and until bound the turn; until is never moved.
	since, until time.Time
}

// yield is what a turn that ran out leaves behind.
type yield struct {
	// turn is when the turn that ran out started; it names the turn.
	turn time.Time
	// held is how long that turn was; the gang yields for as long.
	held time.Duration
	// until is when the gang may hold again.
	until time.Time
	// reported is set once EndTurn has said that the turn ran out.
	reported bool
}

// NewHead returns a head hold that nobody holds, reading time from c.
func NewHead(c clock.PassiveClock) *Head {
	return &Head{clock: c, yields: map[gang.Key]*yield{}}
}

// settle ends a turn that has run out: its gang yields for as long as it
// held, counted from the turn's end, however late anyone notices. Every
// method calls it first, so a turn that ran out is never renewed or
// counted as held, whether the timer that ends it or the next PreFilter
// comes first. Callers hold mu.
func (h *Head) settle(now time.Time) {
	if h.turn != nil && !now.Before(h.turn.until) {
		h.endLocked(h.turn.until)
	}
}

// endLocked ends the current turn at end and makes its gang yield. Callers
// hold mu.
func (h *Head) endLocked(end time.Time) {
	t := h.turn
	held := t.until.Sub(t.since)
	h.yields[t.key] = &yield{turn: t.since, held: held, until: end.Add(held)}
	h.turn = nil
}

// Take makes key the head gang holding slots, if no live head comes before
// it in queue order and it is not yielding. A gang that is the head already
// keeps its turn's end; only its slots are refreshed, so what freed up
// since joins the hold. It reports whether key holds now, and the start of
// its turn when the turn started with this call.
func (h *Head) Take(key gang.Key, order QueueOrder, slots []Slot, length time.Duration) (holds bool, started time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock.Now()
	h.settle(now)
	if y, ok := h.yields[key]; ok && now.Before(y.until) {
		return false, time.Time{}
	}
	if h.turn != nil && h.turn.key == key {
		h.turn.slots = slots
		return true, time.Time{}
	}
	if h.turn != nil && !order.Before(h.turn.order) {
		return false, time.Time{}
	}
	h.turn = &turn{key: key, order: order, slots: slots, since: now, until: now.Add(length)}
	return true, now
}

// EndTurn ends key's head turn that started at since, and reports how long
// the gang yields: for as long as it held. The timer that a turn starts
// calls it when the turn's time is up; a turn that ran out is reported once,
// whether or not something noticed it first. It returns false if that turn
// ended otherwise (the gang started, lost its place to an earlier gang, or
// went away) or was reported already.
func (h *Head) EndTurn(key gang.Key, since time.Time) (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock.Now()
	h.settle(now)
	if t := h.turn; t != nil && t.key == key && t.since.Equal(since) {
		h.endLocked(now) // called before the turn ran out: it ends now
	}
	y, ok := h.yields[key]
	if !ok || y.reported || !y.turn.Equal(since) {
		return 0, false
	}
	y.reported = true
	return y.held, true
}

// Holder returns the gang holding as the head, if any.
func (h *Head) Holder() (gang.Key, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.settle(h.clock.Now())
	if h.turn == nil {
		return gang.Key{}, false
	}
	return h.turn.key, true
}

// Clear ends key's turn if it holds: none of its members is left to use it.
// A turn that had run out still makes the gang yield.
func (h *Head) Clear(key gang.Key) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropLocked(key, h.clock.Now())
}

// dropLocked ends key's turn without a yield if it holds, and reports
// whether it did. Callers hold mu.
func (h *Head) dropLocked(key gang.Key, now time.Time) bool {
	h.settle(now)
	if h.turn == nil || h.turn.key != key {
		return false
	}
	h.turn = nil
	return true
}

// addHeldLocked adds to held, per node, what the head gang holds from a pod
// of gang self at queue position order: nothing if self is the head or
// comes before it. Callers hold mu.
func (h *Head) addHeldLocked(held map[string]capacity.Amounts, self gang.Key, order QueueOrder, now time.Time) {
	h.settle(now)
	if t := h.turn; t != nil && t.key != self && !order.Before(t.order) {
		addSlots(held, t.slots)
	}
}

// forget drops what is known of key: its turn and its yield.
func (h *Head) forget(key gang.Key) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.turn != nil && h.turn.key == key {
		h.turn = nil
	}
	delete(h.yields, key)
}

// knows reports whether key holds or yields.
func (h *Head) knows(key gang.Key) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.yields[key]
	return ok || (h.turn != nil && h.turn.key == key)
}
