// Package gang is gpu-gang's model of a gang, shared by the scheduler
// plugin, the PodGroup status controller and the simulator.
//
// A gang is a group of pods that start together or not at all. Which API
// defines it is an adapter's concern: FromPodGroup adapts scheduler-plugins'
// PodGroup (scheduling.x-k8s.io/v1alpha1), FromNativePodGroup Kubernetes' own
// (scheduling.k8s.io/v1beta1). An adapter turns the API object into a Spec,
// and everything downstream works on Specs; a Key says which API a gang is
// of. The rules that must mean the same thing everywhere live here and
// nowhere else:
//   - membership: which gang a pod belongs to (Of), a native PodGroup
//     winning over a label, so that a pod never counts in two gangs;
//   - quorum: whether a gang has enough members (QuorumOf), how many
//     above it may go alone (SurplusOf) and when it began to run
//     (StartedAt), counted the same way by the scheduler and the status
//     controller (Census);
//   - rank: the order members are placed in (RankOf);
//   - topology policy: the placement constraint a gang asks for (PolicyOf);
//   - sources: where the scheduler reads gangs (Sources): one informer per
//     API, started once per scheduler and shared by all its plugins
//     (SharedSources), with the queueing hint both plugins register for
//     PodGroup events (IsOwnPodGroup).
package gang
