package capacity

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Inventories keeps the Inventory of the cluster's current ResourceSlices,
// and its Matcher, and rebuilds them only when the slices changed. Whether
// they changed is read off the list itself: which slice objects it holds,
// which costs a pass over the slices but no device (a DeviceTaintRule
// changes what a slice shows by replacing the patched object the list
// returns). Once Watch has given it the informers, a pass that finds no
// slice or DeviceTaintRule event since a list it could confirm spares the
// list as well (sliceWatch says when it can). Safe for concurrent use.
//
// A count of events alone would not do: with DeviceTaintRules (on by
// default in 1.37) the DRA manager lists the slice tracker's patched
// copies, which the tracker writes from its own handler on the same
// informers, in no order with any other handler, so a count bumped by ours
// could be read, and a list without the change kept under it, before the
// tracker wrote the copy.
type Inventories struct {
	list func() ([]*resourceapi.ResourceSlice, error)
	cel  *cel.Cache
	// railAttributes name NICs' rails (BuildInventoryWith); guarded by mu.
	railAttributes []resourceapi.QualifiedName

	mu sync.Mutex
	// fingerprint identifies the slices matcher was built from, and held
	// keeps those slices alive, so that no address fingerprint hashed is
	// reused for another object while matcher stands; guarded by mu.
	fingerprint uint64
	held        []*resourceapi.ResourceSlice
	matcher     *Matcher
	// watch is the change signal, nil until Watch; confirmed says that the
	// list matcher was built from was the one watch knew when it had seen
	// events events, so that matcher stands while it has seen no more;
	// claims is the claim watch (Claims). Guarded by mu; watchOnce and
	// watchErr belong to Watch.
	watch     *sliceWatch
	claims    *ClaimWatch
	confirmed bool
	events    uint64
	watchOnce sync.Once
	watchErr  error
}

// NewInventories reads slices with list (the scheduler's DRA manager:
// slices with device taint rules applied).
func NewInventories(list func() ([]*resourceapi.ResourceSlice, error), celCache *cel.Cache) *Inventories {
	return &Inventories{list: list, cel: celCache}
}

// SetRailAttributes names the device attributes that give a NIC's rail
// (BuildInventoryWith); the next Current reads the slices again.
func (c *Inventories) SetRailAttributes(names []resourceapi.QualifiedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.railAttributes = slices.Clone(names)
	c.matcher = nil
}

// Current returns the matcher of the current slices, building it when they
// changed since the last call.
func (c *Inventories) Current() (*Matcher, error) {
	c.mu.Lock()
	w := c.watch
	c.mu.Unlock()
	var seen watchState
	if w != nil {
		// Read before the list: an event after this read makes the next
		// pass list again, whatever this one keeps.
		seen = w.state()
		c.mu.Lock()
		if c.matcher != nil && c.confirmed && c.events == seen.events {
			defer c.mu.Unlock()
			return c.matcher, nil
		}
		c.mu.Unlock()
	}
	slices, err := c.list()
	if err != nil {
		return nil, fmt.Errorf("listing ResourceSlices: %w", err)
	}
	fp := fingerprint(slices)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.matcher == nil || c.fingerprint != fp {
		c.matcher = NewMatcher(BuildInventoryWith(slices, c.railAttributes), c.cel)
		c.fingerprint, c.held = fp, slices
	}
	// The list is the informer's objects the watch knew, and no rule can
	// patch them: until the watch sees an event, the list stays this one.
	// Otherwise (the tracker is behind or ahead of our handler, or a rule
	// exists) the next pass lists again.
	c.confirmed = w != nil && seen.noRules && fp == seen.fingerprint
	c.events = seen.events
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
		sum += sliceHash(s)
	}
	return sum ^ uint64(len(slices))
}

// sliceHash is one slice object's part of a fingerprint.
func sliceHash(s *resourceapi.ResourceSlice) uint64 { return maphash.Comparable(sliceSeed, s) }

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
