package capacity

import (
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
)

// railsMemo keeps, per device dimension and node, what Devices.Rails last
// read: a rail-aligned pass reads every node's free devices per rail, and
// between two passes they change on the few nodes whose devices were
// allocated or freed. A node's reading depends on the inventory (its
// devices and their rails), on which of them the dimension's kind takes,
// and on which of them are allocated: the memo belongs to one Matcher, so
// the first two are fixed for its life (new slices make a new inventory
// and a new Matcher, and a dimension's kind never changes, as in
// Matcher.On), and each reading is kept with the node's allocated devices
// it was read with. A pass whose allocated devices are the very set
// a reading was checked against (the allocatedCache generation) takes it
// with one compare; another compares the node's allocated devices.
// Safe for concurrent use.
type railsMemo struct {
	mu sync.Mutex
	// byDim[dim][i] is the reading of the inventory's node of index i
	// (NodeDevices.index) in dim; guarded by mu.
	byDim map[v1.ResourceName][]railsReading
}

// railsReading is one node's reading in one dimension.
type railsReading struct {
	// read is set once the node was read.
	read bool
	// generation is the allocatedCache generation of the allocated
	// devices the reading was last checked against, 0 for none.
	generation uint64
	// allocated are the node's allocated devices the reading counted,
	// the memo's own copy.
	allocated Bits
	rails     NodeRails
	ok        bool
}

// lookup returns nd's reading in dim for d, and whether the memo holds one
// that d's allocated devices leave as it is.
func (m *railsMemo) lookup(d *Devices, nd *NodeDevices, dim v1.ResourceName) (NodeRails, bool, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	readings := m.byDim[dim]
	if readings == nil {
		return NodeRails{}, false, false
	}
	r := &readings[nd.index]
	switch {
	case !r.read:
		return NodeRails{}, false, false
	case d.generation != 0 && r.generation == d.generation:
	case slices.Equal(r.allocated, d.allocated[nd.Node].trim()):
		if d.generation != 0 {
			r.generation = d.generation
		}
	default:
		return NodeRails{}, false, false
	}
	return r.rails, r.ok, true
}

// store keeps nd's reading in dim, read with d's allocated devices; nodes
// is how many nodes the inventory has.
func (m *railsMemo) store(d *Devices, nd *NodeDevices, nodes int, dim v1.ResourceName, rails NodeRails, ok bool) {
	allocated := slices.Clone(d.allocated[nd.Node].trim())
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byDim == nil {
		m.byDim = map[v1.ResourceName][]railsReading{}
	}
	readings := m.byDim[dim]
	if readings == nil {
		readings = make([]railsReading, nodes)
		m.byDim[dim] = readings
	}
	readings[nd.index] = railsReading{read: true, generation: d.generation, allocated: allocated, rails: rails, ok: ok}
}
