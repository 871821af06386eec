package ledger

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Preemptions are the preemptions this scheduler carried out whose
// preemptor has not bound yet, kept by preemptor (Owner). They keep a
// preemptor from preempting twice for one placement, and other preemptors
// from counting on the room its victims free.
type Preemptions struct {
	clock clock.PassiveClock

	// mu guards byOwner and every record in it. Never held with another
	// lock.
	mu      sync.Mutex
	byOwner map[string]*Preemption
}

// Preemption is one preemption this scheduler carried out, kept until its
// preemptor binds or goes away. Once started, the ledger owns it: its
// caller no longer writes it.
type Preemption struct {
	// Victims are the evicted pods not yet seen gone. While any is left,
	// the preemptor waits for them rather than deciding again, and other
	// preemptors count their room as taken.
	Victims map[types.UID]bool
	// Created is when the preemptor was created, for its time to bound.
	Created time.Time
	// Unbound are the members it preempted for that have not bound yet.
	// The preemptor counts as bound when none is left, or, for a gang,
	// once minMember of its members are bound (a member may be replaced
	// by one of another UID that takes its place).
	Unbound map[types.UID]bool
	// MinMember is the gang's minMember; 0 for a plain pod.
	MinMember int32
	// Until bounds the wait for the victims: past it, a victim that still
	// has not gone (its node is down, its grace period is long) no longer
	// keeps the preemptor from deciding again.
	Until time.Time
}

// NewPreemptions returns an empty record of preemptions that reads time
// from c.
func NewPreemptions(c clock.PassiveClock) *Preemptions {
	return &Preemptions{clock: c, byOwner: map[string]*Preemption{}}
}

// Start records a preemption that was just carried out. A record the
// preemptor had from an earlier placement is replaced.
func (p *Preemptions) Start(owner string, r *Preemption) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.byOwner[owner] = r
}

// AwaitingVictims reports how many of the preemptor's victims have not gone
// yet, if it is still waiting for them.
func (p *Preemptions) AwaitingVictims(owner string) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.byOwner[owner]
	if !ok || len(r.Victims) == 0 || !p.clock.Now().Before(r.Until) {
		return 0, false
	}
	return len(r.Victims), true
}

// Preempting reports whether the preemptor preempted for the placement it
// holds now: its record has not timed out. Until its room shows free in
// the snapshot (the scheduler's cache may trail the informer), a member
// turned away from it waits instead of failing its gang.
func (p *Preemptions) Preempting(owner string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.byOwner[owner]
	return ok && p.clock.Now().Before(r.Until)
}

// PendingVictims returns the victims of every preemption still waiting for
// them. They are gone as far as preemption is concerned: no other
// preemptor may choose them again, and the room they free is counted as
// free (less what their preemptors hold).
func (p *Preemptions) PendingVictims() map[types.UID]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	var out map[types.UID]bool
	for _, r := range p.byOwner {
		if !now.Before(r.Until) {
			continue
		}
		for uid := range r.Victims {
			if out == nil {
				out = map[types.UID]bool{}
			}
			out[uid] = true
		}
	}
	return out
}

// VictimGone notes that a pod left: if it was a victim, its preemptor waits
// for one fewer.
func (p *Preemptions) VictimGone(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.byOwner {
		delete(r.Victims, uid)
	}
}

// MemberBound notes that a member of a preemptor bound. It returns the
// preemptor's creation time, its minMember and whether every member it
// preempted for is bound now; ok is false without a record.
func (p *Preemptions) MemberBound(owner string, uid types.UID) (created time.Time, minMember int32, all, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.byOwner[owner]
	if !ok {
		return time.Time{}, 0, false, false
	}
	delete(r.Unbound, uid)
	return r.Created, r.MinMember, len(r.Unbound) == 0, true
}

// End forgets a preemptor's record: it bound, or went away. It reports
// whether there was one.
func (p *Preemptions) End(owner string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.byOwner[owner]
	delete(p.byOwner, owner)
	return ok
}

func (p *Preemptions) knows(owner string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.byOwner[owner]
	return ok
}
