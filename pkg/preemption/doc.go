// Package preemption decides gang-aware preemption: when a gang (or a plain
// pod) does not fit, which running pods of strictly lower priority to evict
// so that the whole preemptor fits, and where it then goes. It is pure
// decision logic: the gang plugin builds a Request from its scheduler
// snapshot, calls Engine.Decide from PostFilter, and carries out the
// Decision (evictions, nominated nodes, conditions, Events, metrics).
//
// # What may be evicted
//
// Victims come in units. A gang is evicted whole or not at all, except that
// its members above minMember (Unit.Surplus of them, any but those marked
// Keep) may go alone while the gang keeps running; the search tries them
// before whole units. A plain pod is a unit by itself. Units of equal or
// higher priority than the preemptor are never candidates, and a preemptor
// with preemptionPolicy Never evicts nothing.
//
// # Inside one domain
//
// The search follows the planner's level rules (package topology): from the
// level the gang's placement.Policy names (the node level when it names
// none) up to the whole cluster, or at the named level only when it is
// required. At each level it takes the domains one by one, and in each looks
// only at units with a pod inside that domain, for a set whose eviction lets
// the preemptor fit inside it. So victims are never scattered over domains
// to make room the preemptor could not use as one, and the preemptor lands
// as tightly as if every lower-priority pod were gone: a set that clears one
// NVLink clique beats any that clears only a leaf, and so on up. A victim
// gang that straddles the domain's border goes whole, its pods outside too.
// A preemptor with no member bound by topology (no accelerators) goes
// anywhere, as the planner places such members, and is searched over the
// whole cluster. A request with Anchors (replacements or late members of a
// running gang) goes where the planner puts them, next to their running
// siblings: the search looks only at the domain around most anchors at
// each level (topology.Tree.Homes), tightest first, and the level counted
// is that of the tightest such domain holding the members. Members' per-node
// caps (MaxPerNode) count as the planner counts them.
//
// # The cost order
//
// Among the victim sets that let the whole preemptor fit, Decide picks the
// least in this order, comparing field by field (Cost holds them):
//
//  1. PDB violations, fewest first: summed over budgets, the evicted pods a
//     budget covers beyond its disruptionsAllowed. A set that violates a
//     budget is chosen only when no set that violates none exists.
//  2. Level, tightest first: the level of the domain the preemptor lands in
//     (node, NVLink clique, leaf, spine, ..., cluster).
//  3. Victim gangs, fewest first: whole gangs plus plain pods evicted.
//  4. Elastic members evicted alone, fewest first.
//  5. The highest priority among the victims, lowest first.
//  6. The sum of the victims' priorities, lowest first, counting each whole
//     gang, elastic member and plain pod once.
//  7. Work lost for good, least first: the work lost (below) of the
//     victims that are not Unit.Movable. A movable unit checkpoints and
//     restarts cheaply, so among victims of equal priority those that can
//     move go first; a unit that has done no work yet loses none either
//     way.
//  8. Work lost, least first, in GPU-seconds: the sum over the same victims
//     of the GPUs each holds (a whole unit's pods, or the one elastic
//     member) times the whole seconds since its unit started
//     (Unit.Started; a unit not yet started loses none). So a small job
//     that has run long can go before a large one that started recently,
//     and pods without GPUs lose nothing here.
//  9. GPUs evicted, fewest first.
//  10. Canonical order: list each set's victims in canonical order; the
//     set whose first differing victim comes first wins. The canonical
//     order of victims is elastic members before whole units, then
//     priority ascending, then work lost for good ascending, then work
//     lost ascending, then GPUs ascending, then the unit's name, then a
//     gang's members in Unit.Pods order.
//
// Every field but the level (fixed per domain) only grows as victims are
// added, and for whole units the canonical order sorts by fields 5 to 9
// in the cost's own order, so the first m whole units of any run of them
// are also the cheapest m: the search's lower bound rests on both (see
// bound.go). A field added to the cost order after the counts needs its
// key in the canonical order at the same place.
//
// The tuple is total, so the decision does not depend on the order of
// Request.Units or of anything else the caller passes.
//
// # Check before evicting
//
// The chosen set is verified by planning the whole preemptor with the real
// planner on the capacity freed by exactly those victims. If it does not fit,
// Decide evicts nothing (ReasonNotVerified). The plan it returns is the one
// to nominate nodes from.
//
// # The search, and where it can be suboptimal
//
// Within a domain the search is a greedy pass followed by an exact branch
// and bound over the domain's units in canonical order, with lower bounds on
// every field of the cost; one incumbent and one work budget are shared by
// all domains (see search.go). Within the budget the result is the least set
// in the order above and Decision.Exact is true; this is what the tests
// check against an exhaustive search. Past the budget, domains not yet
// searched keep only the greedy pass's set, which adds the unit freeing the
// most needed slots until the preemptor fits and then drops what is not
// needed: it can evict more units than necessary where small pods must be
// evicted together to free one slot, and its tie-breaks are not canonical.
// Then Exact is false. The budget (about 2 million steps, some tens of
// milliseconds) covers, at 5,000 nodes full of 4- and 8-node gangs, every
// preemptor that one spine holds, up to 256 nodes in the benchmarks;
// gangs of a thousand nodes across the cluster get the greedy set.
//
// # What the caller provides
//
// The gang plugin builds a Request from its scheduler snapshot, once per
// PostFilter, in time linear in nodes plus pods:
//   - The preemptor's placement.Request exactly as it planned the gang
//     (members, policy, per-node caps, anchors): the same Nodes slice and
//     NodeGeneration (so the planner's cached tree serves both), Free less
//     what other gangs hold and what is nominated for other preemptors, so
//     that two preemptors never count on the same freed capacity.
//   - One pass over the snapshot's pods: those of priority below the
//     preemptor's (the engine drops the others anyway), not already being
//     deleted, grouped by PodGroup into KindGang units and the rest into
//     KindPod units; per pod its node index in Nodes, its request in the
//     Request's Resources dimensions (what the plugin subtracted from
//     Free), and its GPUs. Surplus is running members minus minMember;
//     Keep marks launchers and other members that must not go alone.
//   - For each PodDisruptionBudget in the namespaces of candidate pods, one
//     PDB with its disruptionsAllowed, and on each pod the indices of the
//     budgets whose selectors match it. A budget that spans several units
//     is one entry that their pods share: the engine counts evictions per
//     budget over the whole set, so violations are never double counted
//     or missed.
//   - The preemptor's priority and preemptionPolicy, and Now.
//
// The Decision says what to evict (Victims, by unit and pod index), the
// nodes to nominate (Plan.NodeOf, per member), the domain for Events
// (Domain.String(), "spine s0") and a Summary; a *NoPreemptionError says
// why nothing is evicted, with a Reason for metrics.
//
// # Fit and its limits
//
// For a preemptor with one request shape and nothing placed apart from it,
// counting free slots per node decides the fit exactly as the planner does.
// Otherwise (several shapes, or a launcher without accelerators) slot counts
// are necessary only, and every set the search would keep is planned first.
// Capacity freed outside the domain is never sought for members without
// accelerators: a launcher that fits only where no victim in the domain
// makes room leaves the preemptor without a decision.
package preemption
