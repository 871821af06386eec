package fleet

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// CapacityPolicy is a gang's capacity-type policy
// (gpu-gang.x-k8s.io/capacity-type).
type CapacityPolicy string

// Capacity policies.
const (
	// CapacityPolicyUniform (the default) puts a gang's GPU members on one
	// capacity type, either one.
	CapacityPolicyUniform CapacityPolicy = scheduling.CapacityTypeUniform
	// CapacityPolicyOnDemand keeps GPU members off spot capacity.
	CapacityPolicyOnDemand CapacityPolicy = scheduling.CapacityTypeOnDemand
	// CapacityPolicySpot puts GPU members on spot capacity only.
	CapacityPolicySpot CapacityPolicy = scheduling.CapacityTypeSpot
	// CapacityPolicyAny ignores capacity type.
	CapacityPolicyAny CapacityPolicy = scheduling.CapacityTypeAny
)

// UniformKeys are the node label keys whose values all GPU members of a
// gang must share (gpu-gang.x-k8s.io/uniform). The key
// scheduling.UniformKeyDriverMajorMinor stands for the driver's major.minor.
// The zero value is "none". UniformKeys is comparable, so Requirements can
// key a map.
type UniformKeys struct {
	// list holds the keys joined by commas, which no label key contains.
	list string
}

// NewUniformKeys returns the keys, in the order given, without duplicates.
// It does not validate them; ParseRequirements does.
func NewUniformKeys(keys ...string) UniformKeys {
	var kept []string
	for _, k := range keys {
		if k != "" && !contains(kept, k) {
			kept = append(kept, k)
		}
	}
	return UniformKeys{list: strings.Join(kept, ",")}
}

// DefaultUniformKeys are the keys of a gang that sets no
// gpu-gang.x-k8s.io/uniform: the GPU product and the driver's major.minor.
func DefaultUniformKeys() UniformKeys {
	return NewUniformKeys(scheduling.LabelGPUProduct, scheduling.UniformKeyDriverMajorMinor)
}

// Keys returns the keys in order; nil for none.
func (u UniformKeys) Keys() []string {
	if u.list == "" {
		return nil
	}
	return strings.Split(u.list, ",")
}

// IsNone reports whether there are no keys.
func (u UniformKeys) IsNone() bool { return u.list == "" }

// String renders the keys as the annotation would: "none" or the list.
func (u UniformKeys) String() string {
	if u.list == "" {
		return scheduling.UniformNone
	}
	return u.list
}

// Requirements are what a gang, or one of its members, asks of the GPU
// nodes it runs on. They bind only members that request GPUs (see Demand).
// MinCUDA, MinCompute, AllowSharedGPUs and a spot or on-demand Capacity
// judge nodes one by one (Admits); Uniform and a uniform Capacity judge a
// gang's nodes together (GroupKey). The zero value asks nothing at all;
// DefaultRequirements is what a gang that sets no annotation asks.
// Requirements is comparable.
type Requirements struct {
	// MinCUDA is the lowest CUDA version a node's driver must support;
	// zero for none.
	MinCUDA Version
	// MinCompute is the lowest compute capability; zero for none.
	MinCompute Version
	// Uniform are the label keys all GPU members' nodes share values of.
	Uniform UniformKeys
	// Capacity is the capacity-type policy.
	Capacity CapacityPolicy
	// AllowSharedGPUs lets members that request whole GPUs use nodes
	// whose nvidia.com/gpu is shared or a MIG slice.
	AllowSharedGPUs bool
}

// DefaultRequirements are those of a gang with no fleet annotations: no
// minimum version, uniform product and driver, uniform capacity type, no
// shared GPUs for whole-GPU members.
func DefaultRequirements() Requirements {
	return Requirements{Uniform: DefaultUniformKeys(), Capacity: CapacityPolicyUniform}
}

// ParseRequirements reads requirements from a PodGroup's annotations and a
// pod's. For each annotation the pod's value, when set, wins. Either map may
// be nil. Unset annotations keep DefaultRequirements. Every invalid value is
// reported, as *AnnotationError values joined into one error; the
// requirements returned alongside keep the default for those annotations.
//
// The plugin reads the gang-wide parts (Uniform and a uniform Capacity)
// from the PodGroup and its first member in rank order, and the per-node
// parts from each member with the PodGroup.
func ParseRequirements(group, pod map[string]string) (Requirements, error) {
	r := DefaultRequirements()
	var errs []error
	lookup := func(key string) (string, bool, bool) {
		if v, ok := pod[key]; ok {
			return v, true, true
		}
		v, ok := group[key]
		return v, false, ok
	}
	bad := func(key, value string, onPod bool, reason, want string) {
		errs = append(errs, &AnnotationError{Annotation: key, Value: value, OnPod: onPod, Reason: reason, Want: want})
	}

	if v, onPod, ok := lookup(scheduling.AnnotationMinCUDA); ok {
		const want = `a CUDA version major.minor such as "12.4" (drivers report the CUDA version they support to the minor)`
		if ver, reason := parseMinVersion(v, 2); reason != "" {
			bad(scheduling.AnnotationMinCUDA, v, onPod, reason, want)
		} else {
			r.MinCUDA = ver
		}
	}
	if v, onPod, ok := lookup(scheduling.AnnotationMinComputeCapability); ok {
		const want = `a compute capability major.minor such as "9.0"`
		if ver, reason := parseMinVersion(v, 2); reason != "" {
			bad(scheduling.AnnotationMinComputeCapability, v, onPod, reason, want)
		} else {
			r.MinCompute = ver
		}
	}
	if v, onPod, ok := lookup(scheduling.AnnotationUniform); ok {
		if u, reason := parseUniform(v); reason != "" {
			bad(scheduling.AnnotationUniform, v, onPod, reason,
				fmt.Sprintf("%q, or node label keys separated by commas, such as %q (%s stands for the driver's major.minor)",
					scheduling.UniformNone, scheduling.LabelGPUProduct+","+scheduling.UniformKeyDriverMajorMinor, scheduling.UniformKeyDriverMajorMinor))
		} else {
			r.Uniform = u
		}
	}
	if v, onPod, ok := lookup(scheduling.AnnotationCapacityType); ok {
		switch p := CapacityPolicy(v); p {
		case CapacityPolicyUniform, CapacityPolicyOnDemand, CapacityPolicySpot, CapacityPolicyAny:
			r.Capacity = p
		default:
			bad(scheduling.AnnotationCapacityType, v, onPod, "is not a capacity-type policy",
				quoteList(string(CapacityPolicyOnDemand), string(CapacityPolicySpot), string(CapacityPolicyUniform), string(CapacityPolicyAny))+
					" ("+string(CapacityPolicyUniform)+" is the default)")
		}
	}
	if v, onPod, ok := lookup(scheduling.AnnotationAllowSharedGPUs); ok {
		switch strings.ToLower(v) {
		case "true":
			r.AllowSharedGPUs = true
		case "false":
			r.AllowSharedGPUs = false
		default:
			bad(scheduling.AnnotationAllowSharedGPUs, v, onPod, "is not a boolean", quoteList("true", "false"))
		}
	}
	return r, errors.Join(errs...)
}

// AnnotationKeys lists the annotations ParseRequirements reads, for callers
// that must tell apart pods whose requirements may differ (the gang plugin
// shares one Filter pass among members that only differ elsewhere).
func AnnotationKeys() []string {
	return []string{
		scheduling.AnnotationMinCUDA, scheduling.AnnotationMinComputeCapability, scheduling.AnnotationUniform,
		scheduling.AnnotationCapacityType, scheduling.AnnotationAllowSharedGPUs,
	}
}

// parseMinVersion reads a minimum version of at most maxParts components;
// the reason is "" when it is fine.
func parseMinVersion(s string, maxParts int) (Version, string) {
	v, err := ParseVersion(s)
	if err != nil {
		return Version{}, "is not a version: it " + err.Error()
	}
	if v.Len() > maxParts {
		return Version{}, fmt.Sprintf("has %d components", v.Len())
	}
	return v, ""
}

// parseUniform reads the uniform annotation; the reason is "" when it is
// fine.
func parseUniform(s string) (UniformKeys, string) {
	if s == scheduling.UniformNone {
		return UniformKeys{}, ""
	}
	if strings.TrimSpace(s) == "" {
		return UniformKeys{}, "is empty"
	}
	items := strings.Split(s, ",")
	keys := make([]string, 0, len(items))
	for i, item := range items {
		key := strings.TrimSpace(item)
		if key == "" {
			return UniformKeys{}, fmt.Sprintf("has an empty key at position %d", i+1)
		}
		if key == scheduling.UniformNone {
			return UniformKeys{}, fmt.Sprintf("mixes %q with label keys", scheduling.UniformNone)
		}
		if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
			return UniformKeys{}, fmt.Sprintf("has %q, which is not a label key: %s", key, strings.Join(msgs, "; "))
		}
		keys = append(keys, key)
	}
	return NewUniformKeys(keys...), ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
