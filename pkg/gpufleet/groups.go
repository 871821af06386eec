package gpufleet

import (
	"strings"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/fleet"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

var _ placement.Grouper = &cycleState{}

// NodeGroups implements placement.Grouper: the uniform groups of the gang
// the pod belongs to, by the requirements read in PreFilter. The gang
// plugin asks the state of the gang's first member that asks for GPUs, so
// the gang-wide parts of the requirements (uniform keys, a uniform capacity
// type) come from the PodGroup and that member, as pkg/fleet prescribes.
// It returns nil when the requirements, or the nodes, leave one group.
//
// The plugin keeps the last grouping per policy and reads again only the
// nodes that changed (groupmemo.go); each node's key comes from the node
// cache, which keeps the last one per node.
func (s *cycleState) NodeGroups(nodes []placement.Node, epoch uint64) *placement.Groups {
	if s.req.Uniform.IsNone() && s.req.Capacity != fleet.CapacityPolicyUniform {
		return nil
	}
	return s.groupings.groups(s, nodes, epoch)
}

// groupRule says what the nodes of one group share, and which annotations
// say so, for messages: "one nvidia.com/gpu.product, driver major.minor and
// capacity type (gpu-gang.x-k8s.io/uniform, gpu-gang.x-k8s.io/capacity-type)".
// Where some node's values were read from device attributes (fromDevices),
// it names the attributes that stand in for the labels.
func groupRule(r fleet.Requirements, fromDevices bool) string {
	var parts, set []string
	for _, k := range r.Uniform.Keys() {
		switch {
		case k == scheduling.UniformKeyDriverMajorMinor && fromDevices:
			k = "driver major.minor (or device attribute " + fleet.AttributeName(scheduling.DeviceAttributeDriverVersion) + ")"
		case k == scheduling.UniformKeyDriverMajorMinor:
			k = "driver major.minor"
		case k == scheduling.LabelGPUProduct && fromDevices:
			k += " (or device attribute " + fleet.AttributeName(scheduling.DeviceAttributeProductName) + ")"
		}
		parts = append(parts, k)
	}
	if len(parts) > 0 {
		set = append(set, scheduling.AnnotationUniform)
	}
	if r.Capacity == fleet.CapacityPolicyUniform {
		parts = append(parts, "capacity type")
		set = append(set, scheduling.AnnotationCapacityType)
	}
	list := parts[0]
	if n := len(parts); n > 1 {
		list = strings.Join(parts[:n-1], ", ") + " and " + parts[n-1]
	}
	return "one " + list + " (" + strings.Join(set, ", ") + ")"
}

// relaxGroups says which annotation values let the gang span groups.
func relaxGroups(r fleet.Requirements) string {
	var set []string
	if !r.Uniform.IsNone() {
		set = append(set, scheduling.AnnotationUniform+": "+scheduling.UniformNone)
	}
	if r.Capacity == fleet.CapacityPolicyUniform {
		set = append(set, scheduling.AnnotationCapacityType+": "+scheduling.CapacityTypeAny)
	}
	return strings.Join(set, " and ") + " on the PodGroup let the gang mix them"
}
