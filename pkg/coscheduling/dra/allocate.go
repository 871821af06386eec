package dra

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/utils/clock"
)

// Allocator computes an allocation with kube-scheduler's own structured
// allocator, over what the scheduler's DRA manager holds: the published
// devices less those allocated, in the API and in flight. It makes no API
// call, so a scheduling cycle may run it.
type Allocator struct {
	// DRA is the scheduler's DRA manager.
	DRA fwk.SharedDRAManager
	// Features are DynamicResources' allocator features.
	Features structured.Features
	// Clock stamps the allocation as DynamicResources would.
	Clock clock.PassiveClock
	// CEL caches compiled device selectors; NewAllocator gives one.
	CEL *cel.Cache
}

// ErrNoFit says the node's free devices do not satisfy the claim: the
// same plan would fail again.
var ErrNoFit = errors.New("the node's free devices do not satisfy it")

// gatherTries bounds the reads of the allocated devices that raced a
// change of the claims (the tracker then refuses the read).
const gatherTries = 20

// Allocate allocates claim on node. A failure that may pass if tried again
// (the tracker kept refusing the read of allocated devices) is Transient;
// ErrNoFit means the node cannot hold the claim.
func (a *Allocator) Allocate(ctx context.Context, node *v1.Node, claim *resourceapi.ResourceClaim) (*resourceapi.AllocationResult, error) {
	results, err := a.AllocateAmong(ctx, node, []*resourceapi.ResourceClaim{claim}, nil)
	if err != nil {
		return nil, err
	}
	return &results[0], nil
}

// AllocateAmong allocates claims together on node, as one pod's claims are
// allocated, without the node's devices in excluded: the allocator sees
// the node's slices without them. The results are in claims' order.
func (a *Allocator) AllocateAmong(ctx context.Context, node *v1.Node, claims []*resourceapi.ResourceClaim, excluded sets.Set[structured.DeviceID]) ([]resourceapi.AllocationResult, error) {
	state, list, err := a.read(ctx)
	if err != nil {
		return nil, err
	}
	return a.allocate(ctx, state, reachableFrom(list, node.Name, excluded), node, claims)
}

// read reads what the allocator works over: the devices allocated in the
// scheduler (in the API and in flight) and the published slices.
func (a *Allocator) read(ctx context.Context) (*structured.AllocatedState, []*resourceapi.ResourceSlice, error) {
	state, err := a.gather(ctx)
	if err != nil {
		return nil, nil, err
	}
	list, err := a.DRA.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return nil, nil, err
	}
	return state, list, nil
}

// allocate runs kube-scheduler's allocator for claims on node over the
// slices list, with state allocated.
func (a *Allocator) allocate(ctx context.Context, state *structured.AllocatedState, list []*resourceapi.ResourceSlice, node *v1.Node, claims []*resourceapi.ResourceClaim) ([]resourceapi.AllocationResult, error) {
	allocator, err := structured.NewAllocator(ctx, a.Features, *state, a.DRA.DeviceClasses(), list, a.CEL)
	if err != nil {
		return nil, err
	}
	results, err := allocator.Allocate(ctx, node, claims)
	if err != nil {
		return nil, err
	}
	if len(results) != len(claims) {
		return nil, ErrNoFit
	}
	// DynamicResources stamps an allocation it made with its time when
	// device binding conditions are on, and an allocation cannot change
	// once written: stamp it here, as it would.
	for i := range results {
		if results[i].AllocationTimestamp == nil {
			results[i].AllocationTimestamp = &metav1.Time{Time: a.Clock.Now()}
		}
	}
	return results, nil
}

// Batch allocates the claims of several pods of one plan, pod by pod: the
// devices allocated in the scheduler and the published slices are read
// once for all of them (each read walks the whole cluster), and the
// devices the batch gave one pod are not given to the next. A Batch
// belongs to one scheduling cycle.
type Batch struct {
	a *Allocator
	// state is what is allocated, with what the batch allocated; nil when
	// it must be read again.
	state *structured.AllocatedState
	// list is every published slice; own are the slices of the nodes'
	// own pools, found in list for the nodes the batch allocated on so
	// far; shared are those of no one node (network-attached pools).
	list   []*resourceapi.ResourceSlice
	own    map[string][]*resourceapi.ResourceSlice
	shared []*resourceapi.ResourceSlice
}

// Batch starts a batch over what the scheduler holds now.
func (a *Allocator) Batch(ctx context.Context) (*Batch, error) {
	state, list, err := a.read(ctx)
	if err != nil {
		return nil, err
	}
	b := &Batch{a: a, state: state, list: list, own: map[string][]*resourceapi.ResourceSlice{}}
	for _, s := range list {
		if s.Spec.NodeName == nil {
			b.shared = append(b.shared, s)
		}
	}
	return b, nil
}

// ownOf returns node's own slices. A plan puts its pods on a few nodes of
// many: the batch looks for the slices of those alone, once each.
func (b *Batch) ownOf(node string) []*resourceapi.ResourceSlice {
	if own, ok := b.own[node]; ok {
		return own
	}
	var own []*resourceapi.ResourceSlice
	for _, s := range b.list {
		if s.Spec.NodeName != nil && *s.Spec.NodeName == node {
			own = append(own, s)
		}
	}
	b.own[node] = own
	return own
}

// AllocateAmong is Allocator.AllocateAmong within the batch. A device the
// batch gave whole is kept from later pods; one shared or consumed in part
// makes the next call read the allocated devices again, which then holds
// the writes handed over in between (the in-flight claims).
func (b *Batch) AllocateAmong(ctx context.Context, node *v1.Node, claims []*resourceapi.ResourceClaim, excluded sets.Set[structured.DeviceID]) ([]resourceapi.AllocationResult, error) {
	if b.state == nil {
		state, err := b.a.gather(ctx)
		if err != nil {
			return nil, err
		}
		b.state = state
	}
	list := reachableFrom(b.ownOf(node.Name), node.Name, excluded)
	list = append(list, b.shared...)
	results, err := b.a.allocate(ctx, b.state, list, node, claims)
	if err != nil {
		return nil, err
	}
	for _, r := range results {
		for _, d := range r.Devices.Results {
			if d.ShareID != nil || len(d.ConsumedCapacity) > 0 {
				b.state = nil
				return results, nil
			}
			b.state.AllocatedDevices.Insert(structured.MakeDeviceID(d.Driver, d.Pool, d.Device))
		}
	}
	return results, nil
}

// reachableFrom returns the slices of list that node can reach: its own
// pools' and those that are not any one node's (network-attached pools,
// which the allocator checks against the node itself), less the excluded
// devices of its own pools. The allocator then reads one node's slices, not
// every node's, and a slice is copied only when it loses a device.
func reachableFrom(list []*resourceapi.ResourceSlice, node string, excluded sets.Set[structured.DeviceID]) []*resourceapi.ResourceSlice {
	out := make([]*resourceapi.ResourceSlice, 0, 4)
	for _, s := range list {
		switch {
		case s.Spec.NodeName == nil:
			out = append(out, s)
			continue
		case *s.Spec.NodeName != node:
			continue
		case excluded.Len() == 0:
			out = append(out, s)
			continue
		}
		c := *s
		c.Spec.Devices = make([]resourceapi.Device, 0, len(s.Spec.Devices))
		for _, d := range s.Spec.Devices {
			if !excluded.Has(structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name)) {
				c.Spec.Devices = append(c.Spec.Devices, d)
			}
		}
		out = append(out, &c)
	}
	return out
}

// gather reads the allocated devices. The tracker refuses a read that
// raced a change of the claims ("conflicting concurrent modification");
// DynamicResources reads again, and so does this, a bounded number of
// times, without sleeping long: the cycle waits.
func (a *Allocator) gather(ctx context.Context) (*structured.AllocatedState, error) {
	var state *structured.AllocatedState
	var last error
	backoff := wait.Backoff{Steps: gatherTries, Duration: 100 * time.Microsecond, Factor: 2, Cap: 10 * time.Millisecond}
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(context.Context) (bool, error) {
		state, last = a.DRA.ResourceClaims().GatherAllocatedState()
		return last == nil, nil
	})
	if err != nil {
		if last == nil {
			last = err // the context ended
		}
		return nil, &transientError{fmt.Errorf("reading the allocated devices: %w", last)}
	}
	return state, nil
}

// transientError wraps an error that may pass if the work is done again.
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// NewAllocator returns an allocator over manager with DynamicResources'
// features as the feature gates set them now.
func NewAllocator(manager fwk.SharedDRAManager, c clock.PassiveClock) *Allocator {
	return &Allocator{
		DRA:      manager,
		Features: dynamicresources.AllocatorFeatures(feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)),
		Clock:    c,
		CEL:      cel.NewCache(64, cel.Features{}),
	}
}
