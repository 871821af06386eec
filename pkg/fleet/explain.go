package fleet

import (
	"fmt"
	"strings"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// Explanation says how a member's requirements narrowed the nodes it could
// use, for an Event when none is left and for logs otherwise.
type Explanation struct {
	// Considered counts the nodes the member could use before these rules.
	Considered int
	// Admitted counts those the rules admit.
	Admitted int
	// Refused counts, per rule, the considered nodes that failed it first.
	Refused map[Rule]int
	// Unlabelled counts the nodes refused by RuleCUDA or
	// RuleComputeCapability for having no such label or device attribute.
	Unlabelled int
	// Message says it in a sentence, such as "needs CUDA >= 12.4; the best
	// in the cluster is 12.2 (nvidia.com/cuda.runtime-version.full) on 14
	// of 40 GPU nodes". Empty when the member requests no GPU or nothing
	// was refused.
	Message string
}

// Explain judges every node in base (nil for all) for a member and says
// what its requirements left. Versions "in the cluster" are taken over the
// whole fleet, not just base: an Event that says which versions exist
// helps its reader more than one limited to the nodes this member could
// have used.
func (fl *Fleet) Explain(r Requirements, d Demand, base []bool) Explanation {
	e := Explanation{Refused: map[Rule]int{}}
	unlabelled := map[Rule]int{}
	for i := range fl.facts {
		if base != nil && !base[i] {
			continue
		}
		e.Considered++
		ok, why := r.Admits(&fl.facts[i], d, &fl.opts)
		if ok {
			e.Admitted++
			continue
		}
		e.Refused[why.Rule]++
		if why.Unlabelled {
			e.Unlabelled++
			unlabelled[why.Rule]++
		}
	}
	if !d.Any() || e.Admitted == e.Considered {
		return e
	}
	var parts []string
	for _, rule := range Rules {
		n := e.Refused[rule]
		if n == 0 {
			continue
		}
		switch rule {
		case RuleDriverUpgrade:
			parts = append(parts, fmt.Sprintf("%s in a GPU driver upgrade (%s is not %s)",
				nodesAre(n), scheduling.LabelGPUDriverUpgradeState, scheduling.UpgradeStateDone))
		case RuleCUDA:
			parts = append(parts, fl.versionPart("CUDA", r.MinCUDA, func(f *NodeFacts) (Version, string) { return f.CUDA, f.CUDALabel },
				CUDALabels(), scheduling.DeviceAttributeCUDADriverVersion, unlabelled[RuleCUDA]))
		case RuleComputeCapability:
			parts = append(parts, fl.versionPart("compute capability", r.MinCompute, func(f *NodeFacts) (Version, string) { return f.Compute, f.ComputeLabel },
				ComputeLabels(), scheduling.DeviceAttributeCUDAComputeCapability, unlabelled[RuleComputeCapability]))
		case RuleCapacityType:
			parts = append(parts, fmt.Sprintf("needs %s capacity (%s); %s not %s, and the cluster has %d %s nodes",
				r.Capacity, scheduling.AnnotationCapacityType, nodesAre(n), r.Capacity, fl.countCapacity(CapacityType(r.Capacity)), r.Capacity))
		case RuleSharedGPU:
			parts = append(parts, fmt.Sprintf("asks for whole GPUs (%s) and %s GPUs shared between pods or cut into MIG slices; set %s: \"true\" to allow them",
				scheduling.ResourceGPU, nodesHave(n), scheduling.AnnotationAllowSharedGPUs))
		}
	}
	head := fmt.Sprintf("%d of %d nodes admit the member's GPU requirements", e.Admitted, e.Considered)
	if e.Admitted == 0 {
		head = fmt.Sprintf("none of %d nodes admits the member's GPU requirements", e.Considered)
	}
	e.Message = head + ": " + strings.Join(parts, "; ")
	return e
}

// versionPart explains a version rule: what the member needs, the best
// version in the cluster, the label or device attribute it was read from
// and on how many GPU nodes; then how many nodes were refused for saying
// no version at all.
func (fl *Fleet) versionPart(what string, need Version, get func(*NodeFacts) (Version, string), labels, attr string, unlabelled int) string {
	var best Version
	var bestLabel string
	count := 0
	for i := range fl.facts {
		v, label := get(&fl.facts[i])
		if v.IsZero() {
			continue
		}
		switch c := v.Compare(best); {
		case best.IsZero() || c > 0:
			best, bestLabel, count = v, label, 1
		case c == 0:
			count++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "needs %s >= %s; ", what, need)
	if best.IsZero() {
		fmt.Fprintf(&b, "no node in the cluster says its %s (labels %s; device attribute %s)", what, labels, AttributeName(attr))
	} else {
		fmt.Fprintf(&b, "the best in the cluster is %s (%s) on %d of %d GPU nodes", best, bestLabel, count, fl.gpuNodes)
	}
	if unlabelled > 0 {
		fmt.Fprintf(&b, "; %s no %s label or device attribute (%s)", nodesHave(unlabelled), what, fl.opts.unlabelledArg())
	}
	return b.String()
}

func (fl *Fleet) countCapacity(t CapacityType) int {
	n := 0
	for i := range fl.facts {
		if fl.facts[i].Capacity == t {
			n++
		}
	}
	return n
}

func nodesAre(n int) string {
	if n == 1 {
		return "1 node is"
	}
	return fmt.Sprintf("%d nodes are", n)
}

func nodesHave(n int) string {
	if n == 1 {
		return "1 node has"
	}
	return fmt.Sprintf("%d nodes have", n)
}
