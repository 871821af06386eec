package fleet

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// randomLabels draws a node's GPU labels from the spellings fleets write,
// current and deprecated label sets that may disagree, unreadable values,
// and every capacity label. It never writes a readable major beside an
// unreadable minor: NodeAffinity documents that one as beyond a selector.
func randomLabels(rng *rand.Rand) map[string]string {
	m := map[string]string{}
	pick := func(key string, values ...string) {
		if v := values[rng.IntN(len(values))]; v != "" {
			m[key] = v
		}
	}
	pick(scheduling.LabelCUDARuntimeVersionFull, "", "", "12.4", "12.2", "12.10", "11.8", "13.0", "12", "bad")
	parts := func(major, minor string) {
		pick(major, "", "", "11", "12", "13", "012", "x")
		if v, ok := m[major]; ok && v != "x" {
			pick(minor, "", "0", "2", "4", "9", "10")
		} else {
			pick(minor, "", "4", "y")
		}
	}
	parts(scheduling.LabelCUDARuntimeVersionMajor, scheduling.LabelCUDARuntimeVersionMinor)
	parts(scheduling.LabelCUDARuntimeMajor, scheduling.LabelCUDARuntimeMinor)
	pick(scheduling.LabelGPUComputeMajor, "", "7", "8", "9", "10", "z")
	if v, ok := m[scheduling.LabelGPUComputeMajor]; ok && v != "z" {
		pick(scheduling.LabelGPUComputeMinor, "", "0", "6", "9")
	}
	pick(scheduling.LabelGPUDriverUpgradeState, "", "", scheduling.UpgradeStateDone, "upgrade-required", "drain-required")
	pick(scheduling.LabelKarpenterCapacityType, "", "", "spot", "on-demand", "reserved", "weird")
	pick(scheduling.LabelGKESpot, "", "", "true", "false")
	pick(scheduling.LabelEKSCapacityType, "", "", "SPOT", "ON_DEMAND", "CAPACITY_BLOCK")
	pick(scheduling.LabelNodeLifecycle, "", "", "spot", "normal")
	pick(scheduling.LabelGPUSharingStrategy, "", "", scheduling.SharingStrategyNone, scheduling.SharingStrategyTimeSlicing, scheduling.SharingStrategyMPS)
	pick(scheduling.LabelMIGStrategy, "", "", scheduling.MIGStrategyNone, scheduling.MIGStrategySingle, scheduling.MIGStrategyMixed)
	pick(scheduling.LabelGPUPresent, "", "true")
	return m
}

func randomRequirements(rng *rand.Rand) (Requirements, Demand) {
	r := DefaultRequirements()
	version := func(choices ...string) Version {
		s := choices[rng.IntN(len(choices))]
		if s == "" {
			return Version{}
		}
		v, err := ParseVersion(s)
		if err != nil {
			panic(err)
		}
		return v
	}
	r.MinCUDA = version("", "12.4", "12.0", "12", "11.8", "13.1", "12.10")
	r.MinCompute = version("", "9.0", "8.0", "8.6", "9", "10.1")
	r.Capacity = []CapacityPolicy{CapacityPolicyUniform, CapacityPolicyAny, CapacityPolicySpot, CapacityPolicyOnDemand}[rng.IntN(4)]
	r.AllowSharedGPUs = rng.IntN(3) == 0
	if rng.IntN(3) == 0 {
		r.Uniform = UniformKeys{}
	}
	d := []Demand{{Whole: true}, {Shared: true}, {MIG: true}, {}}[rng.IntN(4)]
	return r, d
}

// TestNodeAffinityMatchesAdmits is the translation's property: on the nodes
// it was written for, a node matches the affinity, as kube-scheduler's own
// matcher reads it, exactly when Admits admits the member there.
func TestNodeAffinityMatchesAdmits(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 7))
	for trial := range 400 {
		nodes := make([]placement.Node, 1+rng.IntN(16))
		for i := range nodes {
			nodes[i] = placement.Node{Name: "n" + strconv.Itoa(i), Labels: randomLabels(rng)}
		}
		opts := DefaultOptions()
		opts.AllowUnlabelled = rng.IntN(4) == 0
		fl := New(nodes, opts)
		r, d := randomRequirements(rng)
		a := fl.NodeAffinity(r, d)
		for i, n := range nodes {
			want, why := fl.Admits(i, r, d)
			got := true
			if a.Required != nil {
				var err error
				got, err = corev1helpers.MatchNodeSelectorTerms(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}}, a.Required)
				if err != nil {
					t.Fatalf("trial %d: matching node %s: %v", trial, n.Name, err)
				}
			}
			if got != want {
				t.Fatalf("trial %d: requirements %+v, demand %+v, unlabelled allowed %v, node labels %v:\nAdmits says %v (%s), the affinity says %v:\n%s",
					trial, r, d, opts.AllowUnlabelled, n.Labels, want, why.Reason, got, describeSelector(a.Required))
			}
		}
	}
}

func describeSelector(s *v1.NodeSelector) string {
	if s == nil {
		return "(none)"
	}
	out := ""
	for i, term := range s.NodeSelectorTerms {
		out += fmt.Sprintf("term %d:", i)
		for _, e := range term.MatchExpressions {
			out += fmt.Sprintf(" %s %s %v;", e.Key, e.Operator, e.Values)
		}
		out += "\n"
	}
	return out
}

func TestNodeAffinityInexpressible(t *testing.T) {
	fl := New([]placement.Node{{Name: "a", Labels: gfd("12.4", "550.54.15", "9.0")}}, DefaultOptions())
	for _, tc := range []struct {
		name string
		r    Requirements
		want []Inexpressible
	}{
		{"defaults", DefaultRequirements(), []Inexpressible{InexpressibleUniform, InexpressibleUniformCapacity}},
		{"spot, no uniform keys", Requirements{Capacity: CapacityPolicySpot}, nil},
		{"any capacity", Requirements{Uniform: DefaultUniformKeys(), Capacity: CapacityPolicyAny}, []Inexpressible{InexpressibleUniform}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, fl.NodeAffinity(tc.r, Demand{Whole: true}).Inexpressible); diff != "" {
				t.Errorf("Inexpressible (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestNodeAffinityNoNodePasses: when no node can pass a rule, the affinity
// still is a valid selector, and matches no node.
func TestNodeAffinityNoNodePasses(t *testing.T) {
	labels := gfd("12.2", "535.104.05", "8.0")
	fl := New([]placement.Node{{Name: "a", Labels: labels}}, DefaultOptions())
	a := fl.NodeAffinity(Requirements{MinCUDA: mustVersion(t, "12.4")}, Demand{Whole: true})
	if a.Required == nil || len(a.Required.NodeSelectorTerms) == 0 {
		t.Fatalf("want a selector that matches nothing, got %s", describeSelector(a.Required))
	}
	ok, err := corev1helpers.MatchNodeSelectorTerms(&v1.Node{ObjectMeta: metav1.ObjectMeta{Labels: labels}}, a.Required)
	if err != nil || ok {
		t.Errorf("the node matches (%v, %v); want no match", ok, err)
	}
}

func mustVersion(t *testing.T, s string) Version {
	t.Helper()
	v, err := ParseVersion(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
