// Package computedomain holds gpu-gang's rules for NVIDIA ComputeDomains
// (multi-node NVLink through the k8s-dra-driver-gpu DRA driver), apart from
// any scheduler framework so that a test, the plugin and the simulator can
// call them alike:
//
//   - Classify says what a ResourceClaim is to ComputeDomains: a channel
//     (the workload's share of a domain), the driver's own IMEX daemon, or
//     nothing. Only channels make a pod a member of a domain; a daemon
//     claim marks where its domain runs, as the domain itself; other
//     devices of the driver never define a domain.
//   - Choose picks the NVLink cliques a domain's gang may use. The driver
//     runs one IMEX domain per clique, and two domains in one clique fail
//     (k8s-dra-driver-gpu #892), so the caller first takes out the cliques
//     other domains run in. A gang that one of the remaining cliques could
//     hold stays in one clique, one the domain already runs in first when
//     such a clique has room; only a gang no clique could hold (and whose
//     user does not require one) spans, the fewest whole cliques, the
//     domain's own first. Ties go to the larger cliques, then to clique
//     names, so the choice never depends on input order.
//   - Sites (sites.go) is where other domains run, as one domain's gang
//     sees it, and which nodes it therefore rejects; SiteDomain and
//     AllocationNodes read an allocated claim's domain and nodes.
//   - policy.go: the clique level a domain's gang keeps to (WithinClique,
//     OneCliqueOnly), and the room a clique has for its members
//     (CliqueRoom, LargestClique).
//   - Registry (registry.go) remembers each gang's last planning pass
//     (Pass), for its later policy, for other domains' gangs and for the
//     explanations.
package computedomain
