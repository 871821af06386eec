package capacity

import (
	"hash/maphash"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
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
// read through the claim tracker (fromTracker), one hash per claim, and no
// copy of the devices. Safe for concurrent use.
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
	// claims identifies the claims positions were read from, when they
	// were read through a tracker (NewDevicesFromTracker): the zero
	// value, and any value while positions is nil, knows nothing.
	// Guarded by mu.
	claims claimsVersion
}

// claimsVersion identifies what a DRA manager's claim tracker holds: each
// claim object it lists (the informer's, or the one assumed after an API
// call) and each claim's allocation in flight. The tracker replaces a claim
// object when it changes and never writes one in place, and an allocation
// in flight is one object from the moment it is signalled until it is
// removed, so the same objects hold the same allocated devices. Two
// different sets of objects share a version only as two device sets do
// (version). held keeps the objects alive, so that no address is reused
// for another object while a version names it.
type claimsVersion struct {
	sum  uint64
	len  int
	held []heldClaim
}

// heldClaim is a claim object the tracker lists and its allocation in
// flight, nil when none is.
type heldClaim struct {
	claim   *resourceapi.ResourceClaim
	pending *resourceapi.AllocationResult
}

func (v claimsVersion) same(o claimsVersion) bool {
	return v.held != nil && o.held != nil && v.sum == o.sum && v.len == o.len
}

// claimsVersionOf reads the version of what tracker holds now.
func claimsVersionOf(tracker fwk.ResourceClaimTracker) (claimsVersion, error) {
	claims, err := tracker.List()
	if err != nil {
		return claimsVersion{}, err
	}
	v := claimsVersion{len: len(claims), held: make([]heldClaim, len(claims))}
	for i, c := range claims {
		v.held[i] = heldClaim{claim: c, pending: tracker.GetPendingAllocation(c.UID)}
		v.sum += maphash.Comparable(allocatedSeed, v.held[i])
	}
	return v, nil
}

// holdsVersion reports whether tracker holds what v names, without keeping
// what it read: most passes find it so, and a copy of every claim's
// pointers per pass would be garbage.
func holdsVersion(tracker fwk.ResourceClaimTracker, v claimsVersion) (bool, error) {
	if v.held == nil {
		return false, nil
	}
	claims, err := tracker.List()
	if err != nil || len(claims) != v.len {
		return false, err
	}
	var sum uint64
	for _, c := range claims {
		sum += maphash.Comparable(allocatedSeed, heldClaim{claim: c, pending: tracker.GetPendingAllocation(c.UID)})
	}
	return sum == v.sum, nil
}

// accounts reports whether ids are exactly the devices v's claims hold
// (their allocations, or those in flight, less admin access, which takes
// no device away), so that positions read from ids may stand for as long
// as the tracker holds v's objects. The tracker updates its set of
// allocated devices after a claim object changes, not with it: a set read
// in between does not account for v's claims, and is not kept.
func (v claimsVersion) accounts(ids sets.Set[structured.DeviceID]) bool {
	n := 0
	for _, h := range v.held {
		alloc := h.claim.Status.Allocation
		if alloc == nil {
			alloc = h.pending
		}
		if alloc == nil {
			continue
		}
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
	// Every device of v is in ids; as many of them as ids holds leaves no
	// device of ids to a claim v lacks (a device held twice, which one
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
	c.positions, c.version, c.claims = inv.Allocated(ids), v, claimsVersion{}
	c.generation++
	return c.positions, c.generation
}

// fromTracker returns inv's positions of the devices allocated in tracker,
// and their generation. When the tracker holds the same claim objects and
// allocations in flight as when the positions were last read through it,
// they stand without listing the allocated devices, which copies the
// tracker's whole set; otherwise list reads them (the tracker's
// ListAllAllocatedDevices), as get.
func (c *allocatedCache) fromTracker(inv *Inventory, tracker fwk.ResourceClaimTracker, list func() (sets.Set[structured.DeviceID], error)) (map[string]Bits, uint64, error) {
	// Read before the devices: a change between the two reads leaves a
	// version older than the positions, which the next pass does not
	// match, never a version newer than them.
	c.mu.Lock()
	kept, positions, generation := c.claims, c.positions, c.generation
	c.mu.Unlock()
	if positions != nil {
		same, err := holdsVersion(tracker, kept)
		if err != nil {
			return nil, 0, err
		}
		if same {
			return positions, generation, nil
		}
	}
	cv, err := claimsVersionOf(tracker)
	if err != nil {
		return nil, 0, err
	}
	ids, err := list()
	if err != nil {
		return nil, 0, err
	}
	positions, generation = c.get(inv, ids)
	keep := cv.accounts(ids)
	c.mu.Lock()
	defer c.mu.Unlock()
	if keep && c.generation == generation {
		c.claims = cv
	}
	return positions, generation, nil
}
