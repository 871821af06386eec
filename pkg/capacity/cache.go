package capacity

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Inventories keeps the Inventory of the cluster's current ResourceSlices,
// and its Matcher, and rebuilds them only when the slices changed. Whether
// they changed is read off the list itself: which slice objects it holds,
// which costs a pass over the slices but no device, and needs no event
// handler (a DeviceTaintRule changes what a slice shows by replacing the
// patched object the list returns). Safe for concurrent use.
//
// An event handler would spare the list, but it cannot tell when the list
// has the change: with DeviceTaintRules (on by default in 1.37) the DRA
// manager lists the slice tracker's patched copies, which the tracker
// writes from its own handler on the same informers, in no order with any
// other handler, so a generation bumped by ours could be read, and a list
// without the change cached under it, before the tracker wrote the copy.
type Inventories struct {
	list func() ([]*resourceapi.ResourceSlice, error)
	cel  *cel.Cache

	mu sync.Mutex
	// fingerprint identifies the slices matcher was built from, and held
	// keeps those slices alive, so that no address fingerprint hashed is
	// reused for another object while matcher stands; guarded by mu.
	fingerprint uint64
	held        []*resourceapi.ResourceSlice
	matcher     *Matcher
}

// NewInventories reads slices with list (the scheduler's DRA manager:
// slices with device taint rules applied).
func NewInventories(list func() ([]*resourceapi.ResourceSlice, error), celCache *cel.Cache) *Inventories {
	return &Inventories{list: list, cel: celCache}
}

// Current returns the matcher of the current slices, building it when they
// changed since the last call.
func (c *Inventories) Current() (*Matcher, error) {
	slices, err := c.list()
	if err != nil {
		return nil, fmt.Errorf("listing ResourceSlices: %w", err)
	}
	fp := fingerprint(slices)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.matcher != nil && c.fingerprint == fp {
		return c.matcher, nil
	}
	c.matcher = NewMatcher(BuildInventory(slices), c.cel)
	c.fingerprint, c.held = fp, slices
	return c.matcher, nil
}

// fingerprint identifies a list of slices in any order: a slice that is
// replaced, updated, added or removed changes it. It hashes the objects'
// addresses only: neither the informer nor the slice tracker writes a
// listed object in place (an update, or a DeviceTaintRule, stores a new
// object), so the same objects hold the same devices.
func fingerprint(slices []*resourceapi.ResourceSlice) uint64 {
	// It runs on every planning pass, over every slice: one hash of one
	// word per slice.
	var sum uint64
	for _, s := range slices {
		sum += maphash.Comparable(sliceSeed, s)
	}
	return sum ^ uint64(len(slices))
}

// sliceSeed is the hash seed of fingerprints, one per process.
var sliceSeed = maphash.MakeSeed()

// SharedInventories hands every plugin of a scheduler the same
// Inventories: the plugins of all its profiles list slices from one DRA
// manager, which keys them. The zero value is ready to use.
type SharedInventories struct {
	mu    sync.Mutex
	byKey map[any]*Inventories
	cel   *cel.Cache
}

// Get returns the Inventories of the DRA manager key, which lists slices
// with list, creating them on first use; they are forgotten when ctx ends.
func (s *SharedInventories) Get(ctx context.Context, key any, list func() ([]*resourceapi.ResourceSlice, error)) *Inventories {
	s.mu.Lock()
	defer s.mu.Unlock()
	if inv, ok := s.byKey[key]; ok {
		return inv
	}
	if s.byKey == nil {
		s.byKey = map[any]*Inventories{}
		s.cel = cel.NewCache(celCacheSize, cel.Features{})
	}
	inv := NewInventories(list, s.cel)
	s.byKey[key] = inv
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.byKey, key)
	})
	return inv
}

// celCacheSize bounds the compiled selectors kept: one per distinct CEL
// expression of DeviceClasses and claims, which are few.
const celCacheSize = 256

// AllocatedDevices lists the devices a claim's allocation holds.
func AllocatedDevices(claim *resourceapi.ResourceClaim) []structured.DeviceID {
	if claim == nil || claim.Status.Allocation == nil {
		return nil
	}
	results := claim.Status.Allocation.Devices.Results
	out := make([]structured.DeviceID, 0, len(results))
	for _, r := range results {
		out = append(out, structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
	}
	return out
}
