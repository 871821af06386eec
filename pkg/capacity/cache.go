package capacity

import (
	"fmt"
	"sync"
	"sync/atomic"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Inventories keeps the Inventory of the cluster's current ResourceSlices,
// and its Matcher, and rebuilds them only after the slices changed. Whoever
// watches slices (and DeviceTaintRules, which change what slices show)
// calls Changed; Current reads. Safe for concurrent use.
type Inventories struct {
	list func() ([]*resourceapi.ResourceSlice, error)
	cel  *cel.Cache
	// generation counts changes; read without the lock.
	generation atomic.Uint64

	mu sync.Mutex
	// built is the generation matcher was built at; guarded by mu.
	built   uint64
	matcher *Matcher
}

// NewInventories reads slices with list (the scheduler's DRA manager:
// slices with device taint rules applied).
func NewInventories(list func() ([]*resourceapi.ResourceSlice, error), celCache *cel.Cache) *Inventories {
	c := &Inventories{list: list, cel: celCache}
	c.generation.Store(1)
	return c
}

// Changed says that slices or device taints changed.
func (c *Inventories) Changed() { c.generation.Add(1) }

// Current returns the matcher of the current slices, building it if they
// changed since the last call. A nil Matcher with no error means that no
// slice publishes a node's devices.
func (c *Inventories) Current() (*Matcher, error) {
	gen := c.generation.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.matcher != nil && c.built == gen {
		return c.matcher, nil
	}
	slices, err := c.list()
	if err != nil {
		return nil, fmt.Errorf("listing ResourceSlices: %w", err)
	}
	c.matcher = NewMatcher(BuildInventory(slices), c.cel)
	c.built = gen
	return c.matcher, nil
}

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
