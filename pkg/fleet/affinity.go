package fleet

import (
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// Inexpressible names a part of a gang's policy that required node
// affinity cannot state, for reports that compare gpu-gang with a stock
// scheduler given NodeAffinity.
type Inexpressible string

// The parts of a policy node affinity cannot state.
const (
	// InexpressibleUniform: a gang's GPU members share one value of each
	// uniform key (by default one GPU product and one driver major.minor).
	// Node affinity judges each pod alone; it can pick one value for the
	// user, never "whichever the first member got".
	InexpressibleUniform Inexpressible = "one product/driver per gang (uniform)"
	// InexpressibleUniformCapacity: one capacity type per gang, either one.
	InexpressibleUniformCapacity Inexpressible = "one capacity type per gang (capacity-type: uniform)"
	// InexpressibleDeviceFacts: a node whose CUDA version, compute
	// capability or product only its DRA devices state has no label to
	// select; affinity reads labels.
	InexpressibleDeviceFacts Inexpressible = "versions that only DRA device attributes state"
)

// InexpressibleRules lists every Inexpressible, in the order NodeAffinity
// reports them.
var InexpressibleRules = []Inexpressible{InexpressibleUniform, InexpressibleUniformCapacity, InexpressibleDeviceFacts}

// Affinity is a gang's node-by-node policy as the required node affinity a
// careful user of a stock scheduler would write for it.
type Affinity struct {
	// Required is the node selector, nil when no node-by-node rule
	// constrains the member. On the nodes it was built from, a node
	// matches it exactly when Admits admits the member there, except on
	// nodes whose labels are set but unreadable in a way a selector cannot
	// see (a CUDA major readable and its minor not) and nodes whose facts
	// come from devices (InexpressibleDeviceFacts).
	Required *v1.NodeSelector
	// Inexpressible lists, in a fixed order, the rules of the policy that
	// no node affinity states.
	Inexpressible []Inexpressible
}

// NodeAffinity translates requirements r of a member with demand d into
// required node affinity over this fleet's nodes, reading the labels the
// fleet reads, in the order it reads them:
//
//   - a driver upgrade: the upgrade-state label NotIn the states present
//     other than upgrade-done;
//   - a minimum CUDA version or compute capability: one alternative per
//     label source, in read order, each requiring the earlier sources
//     unset (NotIn every readable value present): a whole-version label In
//     the values present that reach the minimum; major and minor labels
//     as numbers (Gt on the major, or the major equal through Gt and Lt and
//     Gt on the minor), which is exact for any value;
//   - spot or on-demand: per capacity label, in order, the values present
//     that read as that type, the earlier labels unset; on-demand also
//     matches a node no capacity label is set on;
//   - whole GPUs: the sharing-strategy label NotIn the sharing strategies
//     present, and the MIG strategy NotIn single where a node has it.
//
// Values "present" are those of the fleet's nodes: a label value no node
// had when the affinity was written is not listed, as a user reading the
// cluster would not list it either. Alternatives of different rules are
// crossed into node selector terms (terms are ORed, requirements inside a
// term ANDed).
func (fl *Fleet) NodeAffinity(r Requirements, d Demand) Affinity {
	var a Affinity
	if !r.Uniform.IsNone() {
		a.Inexpressible = append(a.Inexpressible, InexpressibleUniform)
	}
	if r.Capacity == CapacityPolicyUniform {
		a.Inexpressible = append(a.Inexpressible, InexpressibleUniformCapacity)
	}
	if !d.Any() {
		return a
	}
	if fl.anyFactsFromDevices() {
		a.Inexpressible = append(a.Inexpressible, InexpressibleDeviceFacts)
	}
	var rules [][]term
	if states := fl.presentValues(scheduling.LabelGPUDriverUpgradeState, func(v string) bool {
		return v != scheduling.UpgradeStateDone
	}); len(states) > 0 {
		rules = append(rules, []term{{notIn(scheduling.LabelGPUDriverUpgradeState, states)}})
	}
	allowUnlabelled := fl.opts.AllowUnlabelled
	if !r.MinCUDA.IsZero() {
		rules = append(rules, fl.versionTerms(cudaSources, r.MinCUDA, allowUnlabelled))
	}
	if !r.MinCompute.IsZero() {
		rules = append(rules, fl.versionTerms(computeSources, r.MinCompute, allowUnlabelled))
	}
	switch r.Capacity {
	case CapacityPolicySpot, CapacityPolicyOnDemand:
		rules = append(rules, fl.capacityTerms(CapacityType(r.Capacity)))
	}
	if d.Whole && !r.AllowSharedGPUs {
		var t term
		if shared := fl.presentValues(scheduling.LabelGPUSharingStrategy, func(v string) bool { return v != scheduling.SharingStrategyNone }); len(shared) > 0 {
			t = append(t, notIn(scheduling.LabelGPUSharingStrategy, shared))
		}
		if single := fl.presentValues(scheduling.LabelMIGStrategy, func(v string) bool { return v == scheduling.MIGStrategySingle }); len(single) > 0 {
			t = append(t, notIn(scheduling.LabelMIGStrategy, single))
		}
		if len(t) > 0 {
			rules = append(rules, []term{t})
		}
	}
	if len(rules) == 0 {
		return a
	}
	terms := []term{nil}
	for _, alternatives := range rules {
		var next []term
		for _, t := range terms {
			for _, alt := range alternatives {
				next = append(next, append(slices.Clone(t), alt...))
			}
		}
		terms = next
	}
	if len(terms) == 0 {
		// No node passes some rule. An empty list of terms is invalid, so
		// one term that no node matches says so.
		terms = []term{{
			{Key: scheduling.LabelGPUPresent, Operator: v1.NodeSelectorOpExists},
			{Key: scheduling.LabelGPUPresent, Operator: v1.NodeSelectorOpDoesNotExist},
		}}
	}
	a.Required = &v1.NodeSelector{NodeSelectorTerms: make([]v1.NodeSelectorTerm, 0, len(terms))}
	for _, t := range terms {
		a.Required.NodeSelectorTerms = append(a.Required.NodeSelectorTerms, v1.NodeSelectorTerm{MatchExpressions: t})
	}
	return a
}

// term is the requirements of one node selector term, ANDed.
type term []v1.NodeSelectorRequirement

// versionTerms are the alternatives under which a node's version, read from
// sources in order, is at least min.
func (fl *Fleet) versionTerms(sources []versionSource, min Version, allowUnlabelled bool) []term {
	var out []term
	var unused term // earlier sources unset or unreadable
	for _, s := range sources {
		for _, pass := range fl.sourcePasses(s, min) {
			out = append(out, append(slices.Clone(unused), pass...))
		}
		if readable := fl.readableValues(s); len(readable) > 0 {
			unused = append(unused, notIn(s.first(), readable))
		}
	}
	if allowUnlabelled {
		out = append(out, unused)
	}
	return out
}

// sourcePasses are the alternatives under which source s holds a version of
// at least min.
func (fl *Fleet) sourcePasses(s versionSource, min Version) []term {
	if s.full != "" {
		passing := fl.presentValues(s.full, func(v string) bool {
			ver, err := ParseVersion(v)
			return err == nil && ver.AtLeast(min)
		})
		if len(passing) == 0 {
			return nil
		}
		return []term{{in(s.full, passing)}}
	}
	// Components as whole numbers, compared as Version compares them:
	// above the minimum's at some component and equal before it, or equal
	// down to a component past which the minimum is all zeros. A missing
	// component counts as 0 (readVersion), and Gt on a missing label fails,
	// which is right wherever the minimum's component is above 0.
	var out []term
	var equal term
	for i, key := range s.parts {
		want := int64(min.Part(i))
		restZero := true
		for j := i + 1; j < maxVersionParts; j++ {
			restZero = restZero && min.Part(j) == 0
		}
		if restZero {
			return append(out, append(slices.Clone(equal), gt(key, want-1)))
		}
		if i == len(s.parts)-1 {
			// The minimum has more components than the labels: only a
			// higher last component passes.
			return append(out, append(slices.Clone(equal), gt(key, want)))
		}
		out = append(out, append(slices.Clone(equal), gt(key, want)))
		equal = append(equal, gt(key, want-1), lt(key, want+1))
	}
	return out
}

// first is the label whose presence makes the source the one read.
func (s versionSource) first() string {
	if s.full != "" {
		return s.full
	}
	return s.parts[0]
}

// readableValues are the values of s.first() present on the fleet's nodes
// that readVersion would read as a version of that source.
func (fl *Fleet) readableValues(s versionSource) []string {
	return fl.presentValues(s.first(), func(v string) bool {
		if s.full != "" {
			_, err := ParseVersion(v)
			return err == nil
		}
		_, err := strconv.ParseUint(v, 10, 32)
		return err == nil && len(v) <= maxPartDigits
	})
}

// capacityTerms are the alternatives under which a node reads as capacity
// type want.
func (fl *Fleet) capacityTerms(want CapacityType) []term {
	var out []term
	var unset term
	for _, key := range fl.opts.capacityLabels() {
		matching := fl.presentValues(key, func(v string) bool { return readCapacityValue(v) == want })
		if len(matching) > 0 {
			out = append(out, append(slices.Clone(unset), in(key, matching)))
		}
		if all := fl.presentValues(key, func(string) bool { return true }); len(all) > 0 {
			unset = append(unset, notIn(key, all))
		}
	}
	if want == CapacityOnDemand {
		out = append(out, unset)
	}
	return out
}

// presentValues returns the distinct non-empty values of key on the fleet's
// nodes that keep accepts, sorted.
func (fl *Fleet) presentValues(key string, keep func(string) bool) []string {
	var out []string
	for _, labels := range fl.labels {
		if v := labels[key]; v != "" && keep(v) && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

func (fl *Fleet) anyFactsFromDevices() bool {
	for i := range fl.facts {
		if fl.facts[i].fromDevices != 0 {
			return true
		}
	}
	return false
}

func in(key string, values []string) v1.NodeSelectorRequirement {
	return v1.NodeSelectorRequirement{Key: key, Operator: v1.NodeSelectorOpIn, Values: values}
}

func notIn(key string, values []string) v1.NodeSelectorRequirement {
	return v1.NodeSelectorRequirement{Key: key, Operator: v1.NodeSelectorOpNotIn, Values: values}
}

func gt(key string, n int64) v1.NodeSelectorRequirement {
	return v1.NodeSelectorRequirement{Key: key, Operator: v1.NodeSelectorOpGt, Values: []string{strconv.FormatInt(n, 10)}}
}

func lt(key string, n int64) v1.NodeSelectorRequirement {
	return v1.NodeSelectorRequirement{Key: key, Operator: v1.NodeSelectorOpLt, Values: []string{strconv.FormatInt(n, 10)}}
}
