package fleet

import (
	"fmt"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// Rule names one of the node-by-node rules, for reasons and counts.
type Rule string

// Rules, in the order Admits checks them.
const (
	// RuleDriverUpgrade keeps GPU members off nodes whose driver the GPU
	// Operator is upgrading.
	RuleDriverUpgrade Rule = "DriverUpgrade"
	// RuleCUDA keeps them off nodes whose driver supports an older CUDA
	// than the member needs, or whose labels and devices do not say
	// (unlabelledNodes: Skip).
	RuleCUDA Rule = "CUDA"
	// RuleComputeCapability likewise for the compute capability.
	RuleComputeCapability Rule = "ComputeCapability"
	// RuleCapacityType keeps members of a gang that demands spot (or
	// on-demand) capacity off other nodes.
	RuleCapacityType Rule = "CapacityType"
	// RuleSharedGPU keeps members that request whole GPUs off nodes whose
	// nvidia.com/gpu is shared or a MIG slice, unless the gang allows it.
	RuleSharedGPU Rule = "SharedGPU"
)

// Rules lists every rule in the order Admits checks them.
var Rules = []Rule{RuleDriverUpgrade, RuleCUDA, RuleComputeCapability, RuleCapacityType, RuleSharedGPU}

// Refusal says why a node does not admit a member.
type Refusal struct {
	// Rule is the first rule the node fails.
	Rule Rule
	// Unlabelled is set when the node fails RuleCUDA or
	// RuleComputeCapability because neither a label nor a device says its
	// version at all.
	Unlabelled bool
	// Reason explains it for people, naming the labels (or device
	// attributes) and values read, such as "CUDA 12.2
	// (nvidia.com/cuda.runtime-version.full) is below the 12.4 the member
	// needs".
	Reason string
}

// Admits reports whether a member with demand d and requirements r may run
// on a node with facts f, and if not, why. Members that request no NVIDIA
// GPU are admitted everywhere. The gang-wide rules (Uniform, a uniform
// Capacity) are not checked here: see GroupKey.
func (r Requirements) Admits(f *NodeFacts, d Demand, opts *Options) (bool, Refusal) {
	if !d.Any() {
		return true, Refusal{}
	}
	if f.Upgrading() {
		return false, Refusal{Rule: RuleDriverUpgrade, Reason: fmt.Sprintf(
			"the GPU Operator is upgrading the node's driver (%s=%s)", scheduling.LabelGPUDriverUpgradeState, f.UpgradeState)}
	}
	allowUnlabelled := opts != nil && opts.AllowUnlabelled
	if !r.MinCUDA.IsZero() {
		switch {
		case !f.HasCUDA() && !allowUnlabelled:
			return false, Refusal{Rule: RuleCUDA, Unlabelled: true, Reason: fmt.Sprintf(
				"the member needs CUDA >= %s and the node says no CUDA version: no label (%s), no device attribute %s (%s)",
				r.MinCUDA, CUDALabels(), AttributeName(scheduling.DeviceAttributeCUDADriverVersion), opts.unlabelledArg())}
		case f.HasCUDA() && !f.CUDA.AtLeast(r.MinCUDA):
			return false, Refusal{Rule: RuleCUDA, Reason: fmt.Sprintf(
				"the node's driver supports CUDA %s (%s), below the %s the member needs", f.CUDA, f.CUDALabel, r.MinCUDA)}
		}
	}
	if !r.MinCompute.IsZero() {
		switch {
		case !f.HasCompute() && !allowUnlabelled:
			return false, Refusal{Rule: RuleComputeCapability, Unlabelled: true, Reason: fmt.Sprintf(
				"the member needs compute capability >= %s and the node says no compute capability: no labels (%s), no device attribute %s (%s)",
				r.MinCompute, ComputeLabels(), AttributeName(scheduling.DeviceAttributeCUDAComputeCapability), opts.unlabelledArg())}
		case f.HasCompute() && !f.Compute.AtLeast(r.MinCompute):
			return false, Refusal{Rule: RuleComputeCapability, Reason: fmt.Sprintf(
				"the node's GPUs have compute capability %s (%s), below the %s the member needs", f.Compute, f.ComputeLabel, r.MinCompute)}
		}
	}
	switch r.Capacity {
	case CapacityPolicySpot, CapacityPolicyOnDemand:
		if want := CapacityType(r.Capacity); f.Capacity != want {
			return false, Refusal{Rule: RuleCapacityType, Reason: fmt.Sprintf(
				"the gang asks for %s capacity (%s) and the node is %s", want, scheduling.AnnotationCapacityType, describeCapacity(f))}
		}
	}
	if d.Whole && !r.AllowSharedGPUs {
		if shared, how := f.SharedGPUs(); shared {
			return false, Refusal{Rule: RuleSharedGPU, Reason: fmt.Sprintf(
				"the member asks for whole GPUs (%s) and the node's are shared: %s; set %s: \"true\" to allow it",
				scheduling.ResourceGPU, how, scheduling.AnnotationAllowSharedGPUs)}
		}
	}
	return true, Refusal{}
}

// describeCapacity says what a node's capacity type is and where it was
// read, such as "spot (karpenter.sh/capacity-type)".
func describeCapacity(f *NodeFacts) string {
	if f.CapacityLabel == "" {
		return string(f.Capacity) + " (no capacity label)"
	}
	return fmt.Sprintf("%s (%s)", f.Capacity, f.CapacityLabel)
}
