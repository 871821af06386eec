package fleet

import (
	"strings"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// CapacityType says whether a node's capacity may be reclaimed.
type CapacityType string

// Capacity types.
const (
	// CapacityOnDemand is capacity that is not reclaimed: on-demand,
	// reserved, capacity blocks, or a node no capacity label marks.
	CapacityOnDemand CapacityType = "on-demand"
	// CapacitySpot is capacity the provider may reclaim at short notice
	// (spot, preemptible).
	CapacitySpot CapacityType = "spot"
	// CapacityUnknown is a node whose capacity label holds a value no
	// convention below names. A gang that demands either type avoids it,
	// and a uniform gang never mixes it with the others.
	CapacityUnknown CapacityType = "unknown"
)

// capacityValues maps label values, lower-cased with '_' read as '-', to
// capacity types. One table serves every key, so a key added in the plugin
// args works as long as it uses one of these spellings:
//   - karpenter.sh/capacity-type: spot, on-demand, reserved;
//   - eks.amazonaws.com/capacityType: SPOT, ON_DEMAND, CAPACITY_BLOCK;
//   - cloud.google.com/gke-spot (and gke-preemptible): "true" on spot
//     nodes, absent elsewhere; "false" is read as on-demand;
//   - node.kubernetes.io/lifecycle: spot, normal (or on-demand).
var capacityValues = map[string]CapacityType{
	"spot":           CapacitySpot,
	"preemptible":    CapacitySpot,
	"true":           CapacitySpot,
	"on-demand":      CapacityOnDemand,
	"ondemand":       CapacityOnDemand,
	"normal":         CapacityOnDemand,
	"reserved":       CapacityOnDemand,
	"capacity-block": CapacityOnDemand,
	"false":          CapacityOnDemand,
}

// readCapacity returns the capacity type from the first of keys that is set
// on the node, and that key. A value no convention names gives
// CapacityUnknown and a problem. No key set gives CapacityOnDemand and "".
func readCapacity(labels map[string]string, keys []string, problems *[]*LabelError) (CapacityType, string) {
	for _, key := range keys {
		raw := labels[key]
		if raw == "" {
			continue
		}
		if t := readCapacityValue(raw); t != CapacityUnknown {
			return t, key
		}
		*problems = append(*problems, &LabelError{Label: key, Value: raw,
			Reason: "is no capacity type gpu-gang knows, so gangs that ask for spot or on-demand capacity avoid the node",
			Want:   "spot, preemptible or true for reclaimable capacity; on-demand, normal, reserved, capacity-block or false otherwise (any case, '_' for '-')"})
		return CapacityUnknown, key
	}
	return CapacityOnDemand, ""
}

// readCapacityValue reads one capacity label value; CapacityUnknown for a
// value no convention names.
func readCapacityValue(raw string) CapacityType {
	if t, ok := capacityValues[strings.ReplaceAll(strings.ToLower(raw), "_", "-")]; ok {
		return t
	}
	return CapacityUnknown
}

// CapacityLabelValue returns the value key conventionally holds on a node of
// capacity type t, and false when the convention is to leave the label off
// (cloud.google.com/gke-spot on an on-demand node). The simulator labels
// its nodes with it; ReadNode reads every value it returns back as t.
func CapacityLabelValue(key string, t CapacityType) (string, bool) {
	spot := t == CapacitySpot
	switch key {
	case scheduling.LabelGKESpot:
		if spot {
			return "true", true
		}
		return "", false
	case scheduling.LabelEKSCapacityType:
		if spot {
			return "SPOT", true
		}
		return "ON_DEMAND", true
	case scheduling.LabelNodeLifecycle:
		if spot {
			return "spot", true
		}
		return "normal", true
	}
	if spot {
		return "spot", true
	}
	return "on-demand", true
}
