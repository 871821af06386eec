package capacity

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
)

// NodeCapacity is a node's own resources as the scheduler's cache shows
// them: the allocatable source. Quantities are in Amounts' units.
type NodeCapacity interface {
	Name() string
	// Allocatable is the node's whole capacity of a resource.
	Allocatable(name v1.ResourceName) int64
	// Free is allocatable less what the node's pods (assumed ones
	// included) request.
	Free(name v1.ResourceName) int64
}

// Registry remembers every kind the model met, by dimension, so that what
// one gang holds in a device dimension can be read by another. Kinds are
// few (one per distinct class, selectors and tolerations) and are kept for
// the life of the process. Safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	kinds map[v1.ResourceName]*Kind
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{kinds: map[v1.ResourceName]*Kind{}} }

// Add registers k and returns the registered kind of its dimension.
func (r *Registry) Add(k *Kind) *Kind {
	r.mu.Lock()
	defer r.mu.Unlock()
	if have, ok := r.kinds[k.Dimension]; ok {
		return have
	}
	r.kinds[k.Dimension] = k
	return k
}

// Kind returns the kind of a device dimension, and whether it is one.
func (r *Registry) Kind(dim v1.ResourceName) (*Kind, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	k, ok := r.kinds[dim]
	return k, ok
}

// Devices is the device source of capacity at one moment: the inventory,
// which of its devices are allocated (claims written to the API and
// allocations in flight in the scheduler), and which devices each kind
// takes. A Devices is built for one planning pass or one Filter cycle and
// only read after.
type Devices struct {
	matcher   *Matcher
	registry  *Registry
	resolver  ExtendedResolver
	allocated map[string]Bits
}

// NewDevices returns the device source of a pass. allocated is the set of
// allocated devices (the DRA manager's ListAllAllocatedDevices). resolver
// may be nil when no DeviceClass maps extended resources.
func NewDevices(m *Matcher, registry *Registry, resolver ExtendedResolver, allocated sets.Set[structured.DeviceID]) *Devices {
	return &Devices{matcher: m, registry: registry, resolver: resolver, allocated: m.Inventory().Allocated(allocated)}
}

// WithAllocated returns a copy of d that sees allocated instead: what would
// be free if only those devices stayed taken (nil: an empty cluster).
func (d *Devices) WithAllocated(allocated map[string]Bits) *Devices {
	c := *d
	c.allocated = allocated
	if c.allocated == nil {
		c.allocated = map[string]Bits{}
	}
	return &c
}

// Allocated returns the positions of node's allocated devices.
func (d *Devices) Allocated(node string) Bits { return d.allocated[node] }

// Matcher returns the matcher the source reads kinds with.
func (d *Devices) Matcher() *Matcher { return d.matcher }

// mappedKind returns the kind that serves extended resource name on a node
// that does not advertise it, and whether a DeviceClass maps it.
func (d *Devices) mappedKind(name v1.ResourceName) (*Kind, bool) {
	if d.resolver == nil || IsDeviceDimension(name) || !isExtendedName(name) {
		return nil, false
	}
	class := d.resolver.GetDeviceClass(name)
	if class == nil {
		return nil, false
	}
	return d.registry.Add(NewKind(class, nil, nil)), true
}

// source says where a dimension's capacity comes from on one node.
type source struct {
	// bits are the node's devices the dimension counts; nil for the
	// allocatable source.
	bits Bits
	// devices is set when the dimension is served by devices on the node.
	devices bool
	// all is set for a dimension that takes every device of its kind.
	all bool
}

// sourceOf resolves a dimension on a node. unions are the gang's union
// dimensions (Demand.Unions).
func (d *Devices) sourceOf(ctx context.Context, n NodeCapacity, dim v1.ResourceName, unions map[v1.ResourceName][]v1.ResourceName) source {
	if parts, ok := unions[dim]; ok {
		var s source
		s.devices = true
		for _, p := range parts {
			ps := d.sourceOf(ctx, n, p, nil)
			if ps.devices {
				s.bits = s.bits.Or(ps.bits)
			}
		}
		return s
	}
	if base, ok := allBase(dim); ok {
		if k, ok := d.registry.Kind(base); ok {
			return source{bits: d.matcher.On(ctx, k, n.Name()), devices: true, all: true}
		}
		return source{devices: true, all: true}
	}
	if k, ok := d.registry.Kind(dim); ok {
		return source{bits: d.matcher.On(ctx, k, n.Name()), devices: true}
	}
	if k, ok := d.mappedKind(dim); ok && n.Allocatable(dim) == 0 {
		return source{bits: d.matcher.On(ctx, k, n.Name()), devices: true}
	}
	return source{}
}

// Allocatable is the node's whole capacity in a dimension: every device the
// dimension counts, or the node's allocatable.
func (d *Devices) Allocatable(ctx context.Context, n NodeCapacity, dim v1.ResourceName, unions map[v1.ResourceName][]v1.ResourceName) int64 {
	s := d.sourceOf(ctx, n, dim, unions)
	switch {
	case s.all:
		return boolCount(s.bits.Count() > 0)
	case s.devices:
		return int64(s.bits.Count()) + d.plainPartsAllocatable(n, dim, unions)
	}
	return n.Allocatable(dim)
}

// Free is what a gang may use of a dimension on a node now: free devices
// (or the node's free allocatable) less what other gangs hold there. held
// maps dimensions to held quantities on this node; a device dimension held
// by another gang counts against every dimension whose devices overlap it,
// which is exact for identical and disjoint kinds and errs on the safe side
// in between.
func (d *Devices) Free(ctx context.Context, n NodeCapacity, dim v1.ResourceName, unions map[v1.ResourceName][]v1.ResourceName, held Amounts) int64 {
	s := d.sourceOf(ctx, n, dim, unions)
	if !s.devices {
		return n.Free(dim) - held[dim]
	}
	alloc := d.allocated[n.Name()]
	if s.all {
		if s.bits.Count() == 0 || s.bits.Intersects(alloc) || d.heldOverlap(ctx, n, s.bits, held) > 0 {
			return 0
		}
		return 1
	}
	free := int64(s.bits.CountWithout(alloc)) + d.plainPartsFree(n, dim, unions, held)
	return free - d.heldOverlap(ctx, n, s.bits, held)
}

// plainPartsAllocatable adds, for a union dimension, the parts served by
// the node's allocatable (a mapped extended resource the node advertises).
func (d *Devices) plainPartsAllocatable(n NodeCapacity, dim v1.ResourceName, unions map[v1.ResourceName][]v1.ResourceName) int64 {
	var sum int64
	for _, p := range unions[dim] {
		if d.isPlainOn(n, p) {
			sum += n.Allocatable(p)
		}
	}
	return sum
}

func (d *Devices) plainPartsFree(n NodeCapacity, dim v1.ResourceName, unions map[v1.ResourceName][]v1.ResourceName, held Amounts) int64 {
	var sum int64
	for _, p := range unions[dim] {
		if d.isPlainOn(n, p) {
			sum += n.Free(p) - held[p]
		}
	}
	return sum
}

// isPlainOn reports whether a dimension is served by the node's
// allocatable.
func (d *Devices) isPlainOn(n NodeCapacity, dim v1.ResourceName) bool {
	if _, ok := d.registry.Kind(dim); ok {
		return false
	}
	if _, ok := allBase(dim); ok {
		return false
	}
	if _, ok := d.mappedKind(dim); ok && n.Allocatable(dim) == 0 {
		return false
	}
	return true
}

// heldOverlap sums what other gangs hold on the node in device dimensions
// whose devices overlap bits.
func (d *Devices) heldOverlap(ctx context.Context, n NodeCapacity, bits Bits, held Amounts) int64 {
	var sum int64
	for _, h := range held.Names() {
		q := held[h]
		if q == 0 {
			continue
		}
		hs := d.sourceOf(ctx, n, h, nil)
		if !hs.devices || !hs.bits.Intersects(bits) {
			continue
		}
		if hs.all {
			sum += int64(hs.bits.Count())
			continue
		}
		sum += q
	}
	return sum
}

func boolCount(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// Counted is how many of the devices at positions on node a dimension
// counts: what a dimension gains when those devices are freed (a preemption
// victim's, say).
func (d *Devices) Counted(ctx context.Context, n NodeCapacity, dim v1.ResourceName, unions map[v1.ResourceName][]v1.ResourceName, positions Bits) int64 {
	s := d.sourceOf(ctx, n, dim, unions)
	if !s.devices {
		return 0
	}
	if s.all {
		// The dimension counts 1 when every device of its kind is free.
		if s.bits.Count() > 0 && s.bits.CountWithout(positions) == 0 {
			return 1
		}
		return 0
	}
	return int64(s.bits.Count() - s.bits.CountWithout(positions))
}
