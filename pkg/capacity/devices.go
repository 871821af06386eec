package capacity

import (
	"context"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
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
	// generation is the matcher's generation of allocated (see
	// allocatedCache), 0 when allocated came from elsewhere
	// (WithAllocated).
	generation uint64
}

// NewDevices returns the device source of a pass. allocated is the set of
// allocated devices (the DRA manager's ListAllAllocatedDevices); the
// matcher remembers where the last such set sits, so an unchanged set costs
// a hash per device. resolver may be nil when no DeviceClass maps extended
// resources.
func NewDevices(m *Matcher, registry *Registry, resolver ExtendedResolver, allocated sets.Set[structured.DeviceID]) *Devices {
	positions, generation := m.allocated.get(m.Inventory(), allocated)
	return &Devices{matcher: m, registry: registry, resolver: resolver, allocated: positions, generation: generation}
}

// NewDevicesFromTracker is NewDevices with the devices allocated in
// tracker, the DRA manager's claim tracker, which list reads (its
// ListAllAllocatedDevices, retried as the caller sees fit). While watch
// (Inventories.Claims; nil: none) shows that the tracker holds the same
// claims and allocations in flight as at the matcher's last read, neither
// the claims nor the set are listed: that copies the whole set, tens of
// thousands of devices on a large fleet, for every pass.
func NewDevicesFromTracker(m *Matcher, registry *Registry, resolver ExtendedResolver, tracker fwk.ResourceClaimTracker,
	watch *ClaimWatch, list func() (sets.Set[structured.DeviceID], error)) (*Devices, error) {
	positions, generation, err := m.allocated.fromTracker(m.Inventory(), tracker, watch, list)
	if err != nil {
		return nil, err
	}
	return &Devices{matcher: m, registry: registry, resolver: resolver, allocated: positions, generation: generation}, nil
}

// WithAllocated returns a copy of d that sees allocated instead: what would
// be free if only those devices stayed taken (nil: an empty cluster).
func (d *Devices) WithAllocated(allocated map[string]Bits) *Devices {
	c := *d
	c.allocated, c.generation = allocated, 0
	if c.allocated == nil {
		c.allocated = map[string]Bits{}
	}
	return &c
}

// Unchanged reports whether d reads what o read: the same inventory and
// the same allocated devices, so that every Column gives the same answers
// on a node whose own resources did not change. It costs two compares,
// not a look at the devices.
func (d *Devices) Unchanged(o *Devices) bool {
	return d != nil && o != nil && d.matcher == o.matcher && d.generation != 0 && d.generation == o.generation
}

// UnchangedOn reports whether node's devices read alike in d and in o:
// the same inventory, and the same of its devices allocated. A pass after
// a claim was allocated or released then reads again only the nodes whose
// devices the change touched.
func (d *Devices) UnchangedOn(o *Devices, node string) bool {
	return d != nil && o != nil && d.matcher == o.matcher && slices.Equal(d.allocated[node].trim(), o.allocated[node].trim())
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

// Column is one dimension resolved once for a pass: where its capacity
// comes from, so that reading it node by node costs no lookups. The zero
// Column reads the node's allocatable.
type Column struct {
	d   *Devices
	dim v1.ResourceName
	// kind is the device kind of a kind or "all" dimension.
	kind *Kind
	// all is set for "every device of kind on the node".
	all bool
	// mapped is the class kind serving an extended resource on nodes that
	// do not advertise it.
	mapped *Kind
	// parts are a union dimension's parts.
	parts []Column
}

// Column resolves dim; unions are the gang's union dimensions
// (Demand.Unions).
func (d *Devices) Column(dim v1.ResourceName, unions map[v1.ResourceName][]v1.ResourceName) Column {
	c := Column{d: d, dim: dim}
	if parts, ok := unions[dim]; ok {
		for _, p := range parts {
			c.parts = append(c.parts, d.Column(p, nil))
		}
		return c
	}
	if base, ok := allBase(dim); ok {
		c.all = true
		c.kind, _ = d.registry.Kind(base)
		return c
	}
	if k, ok := d.registry.Kind(dim); ok {
		c.kind = k
		return c
	}
	if k, ok := d.mappedKind(dim); ok {
		c.mapped = k
	}
	return c
}

// Source returns the device source the column reads; nil for the zero
// Column.
func (c Column) Source() *Devices { return c.d }

// Same reports whether c and o read a node alike from equal sources: the
// same dimension, served in the same way by the same kinds. A DeviceClass
// that maps an extended resource to other devices makes another column of
// the same dimension.
func (c Column) Same(o Column) bool {
	return c.dim == o.dim && c.kind == o.kind && c.all == o.all && c.mapped == o.mapped &&
		slices.EqualFunc(c.parts, o.parts, Column.Same)
}

// Devices reports whether the column counts devices at all (on some node).
func (c Column) Devices() bool { return c.kind != nil || c.all || c.mapped != nil || len(c.parts) > 0 }

// bits returns the node's devices the column counts, and whether the
// column is served by devices on this node.
func (c Column) bits(ctx context.Context, n NodeCapacity) (Bits, bool) {
	switch {
	case len(c.parts) > 0:
		var b Bits
		for _, p := range c.parts {
			if pb, ok := p.bits(ctx, n); ok {
				b = b.Or(pb)
			}
		}
		return b, true
	case c.all:
		if c.kind == nil {
			return nil, true
		}
		return c.d.matcher.On(ctx, c.kind, n.Name()), true
	case c.kind != nil:
		return c.d.matcher.On(ctx, c.kind, n.Name()), true
	case c.mapped != nil && n.Allocatable(c.dim) == 0:
		return c.d.matcher.On(ctx, c.mapped, n.Name()), true
	}
	return nil, false
}

// Allocatable is the node's whole capacity in the column: every device it
// counts, or the node's allocatable.
func (c Column) Allocatable(ctx context.Context, n NodeCapacity) int64 {
	b, devices := c.bits(ctx, n)
	switch {
	case !devices:
		return n.Allocatable(c.dim)
	case c.all:
		return boolCount(b.Count() > 0)
	}
	sum := int64(b.Count())
	for _, p := range c.parts {
		if _, dev := p.bits(ctx, n); !dev {
			sum += n.Allocatable(p.dim)
		}
	}
	return sum
}

// Free is what a gang may use of the column on a node now: free devices
// (or the node's free allocatable) less what other gangs hold there. held
// maps dimensions to held quantities on this node; a device dimension held
// by another gang counts against every column whose devices overlap it,
// which is exact for identical and disjoint kinds and errs on the safe side
// in between.
func (c Column) Free(ctx context.Context, n NodeCapacity, held Amounts) int64 {
	b, devices := c.bits(ctx, n)
	if !devices {
		return n.Free(c.dim) - held[c.dim]
	}
	alloc := c.d.allocated[n.Name()]
	overlap := c.d.heldOverlap(ctx, n, b, held)
	if c.all {
		if b.Count() == 0 || b.Intersects(alloc) || overlap > 0 {
			return 0
		}
		return 1
	}
	free := int64(b.CountWithout(alloc)) - overlap
	for _, p := range c.parts {
		if _, dev := p.bits(ctx, n); !dev {
			free += n.Free(p.dim) - held[p.dim]
		}
	}
	return free
}

// Counted is how many of the devices at positions on node the column
// counts: what it gains when those devices are freed (a preemption
// victim's, say).
func (c Column) Counted(ctx context.Context, n NodeCapacity, positions Bits) int64 {
	b, devices := c.bits(ctx, n)
	if !devices {
		return 0
	}
	if c.all {
		// The column counts 1 when every device of its kind is free.
		if b.Count() > 0 && b.CountWithout(positions) == 0 {
			return 1
		}
		return 0
	}
	return int64(b.Count() - b.CountWithout(positions))
}

// Allocatable is Column(dim, unions).Allocatable.
func (d *Devices) Allocatable(ctx context.Context, n NodeCapacity, dim v1.ResourceName, unions map[v1.ResourceName][]v1.ResourceName) int64 {
	return d.Column(dim, unions).Allocatable(ctx, n)
}

// Free is Column(dim, unions).Free.
func (d *Devices) Free(ctx context.Context, n NodeCapacity, dim v1.ResourceName, unions map[v1.ResourceName][]v1.ResourceName, held Amounts) int64 {
	return d.Column(dim, unions).Free(ctx, n, held)
}

// Counted is Column(dim, unions).Counted.
func (d *Devices) Counted(ctx context.Context, n NodeCapacity, dim v1.ResourceName, unions map[v1.ResourceName][]v1.ResourceName, positions Bits) int64 {
	return d.Column(dim, unions).Counted(ctx, n, positions)
}

// heldOverlap sums what other gangs hold on the node in device dimensions
// whose devices overlap bits.
func (d *Devices) heldOverlap(ctx context.Context, n NodeCapacity, bits Bits, held Amounts) int64 {
	if len(held) == 0 || len(bits) == 0 {
		return 0
	}
	var sum int64
	for _, h := range held.Names() {
		q := held[h]
		if q == 0 || !IsDeviceDimension(h) && !d.maybeMapped(h) {
			continue
		}
		hc := d.Column(h, nil)
		hb, devices := hc.bits(ctx, n)
		if !devices || !hb.Intersects(bits) {
			continue
		}
		if hc.all {
			sum += int64(hb.Count())
			continue
		}
		sum += q
	}
	return sum
}

// maybeMapped reports whether a held resource could be an extended resource
// a DeviceClass serves (cheap filter before resolving it).
func (d *Devices) maybeMapped(name v1.ResourceName) bool {
	return d.resolver != nil && isExtendedName(name)
}

func boolCount(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// ServedByDevices reports whether the column is served by devices on the
// node (rather than by its allocatable).
func (c Column) ServedByDevices(ctx context.Context, n NodeCapacity) bool {
	_, ok := c.bits(ctx, n)
	return ok
}
