package capacity

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// Inventory is the devices that ResourceSlices publish for each node, read
// by the rules of Dynamic Resource Allocation:
//   - a pool (driver, pool name) counts at its newest generation only; older
//     slices are being replaced;
//   - a pool counts only when complete: as many slices of that generation as
//     its resourceSliceCount says. The allocator allocates nothing from an
//     incomplete pool, so neither does the model;
//   - a pool is node-local when every slice names the same node
//     (spec.nodeName). Such pools are what GPU drivers publish (NVIDIA's
//     gpu.nvidia.com: one pool per node). Pools whose slices select nodes
//     (nodeSelector, allNodes, per-device node selection) reach many nodes
//     at once; their devices are not any one node's capacity, so the model
//     does not count them and leaves them to DynamicResources' Filter.
//
// An Inventory is built once per set of slices and never written after.
type Inventory struct {
	nodes map[string]*NodeDevices
	// where maps a device to its node and position there.
	where map[structured.DeviceID]position
	// Networked are the pools that reach several nodes, in name order.
	Networked []PoolID
	// Incomplete are the node-local pools left out because slices of their
	// newest generation are missing, in name order.
	Incomplete []PoolID
}

// PoolID names a pool.
type PoolID struct {
	Driver, Pool string
}

func (p PoolID) String() string { return p.Driver + "/" + p.Pool }

type position struct {
	node  *NodeDevices
	index int
}

// NodeDevices is one node's devices, in (driver, pool, name) order so that
// positions are deterministic.
type NodeDevices struct {
	Node    string
	Devices []Device
	// rails are the devices' rails (rails.go).
	rails nodeRails
	// index is the node's position among the inventory's nodes in name
	// order, where the Matcher's per-node memos keep it (railsMemo).
	index int
}

// Device is one device of a node-local pool.
type Device struct {
	ID     structured.DeviceID
	Driver string
	Pool   string
	Name   string
	// Attributes, Capacity and Taints are the slice's, shared with it: read
	// only.
	Attributes map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
	Capacity   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity
	Taints     []resourceapi.DeviceTaint
	// Partial is set for a device the model cannot count as one whole
	// unit: it consumes shared counters (a partition of a bigger device),
	// or several claims may share it. See Kind.Exact.
	Partial bool
}

// BuildInventory reads slices (in any order) into an Inventory, with the
// NICs' rails by PCI order (rails.go).
func BuildInventory(list []*resourceapi.ResourceSlice) *Inventory {
	return BuildInventoryWith(list, nil)
}

// BuildInventoryWith is BuildInventory with NICs' rails named by the
// first of railAttributes they carry, where they carry one (rails.go).
func BuildInventoryWith(list []*resourceapi.ResourceSlice, railAttributes []resourceapi.QualifiedName) *Inventory {
	type pool struct {
		id         PoolID
		generation int64
		count      int64
		slices     []*resourceapi.ResourceSlice
		partial    bool
	}
	pools := map[PoolID]*pool{}
	for _, s := range list {
		id := PoolID{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name}
		p := pools[id]
		switch {
		case p == nil || s.Spec.Pool.Generation > p.generation:
			p = &pool{id: id, generation: s.Spec.Pool.Generation, count: s.Spec.Pool.ResourceSliceCount}
			pools[id] = p
		case s.Spec.Pool.Generation < p.generation:
			continue // being replaced
		}
		p.slices = append(p.slices, s)
		if len(s.Spec.SharedCounters) > 0 {
			p.partial = true
		}
	}
	inv := &Inventory{nodes: map[string]*NodeDevices{}, where: map[structured.DeviceID]position{}}
	ids := make([]PoolID, 0, len(pools))
	for id := range pools {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, comparePools)
	for _, id := range ids {
		p := pools[id]
		node, local := nodeOf(p.slices)
		if !local {
			inv.Networked = append(inv.Networked, id)
			continue
		}
		if int64(len(p.slices)) != p.count {
			inv.Incomplete = append(inv.Incomplete, id)
			continue
		}
		nd := inv.nodes[node]
		if nd == nil {
			nd = &NodeDevices{Node: node}
			inv.nodes[node] = nd
		}
		for _, s := range p.slices {
			for i := range s.Spec.Devices {
				d := &s.Spec.Devices[i]
				nd.Devices = append(nd.Devices, Device{
					ID:         structured.MakeDeviceID(id.Driver, id.Pool, d.Name),
					Driver:     id.Driver,
					Pool:       id.Pool,
					Name:       d.Name,
					Attributes: d.Attributes,
					Capacity:   d.Capacity,
					Taints:     d.Taints,
					Partial:    p.partial || len(d.ConsumesCounters) > 0 || ptr.Deref(d.AllowMultipleAllocations, false),
				})
			}
		}
	}
	for _, nd := range inv.nodes {
		slices.SortStableFunc(nd.Devices, func(a, b Device) int {
			return cmp.Or(strings.Compare(a.Driver, b.Driver), strings.Compare(a.Pool, b.Pool), strings.Compare(a.Name, b.Name))
		})
		for i := range nd.Devices {
			inv.where[nd.Devices[i].ID] = position{node: nd, index: i}
		}
	}
	named := namedRails(inv.nodes, railAttributes)
	for i, name := range inv.Nodes() {
		nd := inv.nodes[name]
		nd.rails = readRails(nd, named)
		nd.index = i
	}
	return inv
}

// nodeOf returns the node every slice names, and false when some slice
// selects nodes instead or two slices name different nodes.
func nodeOf(list []*resourceapi.ResourceSlice) (string, bool) {
	node := ""
	for _, s := range list {
		name := ptr.Deref(s.Spec.NodeName, "")
		if name == "" || (node != "" && name != node) {
			return "", false
		}
		node = name
	}
	return node, node != ""
}

func comparePools(a, b PoolID) int {
	return cmp.Or(strings.Compare(a.Driver, b.Driver), strings.Compare(a.Pool, b.Pool))
}

// Node returns a node's devices; nil when it publishes none the model counts.
func (inv *Inventory) Node(name string) *NodeDevices {
	if inv == nil {
		return nil
	}
	return inv.nodes[name]
}

// Nodes lists the nodes that publish devices, in name order.
func (inv *Inventory) Nodes() []string {
	out := make([]string, 0, len(inv.nodes))
	for n := range inv.nodes {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Allocated turns a set of allocated devices into positions per node. Devices
// the inventory does not count (networked pools, unknown ones) are left out.
func (inv *Inventory) Allocated(ids sets.Set[structured.DeviceID]) map[string]Bits {
	// Gathered by node first, keyed by pointer: this runs on every
	// planning pass, over every allocated device of the cluster, and a
	// pointer hashes cheaper than the node's name.
	byNode := make(map[*NodeDevices]Bits, len(inv.nodes))
	for id := range ids {
		pos, ok := inv.where[id]
		if !ok {
			continue
		}
		b := byNode[pos.node]
		b.set(pos.index)
		byNode[pos.node] = b
	}
	out := make(map[string]Bits, len(byNode))
	for nd, b := range byNode {
		out[nd.Node] = b
	}
	return out
}

// String summarises the inventory for logs.
func (inv *Inventory) String() string {
	devices := 0
	for _, nd := range inv.nodes {
		devices += len(nd.Devices)
	}
	return fmt.Sprintf("%d devices on %d nodes (%d networked pools, %d incomplete pools left out)",
		devices, len(inv.nodes), len(inv.Networked), len(inv.Incomplete))
}

// Positions returns where ids sit on node; ids elsewhere are left out.
func (inv *Inventory) Positions(node string, ids []structured.DeviceID) Bits {
	var b Bits
	for _, id := range ids {
		if pos, ok := inv.where[id]; ok && pos.node.Node == node {
			b.set(pos.index)
		}
	}
	return b
}
