// Package topology places whole gangs on an interconnect hierarchy read from
// node labels.
//
// Levels name the hierarchy: an ordered list of node label keys, tightest
// first (an NVLink clique, then a leaf switch, then a spine...). The node
// itself is always the implicit lowest level and the whole cluster the
// implicit highest. A Tree groups nodes into domains at every level; it is
// built once per node set and shared read-only. The Planner implements
// placement.Planner: it keeps a gang inside the tightest domain that holds it,
// spans as few sub-domains as possible at every level below that, and gives
// neighbouring ranks neighbouring slots.
//
// A Request with a Hierarchy (a tree of placement.Subgroups: segments of a
// job, or the PodGroups of a CompositePodGroup) gets one plan for every
// subgroup. Each subgroup's bound members stay inside one domain of its
// policy's level (required: or there is no plan; preferred: the tightest
// level at or above it that works) and inside its parent's domain. Between
// plans that do so the planner prefers, in this order:
//
//  1. Preferred levels met: subgroups taken breadth first, siblings in the
//     order given, each at the tightest level at or above its own that still
//     lets every subgroup fit, given the ones before it.
//  2. Tight subgroups: in the same order, the gang first, each inside the
//     tightest domain that keeps (1), as a flat gang would be.
//  3. Best fit: among the domains that allow that, the one with the least
//     room for the subgroup; identical siblings gather in as few domains as
//     they can, and new subgroups of a running gang near its running members.
//
// Members of a leaf subgroup are packed as a flat gang's, and a replacement
// (Request.Anchors) returns to the domain of its own subgroup: a required
// subgroup stays in the domain of its level that runs most of its anchors,
// and no domain tried for it or an ancestor, however tight, may leave that
// domain out; a preferred one goes there when it can. The planner
// finds such a plan by search: it gives each subgroup a domain, parents
// first, trying the best-fit domain first and backing off to the next when
// a later subgroup cannot fit (backtracking), so a sibling never keeps a
// domain another needs. A Planner spends at most DefaultSearchBudget domain
// trials on one gang in one group of nodes (Request.Groups); when they run
// out it returns the best complete plan found (Result.Exact unset), or a
// *placement.FitError that says so, never a partial plan.
//
// Nothing here reads the API server; the gang plugin hands everything in as a
// placement.Request.
package topology
