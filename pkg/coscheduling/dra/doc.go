// Package dra owns the ResourceClaims gpu-gang allocates itself: the claims
// several members of one gang share, and a PodGroup's claims, which
// kube-scheduler's DynamicResources plugin cannot allocate for a gang whose
// members wait for each other in Permit.
//
// Every allocation gpu-gang writes carries a Mark (the gang and a token of
// the write), so that its ownership outlives the process that wrote it.
//
//   - allocate.go: Allocator computes an allocation in the scheduling cycle
//     with kube-scheduler's structured allocator, without an API call.
//   - allocations.go: Allocations, the table of what this process writes,
//     holds for an attempt in flight and still has to give back (Live tells
//     a reconciler which marks are in use); writer.go runs its API writes
//     off the cycle: the write, the adoption of an earlier write, the
//     release.
//   - release.go: Releaser, the one place that decides whether an
//     allocation may be taken away.
//   - mark.go: the mark's annotations.
//
// It also holds the device counting the gang plugin plans with:
//
//   - source.go: DeviceSource, the plugin's handle on the framework's DRA
//     manager; Demand reads a pass's PassDemand.
//   - demand.go: PassDemand, what the members of one planning pass ask for
//     (plain amounts and devices), and what it tells a pod template.
//   - column.go: Column, one dimension of a pass read node by node, and
//     the reading of a NodeInfo's capacity.
//   - podfit.go: PodFit, Filter's check of a pod's devices against held
//     capacity.
//   - describe.go: device dimensions named for people.
//
// And the claims side of a gang, which GangClaims holds behind the Gangs
// interface the plugin implements (its attempts, lessons and Events):
//
//   - shared.go: the members that share a claim (PassDemand.Sharers), and
//     the allocation of those claims once a plan exists (AllocateShared).
//   - claims.go: GangClaims, and what it hears of claims: a claim deleted
//     under a waiting member, a claim made for a native PodGroup.
//   - badinput.go: DRA input only a gang's owner can fix, explained on
//     the gang.
package dra
