// Package consolidate moves movable running gangs out of one topology domain
// so that a gang which has waited long enough gets that domain whole. It is
// the coscheduling plugin's consolidation, off unless the plugin's args
// enable it (config.ConsolidationArgs), and runs from PostFilter after
// preemption found nothing to evict.
//
// # When it acts
//
// A gang (never a plain pod) whose policy names a topology level, that has
// waited at least WaitingFor since it (its PodGroup or its earliest member)
// was created, and does not fit. It asks for a domain of the gang's level
// only (as if the level were required), whichever the policy says.
//
// # What it may move
//
// Only whole running gangs that opted in to being moved: the PodGroup
// annotation gpu-gang.x-k8s.io/movable: "true" (gang.MovableOf), or a
// priority class in MovablePriorityClasses. A gang is moved whole or not at
// all, never one member. Never a gang of higher priority than the waiting
// one, one that started less than MinRunTime ago, one moved less than
// Cooldown ago, one whose plan has a hierarchy (segments, shared claims, a
// composite's children), or a plain pod; never more gangs
// in any sliding hour than MaxEvictionsPerHour, and never a set that would
// evict more pods than their PodDisruptionBudgets allow.
//
// # How it chooses
//
// For each domain of the level holding a movable gang, in tree order, the
// preemption engine (package preemption) is asked for the cheapest set of
// movable gangs touching that domain whose eviction lets the whole waiting
// gang fit there, verified by the planner. The engine takes only units of
// priority below the request's, so the request carries the waiting gang's
// priority plus one, and its Units are the movable gangs alone. The domains
// found are tried in order of fewest GPUs moved, then the domain's path.
// For each, every moved gang is planned again (the real planner, the gang's
// own policy) on the capacity left once the waiting gang's plan is placed,
// outside the nodes the move frees and the waiting gang takes, each moved
// gang after the ones before it. The first domain where the waiting gang's
// plan and every moved gang's plan hold is the move; if none, nothing is
// moved.
//
// # What it does
//
// Carried out as a preemption is (package preempt): the waiting gang's
// plan is held and its pod nominated, the moved gangs' pods are marked
// with DisruptionTarget and deleted within their budgets, and each moved
// gang's new place is held for it until the same deadline, so its job's
// controller can recreate its pods and they land there whole. Events on
// each moved gang (Moved) and on the waiting gang (Consolidating), and the
// plugin's metrics count each move and the gangs moved. When a move would
// make room but some moved gang fits nowhere else, the waiting gang gets a
// NotConsolidated Event instead, and nothing moves. A gang turned away
// before it has waited WaitingFor is tried again when it has (Config.Wake).
//
// The budget and the cooldown are kept in memory: a scheduler that
// restarts starts them afresh. docs/consolidation.md is the user's guide.
package consolidate
