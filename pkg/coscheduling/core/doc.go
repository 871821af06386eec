// Package core plans gangs for the coscheduling plugin. It owns one
// decision, where a unit's next batch of members goes, and everything that
// decision takes:
//   - demand (devices.go, resources.go): what the members ask of nodes, as
//     one pass of package dra counts it, in the vector dimensions a plan
//     uses;
//   - eligibility and request shaping (plan.go, segments.go, composite.go,
//     nominations.go): which nodes each member may use (package
//     eligibility), the capacity other gangs and nominated pods hold, and a
//     placement.Request with the unit's policy, anchors and hierarchy;
//   - ComputeDomain placement (computedomain.go, computedomain_apart.go,
//     computedomain_cliques.go): the glue between package computedomain's
//     rules and a plan;
//   - verification (verification.go): a plan whose members may exclude each
//     other is replayed through the profile's Filter plugins, and what fails
//     becomes a lesson in the ledger;
//   - explanations and the head hold (explain.go, hold.go): why a gang does
//     not fit, in people's words, and the bounded hold of the first gang in
//     the queue that would fit once running jobs finish;
//   - the preemptor's demand (preemption.go): package preempt describes a
//     preemptor to its engine as a plan describes it (preempt.Planning).
//
// A Planner is built once by the plugin, with what only the plugin knows
// (its units, its queue, its Events and metrics) behind the small interfaces
// of planner.go, and the rule packages' own types (ledger, eligibility, dra)
// as they are. The package never imports the plugin: the plugin's extension
// points call it, and it answers with a *fwk.Status as they return it.
package core
