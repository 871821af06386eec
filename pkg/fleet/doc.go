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
// # Wiring it into the plugin
//
// The integrator calls it as follows (names of the plugin's own helpers are
// today's):
//
//   - New (plugin): opts := fleet.OptionsFromArgs(args), once.
//   - Per node-set generation: fl := fleet.New(req.Nodes, opts), cached under
//     req.NodeGeneration like the planner's tree (a Fleet reads only names
//     and labels). Record fl.Problems() as Warning Events on the nodes, once
//     per generation.
//   - planGang (PreFilter): gang, err := fleet.ParseRequirements(pg.Annotations,
//     chosen[0].Annotations) for the gang-wide parts. On error, an Event on
//     the PodGroup (or on the pod when AnnotationError.OnPod) and
//     UnschedulableAndUnresolvable: only an edit fixes it.
//   - buildRequest, per member: req, err := fleet.ParseRequirements(pg.Annotations,
//     pod.Annotations); d := fleet.DemandOf(resourcehelper.PodRequests(pod, ...));
//     Member.Eligible = fl.Eligible(req, d, eligibleNodes(...)).
//     Requirements and Demand are comparable: add them to the key members
//     share an eligibility slice under.
//   - Planner: g := fl.Group(gang). Unless g.Trivial(), the group is an extra,
//     outermost domain: plan the accelerated members inside each group
//     (g.Groups[k].Nodes), keep the best by the planner's usual best-fit
//     order, break ties by group order, and never mix groups. Members that
//     are not accelerated are not grouped.
//   - When a member has no eligible node, or no group holds the gang:
//     fl.Explain(req, d, base).Message names the required version, the best
//     in the cluster and the label it was read from, for the Event;
//     fl.DescribeGroups(g, eligible, 3) names the largest uniform groups. Label
//     changes can fix it (a driver upgrade finishing, GFD relabelling), so
//     the plugin requeues on node label updates.
//   - Filter, for pods the plan does not cover: fleet.ReadNode(node.Labels,
//     &opts) (or fl.Facts by node index) and Requirements.Admits.
package fleet
