// Package snapshot turns a snapshot of a real cluster into a simulator
// input, so that the simulator answers "what would gpu-gang do on our
// cluster, with our queue?" beside the default and in-tree schedulers.
//
// A snapshot is what
//
//	kubectl get nodes,pods,podgroups.scheduling.x-k8s.io -A -o yaml
//
// prints (Command; NativeCommand adds podgroups.scheduling.k8s.io on a
// cluster that serves Kubernetes' own PodGroups): a v1 List of Nodes, Pods
// and PodGroups of either API (or a stream of such objects and Lists).
// Load reads it; Input turns it into the simulator's nodes, pre-fill and
// jobs:
//
//   - nodes with GPUs, with their labels and allocatable nvidia.com/gpu;
//   - GPU pods bound to a node and not finished: pre-fill, running until
//     the end of the run;
//   - pending pods in a gang: one gang per PodGroup, of its pending members
//     that ask for GPUs, with its topology policy;
//   - other pending pods that ask for GPUs: plain pods.
//
// Gangs are read as the scheduler reads them, by asking pkg/gang: a pod
// joins the native PodGroup its spec.schedulingGroup names, else the
// scheduling.x-k8s.io PodGroup its scheduling.x-k8s.io/pod-group label
// names (gang.Of); a PodGroup the scheduler would reject is an error
// (Spec.Validate); the topology policy is the native PodGroup's constraint,
// the PodGroup's annotations or Kueue's on its members (gang.PolicyOf).
// A pod's GPUs are its effective request (resourcehelper.PodRequests).
//
// Pending jobs arrive at the start of the run in the order they were
// created. Only nvidia.com/gpu is simulated: CPU-only pods and nodes, and
// those whose only accelerators (fleet.IsAccelerator) are others, are left
// out and counted in the input's description; every simulated pod asks the
// simulator's usual 1 CPU and 1 GiB. Names are anonymized unless asked
// otherwise: nodes are renamed after their place in the fabric (s0-l1-n03),
// topology label values likewise, and jobs after their order (gang-007,
// pod-012); other labels are dropped.
//
// On a cluster whose GPUs reach pods through Dynamic Resource Allocation,
// DRACommand also lists ResourceSlices, DeviceClasses, ResourceClaims and
// ResourceClaimTemplates; Parse keeps them in Snapshot.DRA and replays them
// (see replay): a node that publishes whole GPUs of NVIDIA's driver and
// advertises no nvidia.com/gpu becomes a DRA node of as many GPUs of the
// same hardware, a running pod holds the GPU devices allocated to its
// claims, and a pending pod whose claims ask for an exact count of the GPU
// DeviceClass becomes a job that claims as many (scenario.GPURequestClaim).
//
// A gang whose members join a ComputeDomain is read with gang.PolicyOf
// alone: the plugin tightens such a gang to one NVLink clique
// (computedomain.Registry.Policy) from what its own planning passes learnt
// of the gang, so the simulator does not apply it to the snapshot's job.
//
// FetchList takes the same List, DRA objects included, from a live cluster
// through client-go.
package snapshot
