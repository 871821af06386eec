package fleet

import (
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Fleet is the GPU facts of one node set, in the node set's order. It
// depends only on node names and labels, so the plugin builds it once per
// node-set generation (placement.Request.NodeGeneration) and shares it
// read-only between scheduling cycles; nothing derived from free capacity
// belongs here.
type Fleet struct {
	opts Options
	// names and labels are the nodes'; labels are shared with the caller
	// and only read.
	names  []string
	labels []map[string]string
	// facts[i] are node i's facts; written once by New.
	facts []NodeFacts
	// gpuNodes counts nodes with facts.GPU.
	gpuNodes int
}

// New reads the facts of nodes. Only names and labels are read.
func New(nodes []placement.Node, opts Options) *Fleet {
	fl := &Fleet{
		opts:   opts,
		names:  make([]string, len(nodes)),
		labels: make([]map[string]string, len(nodes)),
		facts:  make([]NodeFacts, len(nodes)),
	}
	for i := range nodes {
		fl.names[i] = nodes[i].Name
		fl.labels[i] = nodes[i].Labels
		fl.facts[i] = ReadNode(nodes[i].Labels, &fl.opts)
		if fl.facts[i].GPU {
			fl.gpuNodes++
		}
	}
	return fl
}

// Len is the number of nodes.
func (fl *Fleet) Len() int { return len(fl.facts) }

// Name is node i's name.
func (fl *Fleet) Name(i int) string { return fl.names[i] }

// Facts are node i's facts. Callers must not modify them.
func (fl *Fleet) Facts(i int) *NodeFacts { return &fl.facts[i] }

// GPUNodes counts the nodes GPU feature discovery or the GPU Operator
// labelled.
func (fl *Fleet) GPUNodes() int { return fl.gpuNodes }

// NodeProblem is a label of one node that could not be read.
type NodeProblem struct {
	// Node is the node's name.
	Node string
	// Err says which label, its value, and what was expected.
	Err *LabelError
}

// Problems lists every unreadable label, node by node in the node set's
// order. The plugin records each as a Warning Event on the node, once per
// node-set generation.
func (fl *Fleet) Problems() []NodeProblem {
	var out []NodeProblem
	for i := range fl.facts {
		for _, p := range fl.facts[i].Problems {
			out = append(out, NodeProblem{Node: fl.names[i], Err: p})
		}
	}
	return out
}

// Admits is Requirements.Admits on node i with the fleet's options.
func (fl *Fleet) Admits(i int, r Requirements, d Demand) (bool, Refusal) {
	return r.Admits(&fl.facts[i], d, &fl.opts)
}

// Eligible narrows base, the nodes a member may use for other reasons
// (taints, node selector, affinity; nil for every node, else one entry per
// node), to those the member's requirements admit. It returns base itself when the member
// requests no NVIDIA GPU, a new slice otherwise. The slice fits
// placement.Member.Eligible.
func (fl *Fleet) Eligible(r Requirements, d Demand, base []bool) []bool {
	if !d.Any() {
		return base
	}
	out := make([]bool, len(fl.facts))
	for i := range fl.facts {
		if base != nil && !base[i] {
			continue
		}
		out[i], _ = r.Admits(&fl.facts[i], d, &fl.opts)
	}
	return out
}

// GroupKey is node i's uniform group for a gang with requirements r.
func (fl *Fleet) GroupKey(i int, r Requirements) GroupKey {
	return r.GroupKey(fl.labels[i], &fl.facts[i])
}

// Group partitions the nodes into the uniform groups of a gang with
// requirements r (see GroupKey). With no uniform keys and a capacity policy
// other than uniform, every node is in one group.
func (fl *Fleet) Group(r Requirements) *Grouping {
	keys := make([]GroupKey, len(fl.facts))
	for i := range fl.facts {
		keys[i] = fl.GroupKey(i, r)
	}
	return group(keys)
}
