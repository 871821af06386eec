package ledger

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Ledger is the scheduler's memory of gangs, one part per job. Callers use
// a part directly for what concerns it alone; the Ledger's own methods are
// the operations that span parts, and they take the parts' locks in the
// order doc.go gives.
type Ledger struct {
	// Reservations are the reservations and the capacity plans hold, with the
	// gangs' attempts and backoffs.
	Reservations *Reservations
	// Head is the head hold.
	Head *Head
	// Lessons are what Filter rejections taught about plans.
	Lessons *Lessons
	// Preemptions are the preemptions whose preemptors have not bound.
	Preemptions *Preemptions
	// Gate holds back members of gangs without quorum.
	Gate *Gate
	// Blocked are pods held capacity turned away.
	Blocked *Blocked
	// Timers are the gangs' pending callbacks.
	Timers *Timers
}

// New returns an empty ledger on clock c.
func New(c clock.WithTickerAndDelayedExecution) *Ledger {
	return &Ledger{
		Reservations: NewReservations(c),
		Head:         NewHead(c),
		Lessons:      NewLessons(c),
		Preemptions:  NewPreemptions(c),
		Gate:         NewGate(),
		Blocked:      NewBlocked(),
		Timers:       NewTimers(c),
	}
}

// HeldByOthers sums, per node, the capacity that gangs other than self hold
// from a pod at queue position order: their live held plans, and the head
// gang's hold unless the pod comes before the head in queue order. It is nil
// when nothing is held. It reads held plans and head in one step, so a gang
// whose plan replaces its head hold (HoldPlan) is never seen holding
// neither.
func (l *Ledger) HeldByOthers(self gang.Key, order QueueOrder) map[string]capacity.Amounts {
	held := map[string]capacity.Amounts{}
	l.reservationsAndHead(func(now time.Time) {
		l.Reservations.addHeldLocked(held, self, now)
		l.Head.addHeldLocked(held, self, order, now)
	})
	if len(held) == 0 {
		return nil
	}
	return held
}

// reservationsAndHead runs f with the reservations' and the head's locks
// held, in the order doc.go gives, at the reservations' clock's now.
func (l *Ledger) reservationsAndHead(f func(now time.Time)) {
	l.Reservations.mu.Lock()
	defer l.Reservations.mu.Unlock()
	l.Head.mu.Lock()
	defer l.Head.mu.Unlock()
	f(l.Reservations.clock.Now())
}

// Held sums what every live held plan and the head hold keep from other pods
// with no pod of theirs reserved on it yet: a held plan's slots are its members
// still to reserve, and the head hold's its free places (not the places it
// waits for, which running pods still use). Members already reserved wait
// in Permit and are the scheduler's own to count. It reads both parts in
// one step, as HeldByOthers does.
func (l *Ledger) Held() capacity.Amounts {
	held := map[string]capacity.Amounts{}
	l.reservationsAndHead(func(now time.Time) {
		l.Reservations.addHeldLocked(held, gang.Key{}, now)
		l.Head.settle(now)
		if t := l.Head.turn; t != nil {
			for _, s := range t.slots {
				if !s.Waiting {
					addSlot(held, s)
				}
			}
		}
	})
	total := capacity.Amounts{}
	for _, a := range held {
		total.Add(a)
	}
	return total
}

// HoldPlan starts a new attempt of the gang holding slots until deadline,
// for plan (whose fingerprint is fp). It reports whether the gang held as
// the head until now: its whole plan now holds what the head hold did.
func (l *Ledger) HoldPlan(key gang.Key, slots []Slot, deadline time.Time, plan *placement.Plan, fp uint64) (wasHead bool) {
	l.Reservations.mu.Lock()
	defer l.Reservations.mu.Unlock()
	l.Head.mu.Lock()
	defer l.Head.mu.Unlock()
	l.Reservations.startLocked(key, slots, deadline, plan, fp)
	return l.Head.dropLocked(key, l.Head.clock.Now())
}

// HoldMoved starts a new attempt of a running gang whose pods are being
// evicted so that they run elsewhere: slots hold their new places until
// deadline, for plan (whose fingerprint is fp), and the hold outlives the
// gang's having no member at all (Idle), so that the pods its controller
// recreates take those places.
func (l *Ledger) HoldMoved(key gang.Key, slots []Slot, deadline time.Time, plan *placement.Plan, fp uint64) {
	l.Reservations.mu.Lock()
	defer l.Reservations.mu.Unlock()
	l.Reservations.startLocked(key, slots, deadline, plan, fp)
	l.Reservations.byKey[key].plan.forRecreated = true
}

// FailPlan remembers that the plan of the attempt in flight failed under
// Filter, so that it is never tried again.
func (l *Ledger) FailPlan(key gang.Key) {
	if fp, ok := l.Reservations.Fingerprint(key); ok {
		l.Lessons.LearnFailedPlan(key, fp)
	}
}

// Succeed ends the attempt in flight because quorum is reserved, marks the
// gang admitted and forgets its lessons. It returns the reserved members to
// allow, in UID order, and the ended held plan (for its summary and spans), and
// ok=false if no attempt was in flight.
func (l *Ledger) Succeed(key gang.Key) (members []types.UID, done *HeldPlan, ok bool) {
	members, done, ok = l.Reservations.succeed(key)
	l.Lessons.forget(key)
	return members, done, ok
}

// ForgetPod drops a deleted member's reservation, under whatever unit it
// was made (unit; key, the unit the pod belongs to now, if none), and stops
// holding it back. inFlight is true when the member was reserved in the
// unit's attempt in flight, or holds a slot of it that no other member may
// take: the attempt cannot complete as planned.
func (l *Ledger) ForgetPod(key gang.Key, uid types.UID) (unit gang.Key, inFlight bool) {
	unit, inFlight = l.Reservations.drop(key, uid)
	l.Gate.drop(key, uid)
	return unit, inFlight
}

// Holders lists, in key order, the units that hold something for any of
// the pods uids names: a reservation, a slot of a live held plan, or a place
// of the head hold. A unit whose hierarchy loses those pods (a composite
// above their PodGroup deleted) holds them under a tree that no longer
// exists, and its callers end what it holds.
func (l *Ledger) Holders(uids []types.UID) []gang.Key {
	set := make(map[types.UID]bool, len(uids))
	for _, uid := range uids {
		set[uid] = true
	}
	into := map[gang.Key]bool{}
	l.reservationsAndHead(func(now time.Time) {
		l.Reservations.holdersLocked(set, into, now)
		l.Head.settle(now)
		if t := l.Head.turn; t != nil && slicesContainsUID(t.slots, set) {
			into[t.key] = true
		}
	})
	keys := make([]gang.Key, 0, len(into))
	for k := range into {
		keys = append(keys, k)
	}
	sortKeys(keys)
	return keys
}

// slicesContainsUID reports whether a slot is designated to a pod of uids.
func slicesContainsUID(slots []Slot, uids map[types.UID]bool) bool {
	for _, s := range slots {
		if uids[s.UID] {
			return true
		}
	}
	return false
}

// Idle forgets what a gang none of whose members waits for a node holds:
// its head turn, and, once no member holds a reservation either, its held plan,
// its admission, its lessons and its preemption record. Its backoff and any
// yield are kept, so a gang whose members are recreated at once does not
// retry in a hot loop or hold again at once; they go when the PodGroup does
// (ForgetGang).
func (l *Ledger) Idle(key gang.Key) {
	if l.Reservations.idle(key) {
		l.Lessons.forget(key)
		l.Preemptions.End(GangOwner(key))
	}
	l.Head.Clear(key)
}

// ForgetGang drops all that is known of a gang whose PodGroup was deleted
// and stops its timers. Held-back members stay held: they wait for the
// PodGroup to come back.
func (l *Ledger) ForgetGang(key gang.Key) {
	l.Timers.forget(key)
	l.Reservations.forget(key)
	l.Lessons.forget(key)
	l.Gate.forget(key)
	l.Preemptions.End(GangOwner(key))
	l.Head.forget(key)
}

// Knows reports whether any part of the ledger keeps something of the gang
// other than held-back members: what ForgetGang drops.
func (l *Ledger) Knows(key gang.Key) bool {
	return l.Reservations.knows(key) || l.Head.knows(key) || l.Lessons.knows(key) || l.Gate.knows(key) ||
		l.Timers.knows(key) || l.Preemptions.knows(GangOwner(key))
}

// Waiting counts the gangs whose members are held until quorum exists,
// gangs with an attempt in flight, and the members those attempts reserved
// (they wait in Permit for the rest of their gang).
func (l *Ledger) Waiting() (members, placing, reserved int) {
	placing, reserved = l.Reservations.Placing()
	return l.Gate.Gangs(), placing, reserved
}
