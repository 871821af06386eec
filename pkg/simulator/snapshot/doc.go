// Package snapshot turns a snapshot of a real cluster into a simulator
// input, so that the simulator answers "what would gpu-gang do on our
// cluster, with our queue?" beside the default and in-tree schedulers.
//
// A snapshot is what
//
//	kubectl get nodes,pods,podgroups -A -o yaml
//
// prints: a v1 List of Nodes, Pods and scheduling.x-k8s.io PodGroups (or a
// stream of such objects and Lists). Load reads it; Input turns it into the
// simulator's nodes, pre-fill and jobs:
//
//   - nodes with GPUs, with their labels and allocatable nvidia.com/gpu;
//   - GPU pods bound to a node and not finished: pre-fill, running until
//     the end of the run;
//   - pending pods in a PodGroup (label scheduling.x-k8s.io/pod-group): one
//     gang per PodGroup, of its pending members that ask for GPUs, with the
//     PodGroup's topology annotation;
//   - other pending pods that ask for GPUs: plain pods.
//
// Pending jobs arrive at the start of the run in the order they were
// created. Only GPUs are simulated: CPU-only pods and nodes are left out,
// and every simulated pod asks the simulator's usual 1 CPU and 1 GiB.
// Names are anonymized unless asked otherwise: nodes are renamed after their
// place in the fabric (s0-l1-n03), topology label values likewise, and jobs
// after their order (gang-007, pod-012); other labels are dropped.
//
// FetchList takes the same List from a live cluster through client-go.
package snapshot
