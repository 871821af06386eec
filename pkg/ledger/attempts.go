package ledger

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// A gang's attempts: each plan starts one (Ledger.HoldPlan), and it ends
// once, in success when quorum is reserved (Ledger.Succeed) or in failure
// (Fail), which may start a backoff. The methods here are Reservations'
// record of how the attempts went.

// Backoff reports whether the gang is backing off, until when and why.
func (c *Reservations) Backoff(key gang.Key) (until time.Time, reason string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, found := c.byKey[key]
	if !found || !c.clock.Now().Before(g.backoffUntil) {
		return time.Time{}, "", false
	}
	return g.backoffUntil, g.lastFailure, true
}

// Fail ends the attempt in flight, if any. A penalized failure (the plan
// did not work out) starts a backoff of base that doubles with each
// consecutive one, up to max; an unpenalized one (a member was deleted, or
// Filter taught the planner something new) lets the gang try again at once.
// It returns the members of the failed attempt that held a reservation, in
// UID order (their waiting pods must be rejected), and the backoff. Their
// reservations end here, not when the rejected pods come back through
// Unreserve: from now on no census counts them and the next attempt plans
// them again. A second call for the same attempt changes nothing and
// returns ok=false.
func (c *Reservations) Fail(key gang.Key, reason string, penalize bool, base, max time.Duration) (members []types.UID, backoff time.Duration, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.get(key)
	if g.plan == nil {
		return nil, 0, false
	}
	failed := g.plan.attempt
	g.plan = nil
	if penalize {
		g.failures++
		backoff = base
		for i := 1; i < g.failures && backoff < max; i++ {
			backoff *= 2
		}
		backoff = min(backoff, max)
	}
	g.backoffUntil = c.clock.Now().Add(backoff)
	g.lastFailure = reason
	for uid, r := range g.reserved {
		if r.Attempt == failed {
			members = append(members, uid)
		}
	}
	sortUIDs(members)
	for _, uid := range members {
		c.unreserveLocked(uid)
	}
	return members, backoff, true
}

// succeed ends the attempt in flight because quorum is reserved, and marks
// the gang admitted. See Ledger.Succeed.
func (c *Reservations) succeed(key gang.Key) (members []types.UID, done *HeldPlan, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.get(key)
	g.admitted = true
	if g.plan == nil {
		return nil, nil, false
	}
	done = g.plan
	g.plan = nil
	g.failures = 0
	for uid := range g.reserved {
		members = append(members, uid)
	}
	sortUIDs(members)
	return members, done, true
}

// Admitted reports whether the gang reached quorum in this scheduler and
// still has a member holding a node.
func (c *Reservations) Admitted(key gang.Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.byKey[key]
	return ok && g.admitted
}

// DropAdmission clears a gang's admission if no member holds a reservation:
// none of its members holds a node any more, so members that appear are a
// new run of the job and gather as a whole again.
func (c *Reservations) DropAdmission(key gang.Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.byKey[key]; ok && len(g.reserved) == 0 {
		g.admitted = false
	}
}

// Remaining is how long the attempt in flight has left before it times out.
func (c *Reservations) Remaining(key gang.Key) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.byKey[key]
	if !ok || g.plan == nil {
		return 0, false
	}
	left := g.plan.deadline.Sub(c.clock.Now())
	if left <= 0 {
		return 0, false
	}
	return left, true
}

// Expired reports whether the attempt in flight has passed its deadline.
func (c *Reservations) Expired(key gang.Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.byKey[key]
	return ok && g.plan != nil && !c.clock.Now().Before(g.plan.deadline)
}

// AdmittedKeys lists the gangs that have run in this scheduler, in key
// order.
func (c *Reservations) AdmittedKeys() []gang.Key {
	c.mu.Lock()
	defer c.mu.Unlock()
	var keys []gang.Key
	for key, g := range c.byKey {
		if g.admitted {
			keys = append(keys, key)
		}
	}
	sortKeys(keys)
	return keys
}
