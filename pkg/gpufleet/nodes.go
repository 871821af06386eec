package gpufleet

import (
	"maps"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/fleet"
)

// nodeCache keeps what is read from each node's labels and devices, so
// that Filter, which runs for every node of the cluster for every pod,
// costs a map lookup rather than a parse of a dozen labels and attributes,
// and so that a gang's uniform groups cost a lookup per node too. Entries
// are immutable but for their group key memo, and replaced whole when a
// node's labels or devices change; the cache is safe for the scheduler's
// parallel Filter calls.
type nodeCache struct {
	opts *fleet.Options
	// report is called once each time a node's labels or devices are read
	// anew and hold values that cannot be read.
	report func(node string, facts *fleet.NodeFacts)
	// entries maps a node's name to its *nodeEntry.
	entries sync.Map
}

// nodeEntry is one node's facts and the labels and devices they were read
// from. The labels map is the informer's, the devices the inventory's
// (whose attribute maps are the slices'); both are only read.
type nodeEntry struct {
	labels  map[string]string
	devices []capacity.Device
	facts   fleet.NodeFacts
	// group is the node's group key for the last grouping policy asked
	// for: gangs mostly ask for the default one.
	group atomic.Pointer[groupMemo]
}

type groupMemo struct {
	policy fleet.Requirements
	key    fleet.GroupKey
}

func newNodeCache(opts *fleet.Options, report func(string, *fleet.NodeFacts)) *nodeCache {
	return &nodeCache{opts: opts, report: report}
}

// facts returns the facts of the named node with the given labels and
// devices (nil for none).
func (c *nodeCache) facts(name string, labels map[string]string, devices []capacity.Device) *fleet.NodeFacts {
	return &c.entry(name, labels, devices).facts
}

// groupKey returns the node's uniform group key for requirements r.
func (c *nodeCache) groupKey(name string, labels map[string]string, devices []capacity.Device, r fleet.Requirements) fleet.GroupKey {
	e := c.entry(name, labels, devices)
	policy := r.GroupPolicy()
	if m := e.group.Load(); m != nil && m.policy == policy {
		return m.key
	}
	k := r.GroupKey(e.labels, &e.facts)
	e.group.Store(&groupMemo{policy: policy, key: k})
	return k
}

// entry returns the named node's entry for the given labels and devices.
// The scheduler's node objects are never modified, only replaced, so the
// very map an entry was read from still holds the same labels: that check
// is a pointer comparison. A node object replaced for another reason (a
// status update) brings a new map with the same labels, which a comparison
// of contents catches before anything is parsed again. Devices are the
// same when each has the same attribute map: ResourceSlices, too, are
// replaced rather than modified, and the inventory, rebuilt when any slice
// of the cluster changes, shares the maps of those that did not.
func (c *nodeCache) entry(name string, labels map[string]string, devices []capacity.Device) *nodeEntry {
	v, ok := c.entries.Load(name)
	if !ok {
		e := c.read(labels, devices)
		// Another call may store first; what was read here is right for
		// these labels and devices either way.
		if _, loaded := c.entries.LoadOrStore(name, e); !loaded {
			c.reportNew(name, e)
		}
		return e
	}
	e := v.(*nodeEntry)
	sameDevs := sameDevices(e.devices, devices)
	if sameDevs && sameMap(e.labels, labels) {
		return e
	}
	if sameDevs && maps.Equal(e.labels, labels) {
		// Remember the new map, so the next lookup is a pointer comparison
		// again; losing the race to another call loses nothing.
		fresh := &nodeEntry{labels: labels, devices: devices, facts: e.facts}
		fresh.group.Store(e.group.Load())
		c.entries.CompareAndSwap(name, e, fresh)
		return fresh
	}
	fresh := c.read(labels, devices)
	if c.entries.CompareAndSwap(name, e, fresh) {
		c.reportNew(name, fresh)
	}
	return fresh
}

func (c *nodeCache) read(labels map[string]string, devices []capacity.Device) *nodeEntry {
	return &nodeEntry{labels: labels, devices: devices, facts: fleet.ReadNodeDevices(labels, devices, c.opts)}
}

func (c *nodeCache) reportNew(name string, e *nodeEntry) {
	if c.report != nil && (len(e.facts.Problems) > 0 || (e.facts.Devices != nil && len(e.facts.Devices.Problems) > 0)) {
		c.report(name, &e.facts)
	}
}

// forget drops a deleted node.
func (c *nodeCache) forget(name string) { c.entries.Delete(name) }

// sameMap reports whether a and b are the same map, not merely equal ones.
func sameMap[K comparable, V any](a, b map[K]V) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// sameDevices reports whether a and b are the same devices with the same
// attribute maps: whether facts read from a hold for b.
func sameDevices(a, b []capacity.Device) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || !sameMap(a[i].Attributes, b[i].Attributes) {
			return false
		}
	}
	return true
}
