package capacity

import (
	"hash/maphash"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
)

// allocatedCache remembers where the last set of allocated devices a
// Matcher was asked about sits, node by node. Every planning pass, and the
// PreFilter of every pod that other gangs' holds concern, reads the whole
// cluster's allocated devices (tens of thousands on a large fleet) from the
// DRA manager; between two passes they rarely change. Telling whether they
// did costs one hash per device, not a map write per device and per node;
// read through the claim tracker with a ClaimWatch (fromTracker), one look
// per unallocated claim, and no copy of the devices. Safe for concurrent
// use.
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
	// read is what positions were read from when they were read through
	// a claim tracker (NewDevicesFromTracker), nil when they were not.
	// Guarded by mu.
	read *trackerRead
}

// trackerRead is what a read of positions through the claim tracker
// (fromTracker) saw, kept so that a later pass can tell that the tracker
// still holds the same allocated devices without listing them.
type trackerRead struct {
	// events is the claim watch's count when the tracker listed the
	// claims the watch knew (ClaimWatch): until the watch counts another
	// event, the tracker lists claims holding the same devices, but for
	// allocations in flight.
	events uint64
	// inFlight are the claims the tracker listed unallocated, with the
	// allocation each had in flight (nil when none). Only such a claim
	// can gain one (the tracker puts none in flight for an allocated
	// claim), and a claim's allocation in flight is one object from the
	// moment it is signalled until it is removed; inFlight keeps them
	// alive, so that no address compared is reused for another.
	inFlight []claimInFlight
}

type claimInFlight struct {
	uid        types.UID
	allocation *resourceapi.AllocationResult
}

// holds reports whether tracker still holds what r read: the watch saw no
// event since, and every claim r saw unallocated has the same allocation
// in flight. It costs one look per unallocated claim, not a list.
func (r *trackerRead) holds(w *ClaimWatch, tracker fwk.ResourceClaimTracker) bool {
	if r == nil || w.events.Load() != r.events {
		return false
	}
	for _, f := range r.inFlight {
		if tracker.GetPendingAllocation(f.uid) != f.allocation {
			return false
		}
	}
	return true
}

// readTracker lists tracker's claims. It returns what a trackerRead keeps
// of them, with the allocations they hold (written, or in flight), and
// whether they are the claims w knew at seen (see ClaimWatch).
func readTracker(tracker fwk.ResourceClaimTracker, seen claimWatchState) (*trackerRead, []*resourceapi.AllocationResult, bool, error) {
	claims, err := tracker.List()
	if err != nil {
		return nil, nil, false, err
	}
	r := &trackerRead{events: seen.events}
	var held []*resourceapi.AllocationResult
	for _, c := range claims {
		if c.Status.Allocation != nil {
			held = append(held, c.Status.Allocation)
			continue
		}
		pending := tracker.GetPendingAllocation(c.UID)
		r.inFlight = append(r.inFlight, claimInFlight{uid: c.UID, allocation: pending})
		if pending != nil {
			held = append(held, pending)
		}
	}
	return r, held, claimsFingerprint(claims) == seen.fingerprint, nil
}

// accounts reports whether ids are exactly the devices the allocations
// held take (less admin access, which takes no device away), so that
// positions read from ids may stand for as long as the tracker holds the
// claims read. The tracker updates its set of allocated devices after a
// claim object changes, not with it: a set read in between does not
// account for the claims, and is not kept.
func accounts(held []*resourceapi.AllocationResult, ids sets.Set[structured.DeviceID]) bool {
	n := 0
	for _, alloc := range held {
		for _, r := range alloc.Devices.Results {
			if r.AdminAccess != nil && *r.AdminAccess {
				continue
			}
			if !ids.Has(structured.MakeDeviceID(r.Driver, r.Pool, r.Device)) {
				return false
			}
			n++
		}
	}
	// Every device held is in ids; as many of them as ids holds leaves no
	// device of ids to a claim not read (a device held twice, which one
	// device cannot be, would hide one).
	return n == len(ids)
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
	c.positions, c.version, c.read = inv.Allocated(ids), v, nil
	c.generation++
	return c.positions, c.generation
}

// fromTracker returns inv's positions of the devices allocated in tracker,
// and their generation. While watch (nil: none) shows that the tracker
// holds what the positions were last read through it from (trackerRead),
// they stand without listing the claims or the allocated devices, which
// copies the tracker's whole set; otherwise list reads them (the tracker's
// ListAllAllocatedDevices), as get.
func (c *allocatedCache) fromTracker(inv *Inventory, tracker fwk.ResourceClaimTracker, watch *ClaimWatch,
	list func() (sets.Set[structured.DeviceID], error)) (map[string]Bits, uint64, error) {
	c.mu.Lock()
	kept, positions, generation := c.read, c.positions, c.generation
	c.mu.Unlock()
	if watch == nil {
		ids, err := list()
		if err != nil {
			return nil, 0, err
		}
		positions, generation = c.get(inv, ids)
		return positions, generation, nil
	}
	if positions != nil && kept.holds(watch, tracker) {
		return positions, generation, nil
	}
	// The watch is read before the claims, and the claims before the
	// devices: a change in between leaves a read older than the
	// positions, which the next pass does not find held, never one newer
	// than them.
	read, held, confirmed, err := readTracker(tracker, watch.state())
	if err != nil {
		return nil, 0, err
	}
	ids, err := list()
	if err != nil {
		return nil, 0, err
	}
	positions, generation = c.get(inv, ids)
	keep := confirmed && accounts(held, ids)
	c.mu.Lock()
	defer c.mu.Unlock()
	if keep && c.generation == generation {
		c.read = read
	}
	return positions, generation, nil
}
