// Package fleet is the GPU fleet as it is: what node labels say about each
// node's GPUs, and the policies a gang sets for the GPUs it runs on. It is
// pure: no informers, no API calls, nothing cached across calls. The gang
// plugin, the planner and the simulator all ask it, so each rule has one
// owner.
//
// # Node facts
//
// ReadNode (or New, for a node set) reads labels that GPU feature discovery
// (GFD), the GPU Operator and node provisioners write (names in
// pkg/apis/scheduling): the highest CUDA version the driver supports, the
// driver version, the compute capability, the product, the driver upgrade
// state, the sharing strategy and replicas, MIG, and the capacity type.
// Current GFD keys are read before the deprecated ones; the first set and
// readable source wins. A label that is set but unreadable never panics and
// never fails the node: it is reported in NodeFacts.Problems (a *LabelError
// naming the label, the value and the accepted form) and otherwise ignored.
// Versions compare numerically (Version): 12.10 is above 12.9 and 12 equals
// 12.0.
//
// # Requirements
//
// ParseRequirements reads a gang's annotations (gpu-gang.x-k8s.io/min-cuda,
// min-compute-capability, uniform, capacity-type, allow-shared-gpus) from
// its PodGroup and a pod, the pod's winning. Invalid values come back as
// *AnnotationError values naming the annotation, the value and the accepted
// forms. Requirements bind only members whose Demand (from their resource
// requests) includes an NVIDIA GPU resource: nvidia.com/gpu, a MIG profile
// nvidia.com/mig-*, or a shared resource ending in .shared.
//
// Node by node, Requirements.Admits applies, in order: no driver upgrade in
// progress, CUDA and compute capability at least the minimum (a node without
// the label is skipped unless Options.AllowUnlabelled), the forced capacity
// type, and no shared or MIG-sliced nvidia.com/gpu for members that ask for
// whole GPUs unless allow-shared-gpus is "true". Across a gang,
// Requirements.GroupKey gives each node a uniform group: its values of the
// uniform keys (by default the GPU product and the driver's major.minor)
// and, under the default uniform capacity policy, its capacity type. A
// gang's GPU members all go to one group.
//
// # As node affinity
//
// Fleet.NodeAffinity writes the node-by-node rules as the required node
// affinity a careful user of a stock scheduler would write over the labels
// of a node set: In-lists over the version values present, Gt and Lt on
// whole-number labels, NotIn for the upgrade and sharing states present. A
// node matches it exactly when Admits admits the member (a property test
// holds them to that). What no node affinity can say, one product, driver
// or capacity type per gang, is listed as Inexpressible. The simulator
// gives it to its default-affinity baseline.
//
// # Who calls it
//
// The GPUFleet scheduler plugin (pkg/gpufleet) applies these rules:
//
//   - New: opts := fleet.OptionsFromArgs(args) from its GPUFleetArgs, once.
//   - PreFilter, for a pod whose Demand includes a GPU: ParseRequirements
//     of its PodGroup's annotations and its own. On error, an Event on the
//     object holding the bad value (AnnotationError.OnPod) and
//     UnschedulableAndUnresolvable: only an edit fixes it. When no node
//     admits the pod, Fleet.Explain's message is the status.
//   - Filter: Requirements.Admits on facts it caches per node (ReadNode,
//     read again only when the node's labels change; LabelErrors become
//     Events on the node).
//   - Uniform gangs: PreFilter leaves a placement.Grouper in the pod's
//     CycleState. The gang plugin, which runs the profile's PreFilter and
//     Filter plugins for the members it plans, asks the Grouper of the
//     gang's first GPU member for the groups (Requirements.GroupKey per
//     node, NewGrouping) and hands them to the planner, which plans inside
//     each group and never mixes them.
//   - Stand-ins: the gang plugin runs PreFilter for a copy of a member
//     without the claims whose devices it counts itself, and records the
//     member with contract.WithDemandPod; GPUFleet reads the demand of
//     contract.DemandPod, so the member's GPU rules bind the copy.
//
// The simulator judges placements with the same functions
// (pkg/simulator/metrics.CountFleet).
package fleet
