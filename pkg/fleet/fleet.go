package fleet

import (
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Fleet is the GPU facts of one node set, in the node set's order, for
// judging the whole set at once: the GPUFleet plugin builds one to explain
// why no node admits a member (Explain), the simulator to judge where a
// profile put each gang (Admits, GroupKey). It depends only on node labels
// and the attributes of the nodes' devices, and is never written after
// New, so it may be shared read-only; nothing derived from free capacity
// belongs here.
type Fleet struct {
	opts Options
	// labels are the nodes', shared with the caller and only read.
	labels []map[string]string
	// facts[i] are node i's facts; written once by New.
	facts []NodeFacts
	// gpuNodes counts nodes with facts.GPU.
	gpuNodes int
}

// New reads the facts of nodes from their labels.
func New(nodes []placement.Node, opts Options) *Fleet {
	return NewWithDevices(nodes, nil, opts)
}

// NewWithDevices reads the facts of nodes from their labels and their
// devices (ReadNodeDevices). devicesOf returns a node's devices, nil for
// none; a nil devicesOf reads labels only.
func NewWithDevices(nodes []placement.Node, devicesOf func(node string) []capacity.Device, opts Options) *Fleet {
	fl := &Fleet{
		opts:   opts,
		labels: make([]map[string]string, len(nodes)),
		facts:  make([]NodeFacts, len(nodes)),
	}
	for i := range nodes {
		fl.labels[i] = nodes[i].Labels
		var devices []capacity.Device
		if devicesOf != nil {
			devices = devicesOf(nodes[i].Name)
		}
		fl.facts[i] = ReadNodeDevices(nodes[i].Labels, devices, &fl.opts)
		if fl.facts[i].GPU {
			fl.gpuNodes++
		}
	}
	return fl
}

// Admits is Requirements.Admits on node i with the fleet's options.
func (fl *Fleet) Admits(i int, r Requirements, d Demand) (bool, Refusal) {
	return r.Admits(&fl.facts[i], d, &fl.opts)
}

// GroupKey is node i's uniform group for a gang with requirements r.
func (fl *Fleet) GroupKey(i int, r Requirements) GroupKey {
	return r.GroupKey(fl.labels[i], &fl.facts[i])
}
