package ledger

import (
	"slices"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Reservations are what this scheduler promised each gang: the members it
// reserved a node for, the capacity a plan holds for the members still to
// reserve, and how the gang's attempts went (their count, the backoff after
// failed ones, whether the gang reached quorum). They are the ledger's
// promises, not DRA ResourceClaims.
type Reservations struct {
	clock clock.PassiveClock

	// mu guards byKey, every gangReservations in it, and unitOf. Held before
	// Head.mu when both are held (see doc.go).
	mu    sync.Mutex
	byKey map[gang.Key]*gangReservations
	// unitOf is, per reserved member, the unit it reserved under: the key
	// whose gangReservations.reserved holds it. It is the one record of where a
	// reservation counts. The unit a pod belongs to can change under a
	// reservation (a CompositePodGroup above its PodGroup deleted or
	// re-created), and the reservation must still be found, by the pod's
	// UID, to be given back.
	unitOf map[types.UID]gang.Key
}

// gangReservations is what the scheduler promised one gang. Guarded by
// Reservations.mu.
type gangReservations struct {
	// admitted is set when the gang reached quorum in this scheduler. A
	// running gang's members that reappear schedule one by one. It is
	// cleared when no member holds a node any more.
	admitted bool
	// attempt counts the plans made for this gang. A reservation remembers
	// its attempt, so news about an abandoned attempt changes nothing.
	attempt int
	// reserved holds members this scheduler reserved a node for (assumed,
	// waiting in Permit, binding or bound) and that still exist.
	reserved map[types.UID]Reservation
	// plan holds capacity for the members of the current attempt that have
	// not reserved yet. Nil when no attempt is in flight.
	plan *HeldPlan
	// failures counts consecutive failed attempts; it sets the backoff.
	failures     int
	backoffUntil time.Time
	lastFailure  string
}

// Reservation is a node this scheduler reserved for a member.
type Reservation struct {
	// Node is the reserved node.
	Node string
	// Attempt is the gang's attempt the member reserved in.
	Attempt int
	// Request is what the member takes from the node.
	Request capacity.Amounts
}

// HeldPlan is one attempt's plan as the ledger holds it: the slots it holds
// for the members still to reserve, until the attempt's deadline.
type HeldPlan struct {
	// Summary and Spans describe the plan, for people and metrics.
	Summary string
	Spans   []placement.Span

	attempt  int
	deadline time.Time
	// slots are the planned places not yet taken, one per member.
	slots []Slot
	// fingerprint identifies the plan, for lessons.
	fingerprint uint64
	// designated is set when each slot goes to the member it was planned
	// for alone (see interchangeable).
	designated bool
	// forRecreated marks the plan of a gang whose pods were evicted to be
	// recreated elsewhere (HoldMoved): it outlives the gang's having no
	// member, until its deadline, so that the recreated pods find it.
	forRecreated bool
}

// Slot is one member's planned place. It is designated to the member the
// plan put there, so that ranks land where the plan wants them; a member the
// plan did not name (a recreated pod, say) takes any slot its request fits.
type Slot struct {
	// UID is the member the plan put here.
	UID types.UID
	// Node is the planned node.
	Node string
	// Request is what the slot holds on the node.
	Request capacity.Amounts
	// Waiting marks a place of the head hold that is not free yet: pods
	// the plan expects to finish still use it. It is held from the gangs
	// queued behind all the same, so that what frees up there stays the
	// head's whichever gang the scheduler tries first; it is not idle, so
	// Held does not count it. Held plans never have waiting slots: their
	// plans fit the free capacity.
	Waiting bool
}

// NewReservations returns empty reservations that read time from c.
func NewReservations(c clock.PassiveClock) *Reservations {
	return &Reservations{clock: c, byKey: map[gang.Key]*gangReservations{}, unitOf: map[types.UID]gang.Key{}}
}

// unreserveLocked forgets uid's reservation, wherever it was made, and
// returns the unit it was made under and the reservation. Callers hold mu.
func (c *Reservations) unreserveLocked(uid types.UID) (unit gang.Key, r Reservation, had bool) {
	unit, had = c.unitOf[uid]
	if !had {
		return unit, r, false
	}
	delete(c.unitOf, uid)
	if g, ok := c.byKey[unit]; ok {
		r, had = g.reserved[uid]
		delete(g.reserved, uid)
	}
	return unit, r, had
}

// get returns the gang's record, creating it. Callers hold mu.
func (c *Reservations) get(key gang.Key) *gangReservations {
	g, ok := c.byKey[key]
	if !ok {
		g = &gangReservations{reserved: map[types.UID]Reservation{}}
		c.byKey[key] = g
	}
	return g
}

// livePlan returns the gang's held plan if it has one that has not expired.
func (g *gangReservations) livePlan(now time.Time) *HeldPlan {
	if g.plan == nil || !now.Before(g.plan.deadline) {
		return nil
	}
	return g.plan
}

// addHeldLocked adds to held, per node, what the live held plans of gangs other
// than self hold. Callers hold mu.
func (c *Reservations) addHeldLocked(held map[string]capacity.Amounts, self gang.Key, now time.Time) {
	for key, g := range c.byKey {
		if hp := g.livePlan(now); key != self && hp != nil {
			addSlots(held, hp.slots)
		}
	}
}

// startLocked starts a new attempt holding slots until deadline. Callers
// hold mu.
func (c *Reservations) startLocked(key gang.Key, slots []Slot, deadline time.Time, plan *placement.Plan, fp uint64) {
	g := c.get(key)
	g.attempt++
	g.plan = &HeldPlan{attempt: g.attempt, deadline: deadline, slots: slots, Summary: plan.Summary, Spans: plan.Spans, fingerprint: fp,
		designated: !interchangeable(key, plan)}
}

// PlanSlots returns the nodes a member may take in the gang's live held plan:
// the node of the slot designated to it if there is one, else (where
// members are interchangeable) the nodes of every slot its request fits,
// in name order. ok is false when no held plan is live.
func (c *Reservations) PlanSlots(key gang.Key, uid types.UID, req capacity.Amounts) (nodes []string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, found := c.byKey[key]
	if !found {
		return nil, false
	}
	hp := g.livePlan(c.clock.Now())
	if hp == nil {
		return nil, false
	}
	for _, s := range hp.slots {
		if s.UID == uid {
			return []string{s.Node}, true
		}
	}
	if hp.designated {
		return nil, true
	}
	seen := map[string]bool{}
	for _, s := range hp.slots {
		if !seen[s.Node] && req.FitsIn(s.Request) {
			seen[s.Node] = true
			nodes = append(nodes, s.Node)
		}
	}
	sort.Strings(nodes)
	return nodes, true
}

// Fingerprint returns the fingerprint of the plan of the attempt in flight.
func (c *Reservations) Fingerprint(key gang.Key) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.byKey[key]
	if !ok || g.plan == nil {
		return 0, false
	}
	return g.plan.fingerprint, true
}

// Reserve records that a member reserved node and takes a slot of the
// gang's held plan: the one designated to it, else one on that node that it
// fits, else the first it fits anywhere, so the held plan never holds more than
// the members still to come.
func (c *Reservations) Reserve(key gang.Key, uid types.UID, node string, req capacity.Amounts) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.unitOf[uid]; ok && prev != key {
		// The member counts under one unit at a time.
		c.unreserveLocked(uid)
	}
	g := c.get(key)
	g.reserved[uid] = Reservation{Node: node, Attempt: g.attempt, Request: req}
	c.unitOf[uid] = key
	hp := g.livePlan(c.clock.Now())
	if hp == nil {
		return
	}
	if i := pickSlot(hp.slots, uid, node, req, !hp.designated); i >= 0 {
		hp.slots = append(hp.slots[:i], hp.slots[i+1:]...)
	}
}

// interchangeable reports whether, in plan, a member of key's unit may take
// a slot planned for another member that its request fits. The members of
// a flat gang are alike. Those of a plan with a hierarchy are not: each
// sits in its own subgroup (a segment of ranks, a child PodGroup, members
// sharing a claim), whose domain the plan chose for it, and a member outside
// the attempt that took a planned member's slot would put the wrong ranks
// in that domain and leave the planned member no place: a composite child
// planned short waits until it times out (minGroupCount below the number of
// children, all gathered at once); an elastic segmented gang starts with
// segments that are not the job's, and its members that come later find
// their segment's domain full. There a slot goes to the member it was
// planned for alone. A composite's plan is never flat, but its unit says so
// even for a planner that reports no subgroups (gang.InterchangeableMembers).
func interchangeable(key gang.Key, plan *placement.Plan) bool {
	return gang.InterchangeableMembers(key) && len(plan.Subgroups) == 0
}

// pickSlot returns the index of the slot a reserving member takes, or -1:
// its own, else (when members are interchangeable) one it fits.
func pickSlot(slots []Slot, uid types.UID, node string, req capacity.Amounts, interchangeable bool) int {
	onNode, anywhere := -1, -1
	for i, s := range slots {
		if s.UID == uid {
			return i
		}
		if !interchangeable || !req.FitsIn(s.Request) {
			continue
		}
		if onNode < 0 && s.Node == node {
			onNode = i
		}
		if anywhere < 0 {
			anywhere = i
		}
	}
	if onNode >= 0 {
		return onNode
	}
	return anywhere
}

// Unreserve forgets a member's reservation, found by its UID under the
// unit it was made under (unit), whatever unit the pod would belong to now.
// inFlight is true when the member belonged to the unit's attempt in
// flight: the unit then fails as a whole. released is true when it belonged
// to an attempt that had already reached quorum: the member failed to bind
// after its gang was let go. Neither is set for a pod without a
// reservation.
func (c *Reservations) Unreserve(uid types.UID) (unit gang.Key, inFlight, released bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	unit, r, had := c.unreserveLocked(uid)
	if !had {
		return unit, false, false
	}
	g := c.byKey[unit]
	inFlight = g.plan != nil && g.plan.attempt == r.Attempt
	return unit, inFlight, !inFlight && g.admitted
}

// ReservedUnder returns the unit a member's reservation counts under, if it
// has one.
func (c *Reservations) ReservedUnder(uid types.UID) (gang.Key, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	unit, ok := c.unitOf[uid]
	return unit, ok
}

// ReservedBy returns a copy of the gang's reservations by member UID.
func (c *Reservations) ReservedBy(key gang.Key) map[types.UID]Reservation {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.byKey[key]
	if !ok {
		return nil
	}
	out := make(map[types.UID]Reservation, len(g.reserved))
	for uid, r := range g.reserved {
		out[uid] = r
	}
	return out
}

// ReservedUIDs lists the gang's reserved members in UID order.
func (c *Reservations) ReservedUIDs(key gang.Key) []types.UID {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.byKey[key]
	if !ok {
		return nil
	}
	uids := make([]types.UID, 0, len(g.reserved))
	for uid := range g.reserved {
		uids = append(uids, uid)
	}
	sortUIDs(uids)
	return uids
}

// Placing counts the gangs with an attempt in flight, and the members those
// attempts reserved (they wait in Permit for the rest of their gang).
func (c *Reservations) Placing() (placing, reserved int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	for _, g := range c.byKey {
		hp := g.livePlan(now)
		if hp == nil {
			continue
		}
		placing++
		for _, r := range g.reserved {
			if r.Attempt == hp.attempt {
				reserved++
			}
		}
	}
	return placing, reserved
}

// InFlightOn lists, in key order, the gangs whose attempt in flight has a
// member reserved on node.
func (c *Reservations) InFlightOn(node string) []gang.Key {
	c.mu.Lock()
	defer c.mu.Unlock()
	var keys []gang.Key
	for key, g := range c.byKey {
		if g.plan == nil {
			continue
		}
		for _, r := range g.reserved {
			if r.Node == node && r.Attempt == g.plan.attempt {
				keys = append(keys, key)
				break
			}
		}
	}
	sortKeys(keys)
	return keys
}

// InFlightNodes lists, in name order, the nodes reserved by members of the
// gang's attempt in flight.
func (c *Reservations) InFlightNodes(key gang.Key) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.byKey[key]
	if !ok || g.plan == nil {
		return nil
	}
	seen := map[string]bool{}
	var nodes []string
	for _, r := range g.reserved {
		if r.Attempt == g.plan.attempt && !seen[r.Node] {
			seen[r.Node] = true
			nodes = append(nodes, r.Node)
		}
	}
	sort.Strings(nodes)
	return nodes
}

// drop forgets a deleted member's reservation, found by its UID, and
// returns the unit it counted under (key, the unit the pod belongs to now,
// if it had none). inFlight is true when the member was reserved in that
// unit's attempt in flight, or the attempt's plan designated a slot to it
// alone that it had not taken yet.
func (c *Reservations) drop(key gang.Key, uid types.UID) (unit gang.Key, inFlight bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	unit = key
	if u, r, had := c.unreserveLocked(uid); had {
		g := c.byKey[u]
		unit, inFlight = u, g.plan != nil && g.plan.attempt == r.Attempt
	}
	g, ok := c.byKey[unit]
	if !ok {
		return unit, inFlight
	}
	if hp := g.livePlan(c.clock.Now()); hp != nil && hp.designated && slices.ContainsFunc(hp.slots, func(s Slot) bool { return s.UID == uid }) {
		// No other member may take its slot: the attempt cannot complete
		// as planned, and plans again with the member that replaces it.
		inFlight = true
	}
	return unit, inFlight
}

// holdersLocked adds to into the units that hold something for a pod of
// uids: a reservation, or a slot of their live held plan. Callers hold mu.
func (c *Reservations) holdersLocked(uids map[types.UID]bool, into map[gang.Key]bool, now time.Time) {
	for uid := range uids {
		if unit, ok := c.unitOf[uid]; ok {
			into[unit] = true
		}
	}
	for key, g := range c.byKey {
		if hp := g.livePlan(now); hp != nil && slices.ContainsFunc(hp.slots, func(s Slot) bool { return uids[s.UID] }) {
			into[key] = true
		}
	}
}

// idle ends the held plan and the admission of a gang that has no reservation
// left, keeping its backoff. It reports whether the gang has none.
func (c *Reservations) idle(key gang.Key) (unreserved bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.byKey[key]
	if !ok {
		return true
	}
	if len(g.reserved) > 0 {
		return false
	}
	if hp := g.livePlan(c.clock.Now()); hp == nil || !hp.forRecreated {
		g.plan = nil
	}
	g.admitted = false
	return true
}

// forget drops all the gang's reservations and its held plan, backoff
// included.
func (c *Reservations) forget(key gang.Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.byKey[key]; ok {
		for uid := range g.reserved {
			delete(c.unitOf, uid)
		}
	}
	delete(c.byKey, key)
}

// knows reports whether the gang has a record.
func (c *Reservations) knows(key gang.Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.byKey[key]
	return ok
}

// addSlots adds what slots hold to held, per node.
func addSlots(held map[string]capacity.Amounts, slots []Slot) {
	for _, s := range slots {
		addSlot(held, s)
	}
}

// addSlot adds, per node, what one slot holds to held.
func addSlot(held map[string]capacity.Amounts, s Slot) {
	if held[s.Node] == nil {
		held[s.Node] = capacity.Amounts{}
	}
	held[s.Node].Add(s.Request)
}

func sortUIDs(uids []types.UID) {
	sort.Slice(uids, func(i, j int) bool { return uids[i] < uids[j] })
}

func sortKeys(keys []gang.Key) {
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
}
