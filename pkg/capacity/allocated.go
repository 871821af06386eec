package capacity

import (
	"hash/maphash"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
)

// allocatedCache remembers where the last set of allocated devices a
// Matcher was asked about sits, node by node. Every planning pass, and the
// PreFilter of every pod that other gangs' holds concern, reads the whole
// cluster's allocated devices (tens of thousands on a large fleet) from the
// DRA manager; between two passes they rarely change. Telling whether they
// did costs one hash per device, not a map write per device and per node.
// Safe for concurrent use.
type allocatedCache struct {
	mu sync.Mutex
	// version identifies the set positions were built from (see version);
	// positions maps a node to its allocated devices; generation counts
	// the sets positions were built from, so that callers can tell two
	// passes that read the same positions apart from two that did not
	// without comparing them (Devices.Unchanged). All guarded by mu;
	// positions is shared with every Devices built from it and never
	// written after.
	version    allocatedVersion
	positions  map[string]Bits
	generation uint64
}

// allocatedVersion identifies a set of devices, in any order.
type allocatedVersion struct {
	sum uint64
	len int
}

// allocatedSeed is the hash seed of versions, one per process.
var allocatedSeed = maphash.MakeSeed()

// version identifies ids: their count and the sum of their hashes. Two
// different sets of equal size share it only if 64-bit hashes of their
// members happen to sum alike, which is as unlikely as two slices sharing
// a fingerprint (cache.go).
func version(ids sets.Set[structured.DeviceID]) allocatedVersion {
	v := allocatedVersion{len: len(ids)}
	for id := range ids {
		v.sum += maphash.Comparable(allocatedSeed, id)
	}
	return v
}

// get returns inv's positions of ids per node, from the cache when
// ids are the set it holds, and the generation of those positions (never
// 0).
func (c *allocatedCache) get(inv *Inventory, ids sets.Set[structured.DeviceID]) (map[string]Bits, uint64) {
	v := version(ids)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.positions != nil && c.version == v {
		return c.positions, c.generation
	}
	c.positions, c.version = inv.Allocated(ids), v
	c.generation++
	return c.positions, c.generation
}
