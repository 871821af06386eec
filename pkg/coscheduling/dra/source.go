package dra

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
)

// GPUs that reach pods through Dynamic Resource Allocation are capacity like
// any other: pkg/capacity owns the rules (which devices a request can take,
// which are free, how overlapping kinds stay exact), and DeviceSource reads
// them from the scheduler's DRA manager, the same listers and in-flight
// allocations DynamicResources reads. A planning pass asks the device
// source only when its members claim devices or ask for an extended
// resource a DeviceClass serves; otherwise it costs nothing.

// DeviceSource is the gang plugin's handle on DRA. A nil *DeviceSource is
// valid and means the framework has no DRA manager (then no pod can claim
// devices either): Demand reads plain requests only and PodFit reads
// nothing.
type DeviceSource struct {
	manager     fwk.SharedDRAManager
	inventories *capacity.Inventories
	// registry names the device kinds this plugin met, so that what one
	// gang holds of a kind can be read by another.
	registry *capacity.Registry
	reader   *capacity.Reader
	// allocator computes the allocations of the claims members share.
	allocator *Allocator
}

// NewDeviceSource builds the device source on the handle's DRA manager; nil
// when the framework has none.
func NewDeviceSource(ctx context.Context, handle fwk.Handle) *DeviceSource {
	manager := handle.SharedDRAManager()
	if manager == nil {
		return nil
	}
	inventories := capacity.ForDRAManager(ctx, manager)
	if factory := handle.SharedInformerFactory(); factory != nil {
		// Events on the slices and DeviceTaintRules spare a pass the list
		// of slices when nothing changed; without them it lists.
		if err := inventories.Watch(factory); err != nil {
			klog.FromContext(ctx).Error(err, "Reading ResourceSlices on every pass")
		}
	}
	return &DeviceSource{
		manager:     manager,
		inventories: inventories,
		registry:    capacity.NewRegistry(),
		reader:      &capacity.Reader{Claims: manager.ResourceClaims(), Classes: manager.DeviceClasses(), Resolver: manager.DeviceClassResolver()},
		allocator:   NewAllocator(manager, clock.RealClock{}),
	}
}

// Manager is the framework's DRA manager the source reads: its claims,
// classes and slices.
func (s *DeviceSource) Manager() fwk.SharedDRAManager { return s.manager }

// Inventories is the source's cache of ResourceSlices and of the claims
// made for extended resources.
func (s *DeviceSource) Inventories() *capacity.Inventories { return s.inventories }

// Allocator computes the allocations of the claims gpu-gang allocates
// itself.
func (s *DeviceSource) Allocator() *Allocator { return s.allocator }

// Pass returns the device side of capacity now: the current inventory and
// the devices allocated, in the API and in flight.
func (s *DeviceSource) Pass(ctx context.Context) (*capacity.Devices, error) {
	m, err := s.inventories.Current()
	if err != nil {
		return nil, err
	}
	claims := s.manager.ResourceClaims()
	devices, err := capacity.NewDevicesFromTracker(m, s.registry, s.manager.DeviceClassResolver(), claims, s.inventories.Claims(), func() (sets.Set[structured.DeviceID], error) {
		var allocated sets.Set[structured.DeviceID]
		// The tracker refuses a read that raced with a change; read again,
		// as DynamicResources does.
		err := wait.PollUntilContextTimeout(ctx, 0, allocatedReadTimeout, true, func(context.Context) (bool, error) {
			var err error
			allocated, err = claims.ListAllAllocatedDevices()
			return err == nil, nil
		})
		return allocated, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing allocated devices: %w", err)
	}
	return devices, nil
}

// allocatedReadTimeout bounds the retries of a raced read of allocations.
const allocatedReadTimeout = 5e9 // 5s

// DemandReports hears what reading a pass's demand finds wrong with its
// members' claims; the plugin turns it into statuses and Events.
type DemandReports interface {
	// ClaimUnreadable returns the status that fails the pass when
	// member pod's claims cannot be read (err says why).
	ClaimUnreadable(pod *v1.Pod, err error) *fwk.Status
	// ClassConflicts hears the members' device demands once they are
	// read, before the pass counts them.
	ClassConflicts(pods []*capacity.PodDevices)
}

// Demand reads what members ask for. alt chooses the firstAvailable
// alternative to plan with. A claim that cannot be read fails the pass
// with the status reports returns for it.
func (s *DeviceSource) Demand(ctx context.Context, members []*v1.Pod, alt int, reports DemandReports) (*PassDemand, *fwk.Status) {
	d := &PassDemand{Requests: make([]capacity.Amounts, len(members))}
	for i, p := range members {
		d.Requests[i] = capacity.PodAmounts(p)
	}
	if s == nil {
		return d, nil
	}
	d.Pods = make([]*capacity.PodDevices, len(members))
	anyDevices := false
	for i, p := range members {
		pd, err := s.reader.Pod(p)
		if err != nil {
			return nil, reports.ClaimUnreadable(p, err)
		}
		d.Pods[i] = pd
		anyDevices = anyDevices || pd.Any()
		for _, c := range pd.Claims {
			for _, r := range c.Requests {
				d.Alternatives = max(d.Alternatives, len(r.Alternatives))
			}
		}
	}
	if !anyDevices {
		return d, nil
	}
	reports.ClassConflicts(d.Pods)
	devices, err := s.Pass(ctx)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	d.Devices = devices
	d.Gang = devices.GangDemand(ctx, d.Pods, alt)
	for i := range members {
		d.Requests[i].Add(d.Gang.Extra[i])
	}
	return d, nil
}

// AllocatedPositions returns where, on node, the devices allocated to pods'
// claims sit (AllocatedDevices).
func (s *DeviceSource) AllocatedPositions(devices *capacity.Devices, node string, pods []*v1.Pod) capacity.Bits {
	var ids []structured.DeviceID
	for _, p := range pods {
		ids = append(ids, s.AllocatedDevices(p)...)
	}
	return devices.Matcher().Inventory().Positions(node, ids)
}

// AllocatedDevices lists the devices allocated to pod's claims, as the DRA
// manager has them: its own claims and the claim kube-scheduler made for
// its extended resources.
func (s *DeviceSource) AllocatedDevices(pod *v1.Pod) []structured.DeviceID {
	var ids []structured.DeviceID
	claims := s.manager.ResourceClaims()
	read := func(name string) {
		if c, err := claims.Get(pod.Namespace, name); err == nil {
			ids = append(ids, capacity.AllocatedDevices(c)...)
		}
	}
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.ResourceClaimName != nil {
			read(*st.ResourceClaimName)
		}
	}
	for _, pc := range pod.Spec.ResourceClaims {
		if pc.ResourceClaimName != nil {
			read(*pc.ResourceClaimName)
		}
	}
	if st := pod.Status.ExtendedResourceClaimStatus; st != nil {
		read(st.ResourceClaimName)
	}
	return ids
}
