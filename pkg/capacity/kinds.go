package capacity

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
)

// DimensionPrefix starts the name of every dimension the model adds for
// devices, so that such names never clash with a resource a node advertises.
// Names are internal to one scheduler process: Events describe kinds in
// words (Kind.Describe).
const DimensionPrefix = "devices.gpu-gang.x-k8s.io/"

// Kind is what one device request can take: the devices of a DeviceClass
// that also match the request's own selectors and whose taints the request
// tolerates. Two requests of the same class, selectors and tolerations are
// one Kind: their devices are interchangeable.
type Kind struct {
	// Class is the DeviceClass the request names.
	Class string
	// Selectors are the CEL expressions of the class, then of the request.
	Selectors []string
	// Tolerations are the request's device tolerations.
	Tolerations []resourceapi.DeviceToleration
	// Dimension is the kind's dimension name, derived from the fields above.
	Dimension v1.ResourceName
	// requestSelectors is how many of Selectors are the request's own, for
	// describing the kind to people.
	requestSelectors int
}

// NewKind builds the kind of a request on class with the request's own
// selectors and tolerations. Only CEL selectors exist in resource.k8s.io/v1.
func NewKind(class *resourceapi.DeviceClass, selectors []resourceapi.DeviceSelector, tolerations []resourceapi.DeviceToleration) *Kind {
	k := &Kind{Class: class.Name, Tolerations: tolerations}
	for _, s := range class.Spec.Selectors {
		if s.CEL != nil {
			k.Selectors = append(k.Selectors, s.CEL.Expression)
		}
	}
	for _, s := range selectors {
		if s.CEL != nil {
			k.Selectors = append(k.Selectors, s.CEL.Expression)
			k.requestSelectors++
		}
	}
	// NewKind runs for every request of every claim a gang reads, on every
	// planning pass: the hash and the name are written without fmt.
	h := fnvString(fnvOffset, k.Class, 0)
	for _, s := range k.Selectors {
		h = fnvString(h, s, 0)
	}
	for _, t := range k.Tolerations {
		h = fnvString(h, t.Key, 1)
		h = fnvString(h, string(t.Operator), 1)
		h = fnvString(h, t.Value, 1)
		h = fnvString(h, string(t.Effect), 0)
	}
	name := make([]byte, 0, len(DimensionPrefix)+len(k.Class)+17)
	name = append(append(append(name, DimensionPrefix...), k.Class...), '-')
	hex := strconv.AppendUint(nil, h, 16)
	for range 16 - len(hex) {
		name = append(name, '0')
	}
	k.Dimension = v1.ResourceName(append(name, hex...))
	return k
}

// FNV-1a, 64 bits (hash/fnv's New64a), over strings without copying them.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// fnvString adds s and then the separator end to the FNV-1a hash h.
func fnvString(h uint64, s string, end byte) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return (h ^ uint64(end)) * fnvPrime
}

// Describe names the kind for people: "gpu.nvidia.com devices" or
// "gpu.nvidia.com devices with device.attributes[...] == ...".
func (k *Kind) Describe() string {
	s := k.Class + " devices"
	if k.requestSelectors > 0 {
		s += " with " + strings.Join(k.Selectors[len(k.Selectors)-k.requestSelectors:], " && ")
	}
	return s
}

// IsDeviceDimension reports whether a dimension name is one the model added
// for a device kind.
func IsDeviceDimension(name v1.ResourceName) bool {
	return strings.HasPrefix(string(name), DimensionPrefix)
}

// Matcher decides which devices of an Inventory belong to a kind. It
// evaluates selectors with the CEL support of k8s.io/dynamic-resource-
// allocation, as the allocator does, and remembers the answer per node, so
// that each device is evaluated once per inventory. A Matcher belongs to one
// Inventory and is safe for concurrent use.
type Matcher struct {
	inv *Inventory
	cel *cel.Cache

	mu sync.Mutex
	// byKind caches, per kind dimension and node, the positions of the
	// node's devices that match; guarded by mu.
	byKind map[v1.ResourceName]map[string]Bits
	// errs are the CEL errors met, per kind dimension: of the node first
	// in name order, so that what people are told does not depend on the
	// order nodes were read in; guarded by mu.
	errs map[v1.ResourceName]*SelectorError
	// allocated is where the inventory's allocated devices sit, as last
	// asked (NewDevices); rails is what Devices.Rails read of each node,
	// kept while the node's allocated devices stay as they were.
	allocated allocatedCache
	rails     railsMemo
}

// NewMatcher returns a matcher for inv. celCache may be shared with other
// matchers.
func NewMatcher(inv *Inventory, celCache *cel.Cache) *Matcher {
	return &Matcher{inv: inv, cel: celCache, byKind: map[v1.ResourceName]map[string]Bits{}, errs: map[v1.ResourceName]*SelectorError{}}
}

// Inventory returns the inventory the matcher reads.
func (m *Matcher) Inventory() *Inventory { return m.inv }

// On returns the positions of node's devices that belong to kind. A
// selector that fails to compile or to evaluate on a device leaves that
// device out; Err says what failed.
func (m *Matcher) On(ctx context.Context, k *Kind, node string) Bits {
	m.mu.Lock()
	perNode := m.byKind[k.Dimension]
	if b, ok := perNode[node]; ok {
		m.mu.Unlock()
		return b
	}
	m.mu.Unlock()

	var out Bits
	var firstErr *SelectorError
	if nd := m.inv.Node(node); nd != nil {
		for i := range nd.Devices {
			ok, err := m.matches(ctx, k, &nd.Devices[i])
			if err != nil && firstErr == nil {
				firstErr = err
				firstErr.Node = node
			}
			if ok {
				out.set(i)
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byKind[k.Dimension] == nil {
		m.byKind[k.Dimension] = map[string]Bits{}
	}
	m.byKind[k.Dimension][node] = out
	if prev := m.errs[k.Dimension]; firstErr != nil && (prev == nil || firstErr.Node < prev.Node) {
		m.errs[k.Dimension] = firstErr
	}
	return out
}

// Err returns a selector error met for kind on the nodes read so far (the
// first device's on the first such node by name), nil if none.
func (m *Matcher) Err(k *Kind) *SelectorError {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.errs[k.Dimension]
}

// PartialOn reports whether some of node's devices of kind are partial
// (see Device.Partial): the model's count of them is not exact.
func (m *Matcher) PartialOn(ctx context.Context, k *Kind, node string) bool {
	nd := m.inv.Node(node)
	if nd == nil {
		return false
	}
	b := m.On(ctx, k, node)
	for i := range nd.Devices {
		if b.Has(i) && nd.Devices[i].Partial {
			return true
		}
	}
	return false
}

// matches reports whether one device belongs to kind: every selector
// matches and every NoSchedule or NoExecute taint is tolerated.
func (m *Matcher) matches(ctx context.Context, k *Kind, d *Device) (bool, *SelectorError) {
	for _, t := range d.Taints {
		if t.Effect != resourceapi.DeviceTaintEffectNoSchedule && t.Effect != resourceapi.DeviceTaintEffectNoExecute {
			continue
		}
		if !slices.ContainsFunc(k.Tolerations, func(tol resourceapi.DeviceToleration) bool { return resourceclaim.ToleratesTaint(tol, t) }) {
			return false, nil
		}
	}
	for i, expr := range k.Selectors {
		res := m.cel.GetOrCompile(expr)
		if res.Error != nil {
			return false, &SelectorError{Class: k.Class, OfClass: k.ofClass(i), Expression: expr, Compile: true, Err: res.Error}
		}
		ok, _, err := res.DeviceMatches(ctx, cel.Device{Driver: d.Driver, Attributes: d.Attributes, Capacity: d.Capacity})
		if err != nil {
			return false, &SelectorError{Class: k.Class, OfClass: k.ofClass(i), Expression: expr, Device: d.ID.String(), Err: cel.EnhanceRuntimeError(err)}
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

// ofClass reports whether selector i of the kind is its DeviceClass's, not
// the request's own.
func (k *Kind) ofClass(i int) bool { return i < len(k.Selectors)-k.requestSelectors }

// SelectorError is a CEL selector of a kind that fails on a device: it does
// not compile (the API server checks selectors when they are written, so
// this is rare: a cost limit, a newer CEL library), or, more often, it
// fails when evaluated on a device, which happens device by device: an
// attribute some devices lack read without has(), a comparison of values
// of different types. The allocator treats such a device as an error, not
// as a device that does not match, so a member whose claim meets one is not
// placed there, and the user must correct the expression.
type SelectorError struct {
	// Class is the kind's DeviceClass.
	Class string
	// OfClass is set when the selector is the class's, not the request's.
	OfClass    bool
	Expression string
	// Compile is set when the expression does not compile; Device and
	// Node are then where it was first read.
	Compile bool
	// Device is the device it failed on (driver/pool/device), Node the
	// device's node.
	Device string
	Node   string
	Err    error
}

func (e *SelectorError) Error() string {
	// The expression is quoted as written, in backquotes: %q would escape
	// the double quotes of attribute names, and selectors are as often
	// written with single quotes.
	whose := fmt.Sprintf("DeviceClass %s's CEL selector `%s`", e.Class, e.Expression)
	if !e.OfClass {
		whose = fmt.Sprintf("the CEL selector `%s` of a request for DeviceClass %s", e.Expression, e.Class)
	}
	if e.Compile {
		return fmt.Sprintf("%s does not compile: %v", whose, e.Err)
	}
	return fmt.Sprintf("%s fails on device %s: %v", whose, e.Device, e.Err)
}

func (e *SelectorError) Unwrap() error { return e.Err }

// SelectorError returns a selector error met on the kinds members ask for
// (every alternative of every request, then mapped extended resources, in
// member order), nil if none. Only nodes the matcher has read are known:
// call it after a pass read the members' kinds on every node.
func (d *Devices) SelectorError(members []*PodDevices) *SelectorError {
	for _, m := range members {
		if m == nil {
			continue
		}
		for _, c := range m.Claims {
			for _, r := range c.Requests {
				for _, a := range r.Alternatives {
					if err := d.matcher.Err(a.Kind); err != nil {
						return err
					}
				}
			}
		}
		for _, mp := range m.Mapped {
			if err := d.matcher.Err(mp.Kind); err != nil {
				return err
			}
		}
	}
	return nil
}
