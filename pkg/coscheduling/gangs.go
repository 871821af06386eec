package coscheduling

import (
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// gangs is the plugin's memory of gangs in flight. The API objects (PodGroups,
// pods) say what a gang is; gangs says what this scheduler has promised it:
// which members it reserved, and which capacity it holds for the rest.
//
// The capacity hold is what keeps gangs from deadlocking. A gang's members
// reserve nodes only after a plan for the whole gang was found in free
// capacity, and the not-yet-reserved part of that plan is held: other gangs
// plan around it and other pods do not fit into it. So a gang that holds
// anything can always complete, and a gang that cannot complete holds nothing.
type gangs struct {
	clock clock.PassiveClock

	mu    sync.Mutex
	byKey map[gangKey]*gang
	// gated holds, per gang, the members PreEnqueue is holding back. They
	// are released when what they wait for arrives: kube-scheduler 1.37
	// runs queueing hints for new unscheduled pods only with the
	// GenericWorkload gate on, so the plugin cannot rely on hints for it.
	gated map[gangKey]map[types.UID]*v1.Pod
	// releases counts ungate calls per gang, so that a PreEnqueue that
	// raced with a release can tell it missed one.
	releases map[gangKey]uint64
	// head is the one gang that may hold capacity without a plan for all
	// of its members: the first, in queue order, of the gangs that would
	// fit the cluster but not its free capacity. It holds the free part of
	// a plan and gains the rest as other pods finish, so a large gang is
	// not starved by small ones that keep taking what frees up. Holding
	// capacity reserves no pod, and only one gang holds partially, so
	// holds cannot deadlock. Nil when no gang is starved of room.
	head *headHold
}

// headHold is the capacity the head gang holds while it waits for room.
type headHold struct {
	key   gangKey
	order queueRank
	// slots are the free places of a plan for part of the gang.
	slots   []slot
	expires time.Time
}

// queueRank orders gangs as QueueSort does: higher priority first, then
// older, then by key.
type queueRank struct {
	priority int32
	created  time.Time
	key      string
}

func (a queueRank) before(b queueRank) bool {
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	if !a.created.Equal(b.created) {
		return a.created.Before(b.created)
	}
	return a.key < b.key
}

// holdForHead makes key the head gang holding slots until expires, if no
// gang is head or key comes before the current head in queue order (or is
// it). It returns whether key is now the head.
func (gs *gangs) holdForHead(key gangKey, order queueRank, slots []slot, expires time.Time) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	h := gs.head
	if h != nil && h.key != key && gs.clock.Now().Before(h.expires) && !order.before(h.order) {
		return false
	}
	gs.head = &headHold{key: key, order: order, slots: slots, expires: expires}
	return true
}

// dropHead ends key's partial hold, if it has one.
func (gs *gangs) dropHead(key gangKey) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.head != nil && gs.head.key == key {
		gs.head = nil
	}
}

// gang is the in-flight state of one gang. Guarded by gangs.mu.
type gang struct {
	// attempt counts the plans made for this gang. A reservation remembers
	// its attempt, so news about an abandoned attempt changes nothing.
	attempt int
	// reserved holds members this scheduler reserved a node for (assumed,
	// waiting in Permit, binding or bound) and that still exist.
	reserved map[types.UID]reservation
	// claim holds capacity for the members of the current attempt that have
	// not reserved yet. Nil when no attempt is in flight.
	claim *claim
	// failures counts consecutive failed attempts; it sets the backoff.
	failures     int
	backoffUntil time.Time
	lastFailure  string
}

type reservation struct {
	node    string
	attempt int
}

// claim is the capacity a plan holds for the members still to reserve.
type claim struct {
	attempt  int
	deadline time.Time
	// slots are the planned places not yet taken, one per member.
	slots   []slot
	summary string
	spans   []placement.Span
}

// slot is one member's planned place. It is designated to the member the
// plan put there, so that ranks land where the plan wants them; a member the
// plan did not name (a recreated pod, say) takes any slot its request fits.
type slot struct {
	uid  types.UID
	node string
	req  amounts
}

func newGangs(c clock.PassiveClock) *gangs {
	return &gangs{clock: c, byKey: map[gangKey]*gang{}, gated: map[gangKey]map[types.UID]*v1.Pod{}, releases: map[gangKey]uint64{}}
}

func (gs *gangs) get(key gangKey) *gang {
	g, ok := gs.byKey[key]
	if !ok {
		g = &gang{reserved: map[types.UID]reservation{}}
		gs.byKey[key] = g
	}
	return g
}

// liveClaim returns the gang's claim if it has one that has not expired.
func (g *gang) liveClaim(now time.Time) *claim {
	if g.claim == nil || !now.Before(g.claim.deadline) {
		return nil
	}
	return g.claim
}

// heldByOthers sums, per node, the capacity that gangs other than self hold
// from a pod of queue rank rank: their live claims, and the head gang's
// partial hold unless the pod comes before the head in queue order.
func (gs *gangs) heldByOthers(self gangKey, rank queueRank) map[string]amounts {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	now := gs.clock.Now()
	held := map[string]amounts{}
	add := func(slots []slot) {
		for _, s := range slots {
			if held[s.node] == nil {
				held[s.node] = amounts{}
			}
			held[s.node].add(s.req)
		}
	}
	for key, g := range gs.byKey {
		if c := g.liveClaim(now); key != self && c != nil {
			add(c.slots)
		}
	}
	if h := gs.head; h != nil && h.key != self && now.Before(h.expires) && !rank.before(h.order) {
		add(h.slots)
	}
	if len(held) == 0 {
		return nil
	}
	return held
}

// planSlots returns the nodes a member may take in the gang's live claim:
// the node of the slot designated to it if there is one, else the nodes of
// every slot its request fits. ok is false when no claim is live.
func (gs *gangs) planSlots(key gangKey, uid types.UID, req amounts) (nodes []string, ok bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g, found := gs.byKey[key]
	if !found {
		return nil, false
	}
	c := g.liveClaim(gs.clock.Now())
	if c == nil {
		return nil, false
	}
	for _, s := range c.slots {
		if s.uid == uid {
			return []string{s.node}, true
		}
	}
	seen := map[string]bool{}
	for _, s := range c.slots {
		if !seen[s.node] && fitsSlot(req, s.req) {
			seen[s.node] = true
			nodes = append(nodes, s.node)
		}
	}
	sort.Strings(nodes)
	return nodes, true
}

// setClaim starts a new attempt holding slots until deadline.
func (gs *gangs) setClaim(key gangKey, slots []slot, deadline time.Time, plan *placement.Plan) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.get(key)
	g.attempt++
	g.claim = &claim{attempt: g.attempt, deadline: deadline, slots: slots, summary: plan.Summary, spans: plan.Spans}
	if gs.head != nil && gs.head.key == key {
		gs.head = nil // the whole plan now holds what the partial hold did
	}
}

// backoff reports whether the gang is backing off, until when and why.
func (gs *gangs) backoff(key gangKey) (until time.Time, reason string, ok bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g, found := gs.byKey[key]
	if !found || !gs.clock.Now().Before(g.backoffUntil) {
		return time.Time{}, "", false
	}
	return g.backoffUntil, g.lastFailure, true
}

// reserve records that pod reserved node and takes a slot of the gang's
// claim: the one designated to it, else one on that node that it fits, else
// the first it fits anywhere, so the claim never holds more than the members
// still to come.
func (gs *gangs) reserve(key gangKey, uid types.UID, node string, req amounts) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.get(key)
	g.reserved[uid] = reservation{node: node, attempt: g.attempt}
	c := g.liveClaim(gs.clock.Now())
	if c == nil {
		return
	}
	if i := pickSlot(c.slots, uid, node, req); i >= 0 {
		c.slots = append(c.slots[:i], c.slots[i+1:]...)
	}
}

// pickSlot returns the index of the slot a reserving member takes, or -1.
func pickSlot(slots []slot, uid types.UID, node string, req amounts) int {
	onNode, anywhere := -1, -1
	for i, s := range slots {
		if s.uid == uid {
			return i
		}
		if !fitsSlot(req, s.req) {
			continue
		}
		if onNode < 0 && s.node == node {
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

// unreserve forgets a reservation. It returns true when the pod belonged to
// the gang's attempt in flight: the gang then fails as a whole.
func (gs *gangs) unreserve(key gangKey, uid types.UID) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g, found := gs.byKey[key]
	if !found {
		return false
	}
	r, had := g.reserved[uid]
	delete(g.reserved, uid)
	return had && g.claim != nil && g.claim.attempt == r.attempt
}

// fail ends the attempt in flight, if any, and starts a backoff. It returns
// the members of the failed attempt that still hold a reservation (their
// waiting pods must be rejected) and the backoff. A second call for the same
// attempt changes nothing and returns ok=false.
func (gs *gangs) fail(key gangKey, reason string, base, max time.Duration) (members []types.UID, backoff time.Duration, ok bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.get(key)
	if g.claim == nil {
		return nil, 0, false
	}
	failed := g.claim.attempt
	g.claim = nil
	g.failures++
	backoff = base
	for i := 1; i < g.failures && backoff < max; i++ {
		backoff *= 2
	}
	if backoff > max {
		backoff = max
	}
	g.backoffUntil = gs.clock.Now().Add(backoff)
	g.lastFailure = reason
	for uid, r := range g.reserved {
		if r.attempt == failed {
			members = append(members, uid)
		}
	}
	sort.Slice(members, func(i, j int) bool { return members[i] < members[j] })
	return members, backoff, true
}

// succeed ends the attempt in flight because quorum is reserved. It returns
// the reserved members to allow and the ended claim (for its summary and
// spans), and ok=false if no attempt was in flight.
func (gs *gangs) succeed(key gangKey) (members []types.UID, done *claim, ok bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.get(key)
	if g.claim == nil {
		return nil, nil, false
	}
	done = g.claim
	g.claim = nil
	g.failures = 0
	for uid := range g.reserved {
		members = append(members, uid)
	}
	sort.Slice(members, func(i, j int) bool { return members[i] < members[j] })
	return members, done, true
}

// split counts the members that have a node, reserved by this scheduler or
// bound according to the informer (which also covers binds from before a
// restart), each once, and returns the others, which still need one.
func (gs *gangs) split(key gangKey, members []*v1.Pod) (assigned int, pending []*v1.Pod) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	var reserved map[types.UID]reservation
	if g, ok := gs.byKey[key]; ok {
		reserved = g.reserved
	}
	for _, p := range members {
		if _, ok := reserved[p.UID]; ok || p.Spec.NodeName != "" {
			assigned++
		} else {
			pending = append(pending, p)
		}
	}
	// Reserved pods the informer no longer lists (deleted, not yet
	// forgotten) do not count.
	return assigned, pending
}

// remaining is how long the attempt in flight has left before it times out.
func (gs *gangs) remaining(key gangKey) (time.Duration, bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g, ok := gs.byKey[key]
	if !ok || g.claim == nil {
		return 0, false
	}
	left := g.claim.deadline.Sub(gs.clock.Now())
	if left <= 0 {
		return 0, false
	}
	return left, true
}

// expired reports whether the attempt in flight has passed its deadline.
func (gs *gangs) expired(key gangKey) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g, ok := gs.byKey[key]
	return ok && g.claim != nil && !gs.clock.Now().Before(g.claim.deadline)
}

// waiting counts gangs whose members are held until quorum exists, and
// gangs with an attempt in flight.
func (gs *gangs) waiting() (members, placing int) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	now := gs.clock.Now()
	for _, g := range gs.byKey {
		if g.liveClaim(now) != nil {
			placing++
		}
	}
	return len(gs.gated), placing
}

// reservedUIDs lists the gang's reserved members in UID order.
func (gs *gangs) reservedUIDs(key gangKey) []types.UID {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g, ok := gs.byKey[key]
	if !ok {
		return nil
	}
	uids := make([]types.UID, 0, len(g.reserved))
	for uid := range g.reserved {
		uids = append(uids, uid)
	}
	sort.Slice(uids, func(i, j int) bool { return uids[i] < uids[j] })
	return uids
}

// forgetPod drops a deleted pod's reservation.
func (gs *gangs) forgetPod(key gangKey, uid types.UID) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g, ok := gs.byKey[key]; ok {
		delete(g.reserved, uid)
	}
	if held := gs.gated[key]; held != nil {
		delete(held, uid)
		if len(held) == 0 {
			delete(gs.gated, key)
		}
	}
}

// releaseCount is how many times the gang's held-back members were
// released so far.
func (gs *gangs) releaseCount(key gangKey) uint64 {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.releases[key]
}

// gate remembers that PreEnqueue holds pod back. It returns false when a
// release happened since PreEnqueue read seen: the pod may have missed it.
func (gs *gangs) gate(key gangKey, pod *v1.Pod, seen uint64) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.gated[key] == nil {
		gs.gated[key] = map[types.UID]*v1.Pod{}
	}
	gs.gated[key][pod.UID] = pod
	return gs.releases[key] == seen
}

// ungate forgets and returns the members held back for a gang, keyed as
// Activate wants them.
func (gs *gangs) ungate(key gangKey) map[string]*v1.Pod {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	held := gs.gated[key]
	delete(gs.gated, key)
	gs.releases[key]++
	if len(held) == 0 {
		return nil
	}
	out := make(map[string]*v1.Pod, len(held))
	for _, p := range held {
		out[p.Namespace+"/"+p.Name] = p
	}
	return out
}

// forgetGang drops what is known of a gang whose PodGroup was deleted.
// Held-back members stay held: they wait for the PodGroup to come back.
func (gs *gangs) forgetGang(key gangKey) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	delete(gs.byKey, key)
	delete(gs.releases, key)
	if gs.head != nil && gs.head.key == key {
		gs.head = nil
	}
}

// fitsSlot reports whether a member with request req can use slot s: it
// asks for no more of anything than the slot holds.
func fitsSlot(req, s amounts) bool {
	for name, q := range req {
		if q > s[name] {
			return false
		}
	}
	return true
}
