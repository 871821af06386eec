package coscheduling

import (
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// gangs is the plugin's memory of gangs. The API objects (PodGroups, pods)
// say what a gang is; gangs says what this scheduler has promised it: which
// members it reserved, which capacity it holds for the rest, whether it has
// run, and what its failed plans taught.
//
// The capacity hold is what keeps gangs from deadlocking. A gang's members
// reserve nodes only after a plan for the whole gang was found in free
// capacity, and the not-yet-reserved part of that plan is held until the
// attempt's deadline: other gangs plan around it and other pods do not fit
// into it. So a gang that holds anything can complete, and a gang that
// cannot complete holds nothing. The one exception, the head hold, is
// bounded in time (see hold.go).
type gangs struct {
	clock clock.WithTickerAndDelayedExecution

	mu    sync.Mutex
	byKey map[gang.Key]*gangState
	// gated holds, per gang, the members PreEnqueue is holding back. They
	// are released when what they wait for arrives: kube-scheduler 1.37
	// runs queueing hints for new unscheduled pods only with the
	// GenericWorkload gate on, so the plugin cannot rely on hints for it.
	gated map[gang.Key]map[types.UID]*v1.Pod
	// releases counts ungate calls per gang, so that a PreEnqueue that
	// raced with a release can tell it missed one.
	releases map[gang.Key]uint64
	// head is the gang holding capacity without a plan for all of its
	// members; see hold.go. Nil when no gang holds that way.
	head *headHold
	// blocked are pods turned away because held capacity was in their way.
	// No cluster event announces the end of a hold, so they are activated
	// when one ends. Keyed as Activate wants them.
	blocked map[string]*v1.Pod
	// preemptions are the preemptions this scheduler carried out whose
	// preemptor has not bound yet, keyed by preemptor (see preemptorID).
	// They keep a preemptor from preempting twice for one placement, and
	// other preemptors from counting on the room its victims free.
	preemptions map[string]*preemptionRecord
	// stopped is set once the plugin's context ended: no timer starts
	// after it.
	stopped bool
}

// gangState is what the scheduler knows of one gang. Guarded by gangs.mu.
type gangState struct {
	// admitted is set when the gang reached quorum in this scheduler. A
	// running gang's members that reappear schedule one by one. It is
	// cleared when no member holds a node any more.
	admitted bool
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
	// yieldUntil is when the gang may hold capacity as the head again,
	// after its last head hold expired (see hold.go).
	yieldUntil time.Time
	// lessons are what Filter taught about the gang's failed plans.
	lessons lessons
	// timers are the gang's pending callbacks by purpose, stopped when the
	// gang is forgotten.
	timers map[timerKind]clock.Timer
}

// timerKind names what a gang's timer is for; a gang has at most one timer
// of each kind.
type timerKind int

const (
	// timerBackoff re-activates members when a backoff ends.
	timerBackoff timerKind = iota
	// timerRecheck looks again at members gated while a release raced.
	timerRecheck
	// timerHoldEnd ends a head hold that ran out of time.
	timerHoldEnd
	// timerYieldEnd re-activates a former head when its yield ends.
	timerYieldEnd
)

type reservation struct {
	node    string
	attempt int
	request amounts
}

// claim is the capacity a plan holds for the members still to reserve.
type claim struct {
	attempt  int
	deadline time.Time
	// slots are the planned places not yet taken, one per member.
	slots   []slot
	summary string
	spans   []placement.Span
	// fingerprint identifies the plan, for lessons.
	fingerprint uint64
}

// slot is one member's planned place. It is designated to the member the
// plan put there, so that ranks land where the plan wants them; a member the
// plan did not name (a recreated pod, say) takes any slot its request fits.
type slot struct {
	uid  types.UID
	node string
	req  amounts
}

func newGangs(c clock.WithTickerAndDelayedExecution) *gangs {
	return &gangs{
		clock:    c,
		byKey:    map[gang.Key]*gangState{},
		gated:    map[gang.Key]map[types.UID]*v1.Pod{},
		releases: map[gang.Key]uint64{},
		blocked:  map[string]*v1.Pod{},

		preemptions: map[string]*preemptionRecord{},
	}
}

// get returns the gang's state, creating it. Callers hold mu.
func (gs *gangs) get(key gang.Key) *gangState {
	g, ok := gs.byKey[key]
	if !ok {
		g = &gangState{reserved: map[types.UID]reservation{}}
		gs.byKey[key] = g
	}
	return g
}

// liveClaim returns the gang's claim if it has one that has not expired.
func (g *gangState) liveClaim(now time.Time) *claim {
	if g.claim == nil || !now.Before(g.claim.deadline) {
		return nil
	}
	return g.claim
}

// heldByOthers sums, per node, the capacity that gangs other than self hold
// from a pod at queue position order: their live claims, and the head
// gang's hold unless the pod comes before the head in queue order.
func (gs *gangs) heldByOthers(self gang.Key, order queueOrder) map[string]amounts {
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
	if h := gs.liveHead(now); h != nil && h.key != self && !order.before(h.order) {
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
func (gs *gangs) planSlots(key gang.Key, uid types.UID, req amounts) (nodes []string, ok bool) {
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

// setClaim starts a new attempt holding slots until deadline. It reports
// whether the gang held as the head until now: its whole plan now holds
// what the head hold did.
func (gs *gangs) setClaim(key gang.Key, slots []slot, deadline time.Time, plan *placement.Plan, fp uint64) (wasHead bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.get(key)
	g.attempt++
	g.claim = &claim{attempt: g.attempt, deadline: deadline, slots: slots, summary: plan.Summary, spans: plan.Spans, fingerprint: fp}
	if gs.head != nil && gs.head.key == key {
		gs.head = nil
		return true
	}
	return false
}

// failClaimPlan remembers that the plan of the attempt in flight failed
// under Filter, so that it is never tried again.
func (gs *gangs) failClaimPlan(key gang.Key) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g, ok := gs.byKey[key]
	if !ok || g.claim == nil {
		return
	}
	if g.lessons.failed == nil {
		g.lessons.failed = map[uint64]time.Time{}
	}
	g.lessons.failed[g.claim.fingerprint] = gs.clock.Now()
}

// backoff reports whether the gang is backing off, until when and why.
func (gs *gangs) backoff(key gang.Key) (until time.Time, reason string, ok bool) {
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
func (gs *gangs) reserve(key gang.Key, uid types.UID, node string, req amounts) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.get(key)
	g.reserved[uid] = reservation{node: node, attempt: g.attempt, request: req}
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

// unreserve forgets a reservation. inFlight is true when the pod belonged
// to the gang's attempt in flight: the gang then fails as a whole. released
// is true when it belonged to an attempt that had already reached quorum:
// the member failed to bind after its gang was let go.
func (gs *gangs) unreserve(key gang.Key, uid types.UID) (inFlight, released bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g, found := gs.byKey[key]
	if !found {
		return false, false
	}
	r, had := g.reserved[uid]
	delete(g.reserved, uid)
	inFlight = had && g.claim != nil && g.claim.attempt == r.attempt
	return inFlight, had && !inFlight && g.admitted
}

// fail ends the attempt in flight, if any. A penalized failure (the plan
// did not work out) starts a backoff that doubles with each consecutive
// one; an unpenalized one (a member was deleted, or Filter taught the
// planner something new) lets the gang try again at once. It returns the
// members of the failed attempt that still hold a reservation (their
// waiting pods must be rejected) and the backoff. A second call for the
// same attempt changes nothing and returns ok=false.
func (gs *gangs) fail(key gang.Key, reason string, penalize bool, base, max time.Duration) (members []types.UID, backoff time.Duration, ok bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.get(key)
	if g.claim == nil {
		return nil, 0, false
	}
	failed := g.claim.attempt
	g.claim = nil
	if penalize {
		g.failures++
		backoff = base
		for i := 1; i < g.failures && backoff < max; i++ {
			backoff *= 2
		}
		backoff = min(backoff, max)
	}
	g.backoffUntil = gs.clock.Now().Add(backoff)
	g.lastFailure = reason
	for uid, r := range g.reserved {
		if r.attempt == failed {
			members = append(members, uid)
		}
	}
	sortUIDs(members)
	return members, backoff, true
}

// succeed ends the attempt in flight because quorum is reserved, and marks
// the gang admitted. It returns the reserved members to allow and the ended
// claim (for its summary and spans), and ok=false if no attempt was in
// flight.
func (gs *gangs) succeed(key gang.Key) (members []types.UID, done *claim, ok bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.get(key)
	g.admitted = true
	g.lessons = lessons{}
	if g.claim == nil {
		return nil, nil, false
	}
	done = g.claim
	g.claim = nil
	g.failures = 0
	for uid := range g.reserved {
		members = append(members, uid)
	}
	sortUIDs(members)
	return members, done, true
}

// admitted reports whether the gang reached quorum in this scheduler and
// still has a member holding a node.
func (gs *gangs) admitted(key gang.Key) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g, ok := gs.byKey[key]
	return ok && g.admitted
}

// reservedUIDs returns the gang's reservations by pod UID.
func (gs *gangs) reservations(key gang.Key) map[types.UID]reservation {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g, ok := gs.byKey[key]
	if !ok {
		return nil
	}
	out := make(map[types.UID]reservation, len(g.reserved))
	for uid, r := range g.reserved {
		out[uid] = r
	}
	return out
}

// remaining is how long the attempt in flight has left before it times out.
func (gs *gangs) remaining(key gang.Key) (time.Duration, bool) {
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
func (gs *gangs) expired(key gang.Key) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g, ok := gs.byKey[key]
	return ok && g.claim != nil && !gs.clock.Now().Before(g.claim.deadline)
}

// waiting counts gangs whose members are held until quorum exists, gangs
// with an attempt in flight, and the members those attempts reserved (they
// wait in Permit for the rest of their gang).
func (gs *gangs) waiting() (members, placing, reserved int) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	now := gs.clock.Now()
	for _, g := range gs.byKey {
		c := g.liveClaim(now)
		if c == nil {
			continue
		}
		placing++
		for _, r := range g.reserved {
			if r.attempt == c.attempt {
				reserved++
			}
		}
	}
	return len(gs.gated), placing, reserved
}

// admittedKeys lists the gangs that have run in this scheduler, in key order.
func (gs *gangs) admittedKeys() []gang.Key {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	var keys []gang.Key
	for key, g := range gs.byKey {
		if g.admitted {
			keys = append(keys, key)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
}

// reservedUIDs lists the gang's reserved members in UID order.
func (gs *gangs) reservedUIDs(key gang.Key) []types.UID {
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
	sortUIDs(uids)
	return uids
}

// inFlightOn lists, in key order, the gangs whose attempt in flight has a
// member reserved on node.
func (gs *gangs) inFlightOn(node string) []gang.Key {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	var keys []gang.Key
	for key, g := range gs.byKey {
		if g.claim == nil {
			continue
		}
		for _, r := range g.reserved {
			if r.node == node && r.attempt == g.claim.attempt {
				keys = append(keys, key)
				break
			}
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
}

// inFlightNodes lists, in name order, the nodes reserved by members of the
// gang's attempt in flight.
func (gs *gangs) inFlightNodes(key gang.Key) []string {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g, ok := gs.byKey[key]
	if !ok || g.claim == nil {
		return nil
	}
	seen := map[string]bool{}
	var nodes []string
	for _, r := range g.reserved {
		if r.attempt == g.claim.attempt && !seen[r.node] {
			seen[r.node] = true
			nodes = append(nodes, r.node)
		}
	}
	sort.Strings(nodes)
	return nodes
}

// forgetPod drops a deleted pod's reservation and stops holding it back.
// It returns true when the pod was reserved in the gang's attempt in
// flight: the attempt cannot complete as planned.
func (gs *gangs) forgetPod(key gang.Key, uid types.UID) (inFlight bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g, ok := gs.byKey[key]; ok {
		if r, had := g.reserved[uid]; had {
			inFlight = g.claim != nil && g.claim.attempt == r.attempt
			delete(g.reserved, uid)
		}
	}
	if held := gs.gated[key]; held != nil {
		delete(held, uid)
		if len(held) == 0 {
			delete(gs.gated, key)
		}
	}
	return inFlight
}

// idle forgets a gang none of whose members exist any more: its claim, its
// head hold, its admission and its lessons. Its backoff is kept, so a gang
// whose members are recreated at once does not retry in a hot loop; the
// state goes when the PodGroup does.
func (gs *gangs) idle(key gang.Key) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g, ok := gs.byKey[key]
	if !ok {
		return
	}
	if len(g.reserved) == 0 {
		g.claim = nil
		g.admitted = false
		g.lessons = lessons{}
		delete(gs.preemptions, gangPreemptorID(key))
	}
	if gs.head != nil && gs.head.key == key {
		gs.head = nil
	}
}

// dropAdmission clears a gang's admission: none of its members holds a
// node any more, so members that appear are a new run of the job and gather
// as a whole again.
func (gs *gangs) dropAdmission(key gang.Key) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g, ok := gs.byKey[key]; ok && len(g.reserved) == 0 {
		g.admitted = false
	}
}

// releaseCount is how many times the gang's held-back members were
// released so far.
func (gs *gangs) releaseCount(key gang.Key) uint64 {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.releases[key]
}

// gate remembers that PreEnqueue holds pod back. It returns false when a
// release happened since PreEnqueue read seen: the pod may have missed it.
func (gs *gangs) gate(key gang.Key, pod *v1.Pod, seen uint64) bool {
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
func (gs *gangs) ungate(key gang.Key) map[string]*v1.Pod {
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

// forgetGang drops what is known of a gang whose PodGroup was deleted and
// stops its timers. Held-back members stay held: they wait for the
// PodGroup to come back.
func (gs *gangs) forgetGang(key gang.Key) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g, ok := gs.byKey[key]; ok {
		for _, t := range g.timers {
			t.Stop()
		}
	}
	delete(gs.byKey, key)
	delete(gs.releases, key)
	delete(gs.preemptions, gangPreemptorID(key))
	if gs.head != nil && gs.head.key == key {
		gs.head = nil
	}
}

// after runs f after d, replacing the gang's pending timer of the same
// kind. Timers of forgotten gangs and of a stopped plugin never run.
func (gs *gangs) after(key gang.Key, kind timerKind, d time.Duration, f func()) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.stopped {
		return
	}
	g := gs.get(key)
	if g.timers == nil {
		g.timers = map[timerKind]clock.Timer{}
	}
	if t := g.timers[kind]; t != nil {
		t.Stop()
	}
	// f runs on a goroutine of its own: a fake clock fires timers while it
	// holds its lock, and f reads the clock.
	g.timers[kind] = gs.clock.AfterFunc(d, func() { go f() })
}

// stop stops every timer; the plugin's context has ended.
func (gs *gangs) stop() {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.stopped = true
	for _, g := range gs.byKey {
		for _, t := range g.timers {
			t.Stop()
		}
	}
}

// block remembers a pod that held capacity turned away.
func (gs *gangs) block(pod *v1.Pod) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if len(gs.blocked) >= maxBlocked {
		return // they still retry on cluster events and the queue's flush
	}
	gs.blocked[pod.Namespace+"/"+pod.Name] = pod
}

// maxBlocked bounds the pods remembered for activation when a hold ends.
const maxBlocked = 10000

// unblock returns and forgets the pods held capacity turned away.
func (gs *gangs) unblock() map[string]*v1.Pod {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if len(gs.blocked) == 0 {
		return nil
	}
	out := gs.blocked
	gs.blocked = map[string]*v1.Pod{}
	return out
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

func sortUIDs(uids []types.UID) {
	sort.Slice(uids, func(i, j int) bool { return uids[i] < uids[j] })
}

// preemptionRecord is one preemption this scheduler carried out, kept until
// its preemptor binds or goes away.
type preemptionRecord struct {
	// victims are the evicted pods not yet seen gone. While any is left,
	// the preemptor waits for them rather than deciding again, and other
	// preemptors count their room as taken.
	victims map[types.UID]bool
	// created is when the preemptor was created, for its time to bound.
	created time.Time
	// unbound are the members it preempted for that have not bound yet.
	// The preemptor counts as bound when none is left, or, for a gang,
	// once minMember of its members are bound (a member may be replaced
	// by one of another UID that takes its place).
	unbound map[types.UID]bool
	// minMember is the gang's minMember; 0 for a plain pod.
	minMember int32
	// until bounds the wait for the victims: past it, a victim that still
	// has not gone (its node is down, its grace period is long) no longer
	// keeps the preemptor from deciding again.
	until time.Time
}

// preemptorID names a preemptor: its gang's PodGroup, or the pod itself
// when it belongs to no gang.
func preemptorID(pod *v1.Pod) string {
	if key, ok := gang.Of(pod); ok {
		return gangPreemptorID(key)
	}
	return "pod/" + pod.Namespace + "/" + pod.Name
}

func gangPreemptorID(key gang.Key) string { return "pg/" + key.String() }

// preemptorName names a preemptor for people: its PodGroup's or its own
// namespace/name.
func preemptorName(pod *v1.Pod) string {
	if key, ok := gang.Of(pod); ok {
		return key.String()
	}
	return pod.Namespace + "/" + pod.Name
}

// startPreemption records a preemption that was just carried out. A record
// the preemptor had from an earlier placement is replaced.
func (gs *gangs) startPreemption(id string, r *preemptionRecord) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.preemptions[id] = r
}

// awaitingVictims reports how many of the preemptor's victims have not gone
// yet, if it is still waiting for them.
func (gs *gangs) awaitingVictims(id string) (int, bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	r, ok := gs.preemptions[id]
	if !ok || len(r.victims) == 0 || !gs.clock.Now().Before(r.until) {
		return 0, false
	}
	return len(r.victims), true
}

// preempting reports whether the preemptor preempted for the placement it
// holds now: its record has not timed out. Until its room shows free in
// the snapshot (the scheduler's cache may trail the informer), a member
// turned away from it waits instead of failing its gang.
func (gs *gangs) preempting(id string) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	r, ok := gs.preemptions[id]
	return ok && gs.clock.Now().Before(r.until)
}

// pendingVictims returns the victims of every preemption still waiting for
// them. They are gone as far as preemption is concerned: no other
// preemptor may choose them again, and the room they free is counted as
// free (less what their preemptors hold).
func (gs *gangs) pendingVictims() map[types.UID]bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	now := gs.clock.Now()
	var out map[types.UID]bool
	for _, r := range gs.preemptions {
		if !now.Before(r.until) {
			continue
		}
		for uid := range r.victims {
			if out == nil {
				out = map[types.UID]bool{}
			}
			out[uid] = true
		}
	}
	return out
}

// victimGone notes that a pod left: if it was a victim, its preemptor waits
// for one fewer.
func (gs *gangs) victimGone(uid types.UID) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	for _, r := range gs.preemptions {
		delete(r.victims, uid)
	}
}

// memberBound notes that a member of a preemptor bound. It returns the
// preemptor's creation time, its minMember and whether every member it
// preempted for is bound now; ok is false without a record.
func (gs *gangs) memberBound(id string, uid types.UID) (created time.Time, minMember int32, all, ok bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	r, ok := gs.preemptions[id]
	if !ok {
		return time.Time{}, 0, false, false
	}
	delete(r.unbound, uid)
	return r.created, r.minMember, len(r.unbound) == 0, true
}

// endPreemption forgets a preemptor's record: it bound, or went away. It
// reports whether there was one.
func (gs *gangs) endPreemption(id string) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	_, ok := gs.preemptions[id]
	delete(gs.preemptions, id)
	return ok
}
