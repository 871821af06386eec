// Package eligibility holds what the gang plugin's plans read of the
// nodes, kept from one plan to the next: the planning snapshot (Snapshot:
// the live nodes in name order, each node's vectors and labels version,
// which nodes can take a member) and the nodes that may hold a nominated
// pod (Nominations).
//
// A plan touches every node a few times even when nothing changed:
// reading each node's scheduler-cache generation, checking the Filter
// verdicts kept for its templates, and the planners' own passes over the
// nodes. Those passes, not Filter, are what a plan on an unchanged large
// cluster costs, and why that cost grows with the node count.
package eligibility
