// Package ledger is the gang scheduler's memory of gangs. The API objects
// (PodGroups, pods) say what a gang is; the ledger says what this scheduler
// has promised it: which members it reserved, which capacity it holds for
// the rest, whether it has run, what its failed plans taught, and which
// preemptions it is waiting for. It knows nothing of the scheduling
// framework: the Coscheduling plugin calls it from its extension points and
// informer handlers, and acts on its answers.
//
// # Parts
//
// Each part has one job and its own lock:
//   - Reservations: per gang, the reservations (members that reserved a
//     node, with the attempt they reserved in; each is found by the member's
//     UID too, under the unit it was made under, since the unit a pod
//     belongs to can change under it), the held plan of the attempt in
//     flight (the slots of its plan not yet taken, until a deadline: not a
//     DRA ResourceClaim), the attempt count,
//     the backoff after failed attempts (base, doubling with each
//     consecutive failure, up to a maximum) and whether the gang reached
//     quorum (admitted).
//   - Head: the head hold, at most one gang's, and the yields of gangs whose
//     turn ran out.
//   - Lessons: per gang, caps per node and node exclusions per template,
//     and the fingerprints of failed plans, which lapse after LessonTTL.
//   - Preemptions: per preemptor, the victims not yet gone and the members
//     not yet bound.
//   - Gate: per gang, the members PreEnqueue holds back and how many times
//     they were released.
//   - Blocked: pods held capacity turned away, to activate when a hold
//     ends.
//   - Timers: per gang, one pending callback per purpose.
//
// # What a held plan promises
//
// A gang's members reserve nodes only after a plan for the whole gang (its
// next members up to quorum, or one replacement of a running gang) was
// found in free capacity, less what other gangs hold. The plan's places are
// slots, one per member, each designated to the member the plan put there.
// A member that reserves takes a slot: its own, else one on the node it
// reserved that its request fits, else the first it fits anywhere, so the
// held plan never holds more than the members still to come. In a plan with a
// hierarchy (a composite unit, segments, sharers) only its own: each
// subgroup's members are the ones its domain was chosen for, and a planned
// member deleted before it reserved ends the attempt, which plans again
// with its replacement. Until the
// attempt's deadline the slots left are held: other gangs plan around them
// and other pods do not fit into them. A reservation remembers its attempt,
// so news about an abandoned attempt changes nothing; a second Fail of one
// attempt does nothing. A failed attempt's reservations end with it: its
// members are being rejected, and no census may count them meanwhile.
//
// # Why holds cannot deadlock
//
// A gang that holds anything through a held plan can complete: its whole plan
// fit when it was made. A gang that cannot complete holds nothing, with one
// exception, the head hold, which reserves no pod and is held by one gang
// at a time, so holds cannot wait on each other.
//
// # The head hold and its bound
//
// The head hold keeps a large gang from being starved by small ones that
// keep taking whatever frees up. The first gang in queue order that would
// fit once running jobs finish, but does not fit the free capacity now,
// holds the places of that plan: the free ones, and the ones it waits for,
// which running pods still use. What frees up at a place it waits for is
// kept from the gangs and pods queued behind it, whichever the scheduler
// tries first (its queue pops pods whose backoff ends first, not the head),
// so the head gathers its plan as other pods finish. A hold is bounded so
// that it cannot stall the cluster:
//   - only a gang that would fit the capacity that can free up holds at
//     all: pods that never leave (services, DaemonSets) are not counted as
//     room (the plugin decides this before it calls Head.Take);
//   - a turn lasts at most the gang's schedule timeout and is never
//     renewed: a turn that ran out ends at its end, whether the timer that
//     ends it or the gang's next attempt comes first, and only a gang that
//     holds a live turn may refresh its slots;
//   - when a turn runs out without the gang starting, the gang yields for
//     as long as it held, counted from the turn's end: the gangs queued
//     behind it use the capacity (backfill). Then it may hold again, so it
//     still is not starved;
//   - a gang whose members are all gone holds nothing.
//
// So the longest any hold keeps capacity from others at a stretch is the
// holding gang's schedule timeout (permitWaitingTimeSeconds, 60 s by
// default, when the PodGroup sets none).
//
// # Locks
//
// Each part guards its state with its own mutex. The lock order is:
//
//	Reservations.mu, then Head.mu
//
// and those are the only two ever held together: HeldByOthers reads, and
// HoldPlan writes, a gang's held plan and the head hold in one step, so a gang
// whose plan replaces its head hold is never seen holding neither. Every
// other method holds one lock at a time, and the Ledger's other operations
// that span parts (Succeed, ForgetPod, Idle, ForgetGang, FailPlan, Waiting)
// take them one after another. Their steps are ordered so that a reader in
// between sees at most a hold that is about to go, never less held than was
// promised. No lock is held while a timer's callback runs: callbacks run
// on goroutines of their own.
package ledger
