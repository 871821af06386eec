// Package gang is gpu-gang's model of a gang, shared by the scheduler
// plugin, the PodGroup status controller and the simulator.
//
// A gang is a group of pods that start together or not at all. Which API
// defines it is an adapter's concern: FromPodGroup adapts scheduler-plugins'
// PodGroup (scheduling.x-k8s.io/v1alpha1), FromNativePodGroup Kubernetes' own
// (scheduling.k8s.io/v1beta1), FromCompositePodGroup the composites that
// group native PodGroups (scheduling.k8s.io/v1alpha3). An adapter turns the
// API object into a Spec (a CompositeSpec), and everything downstream works
// on Specs; a Key says which API a gang is of. The rules that must mean the same thing everywhere live here and
// nowhere else:
//   - membership: which gang a pod belongs to (Of), a native PodGroup
//     winning over a label, so that a pod never counts in two gangs;
//   - quorum: whether a gang has enough members (QuorumOf), how many
//     above it may go alone (SurplusOf) and when it began to run
//     (StartedAt), counted the same way by the scheduler and the status
//     controller (Census);
//   - rank: the order members are placed in (RankOf);
//   - topology policy: the placement constraint a gang asks for (PolicyOf),
//     and its segments: groups of consecutive ranks of one role, each
//     inside one domain of a level of its own, a launcher or master beside
//     them outside (SegmentsOf, Segments.Covers, Segments.Hierarchy);
//   - hierarchies: Kubernetes' CompositePodGroups (FromCompositePodGroup)
//     and the native PodGroups under them form a Tree; a PodGroup's gang is
//     rooted at the highest gang composite above it (RootOf), which starts
//     once minGroupCount children are each at quorum (TreeQuorumOf), planned
//     together (Admit, Tree.Hierarchy);
//   - admission units: what a scheduler admits as one (Unit, built only by
//     UnitOf): a plain gang, a segmented gang or a composite, each a type
//     that decides its own quorum, next batch, late members, request shape
//     and victim units, reading the scheduler's own state through a View;
//   - sources: where the scheduler reads gangs (Sources): one informer per
//     API, composites included, started once per scheduler and shared by
//     all its plugins (SharedSources), with the queueing hint both plugins
//     register for PodGroup events (IsOwnPodGroup).
package gang
