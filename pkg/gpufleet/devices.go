package gpufleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/fleet"
)

// deviceView fetches the current devices at most once for one PreFilter:
// pods that ask for no GPU through requests or claims never need them.
type deviceView struct {
	pl   *Plugin
	m    *capacity.Matcher
	err  error
	done bool
}

// get returns the matcher of the current slices, nil when the plugin reads
// labels only.
func (dv *deviceView) get() (*capacity.Matcher, error) {
	if !dv.done {
		dv.done = true
		if dv.pl.devices != nil {
			dv.m, dv.err = dv.pl.devices.Current()
			if dv.m != nil {
				dv.pl.lastDevices.Store(dv.m)
			}
		}
	}
	return dv.m, dv.err
}

// hintDevices returns the devices queueing hints judge nodes with: those
// the last PreFilter read. Hints run for every waiting pod on every event,
// where listing every slice each time would cost too much; a slice that
// changed since is an event of its own, which its hint judges.
func (pl *Plugin) hintDevices() *capacity.Matcher {
	if m := pl.lastDevices.Load(); m != nil || pl.devices == nil {
		return m
	}
	m, _ := pl.devices.Current()
	return m
}

// nodeDevices returns a node's devices in m, nil when m is nil or the node
// publishes none.
func nodeDevices(m *capacity.Matcher, node string) []capacity.Device {
	if m == nil {
		return nil
	}
	if nd := m.Inventory().Node(node); nd != nil {
		return nd.Devices
	}
	return nil
}

// demandOf reads what a pod asks of NVIDIA GPUs (fleet.PodDemand) with the
// claims and DeviceClasses the scheduler's DRA manager sees, and the
// devices dv reads.
func (pl *Plugin) demandOf(ctx context.Context, pod *v1.Pod, dv *deviceView) (fleet.Demand, error) {
	var r *capacity.Reader
	if pl.dra != nil {
		r = &capacity.Reader{Claims: claimReader{pl.dra.ResourceClaims()}, Classes: pl.dra.DeviceClasses(), Resolver: pl.dra.DeviceClassResolver()}
	}
	d, err := fleet.PodDemand(pod, r, func(k *capacity.Kind) bool {
		m, err := dv.get()
		return err == nil && pl.kinds.selects(ctx, m, k)
	})
	if err == nil && dv.err != nil {
		err = dv.err // the kinds were not judged
	}
	return d, err
}

// claimReader reads claims from the DRA manager's claim tracker for
// capacity.Reader, which tells a claim that does not exist by the API's
// NotFound error: the tracker's assume cache says so with
// assumecache.ErrNotFound instead.
type claimReader struct{ claims fwk.ResourceClaimTracker }

func (r claimReader) Get(namespace, name string) (*resourceapi.ResourceClaim, error) {
	claim, err := r.claims.Get(namespace, name)
	if errors.Is(err, assumecache.ErrNotFound) {
		return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), name)
	}
	return claim, err
}

// gpuKinds remembers, for the devices of one inventory, which device kinds
// select GPUs (fleet.SelectsGPUs): a kind that selects none would otherwise
// be evaluated on every GPU node for every pod that asks for it. It starts
// afresh when the inventory changes. Safe for concurrent use.
type gpuKinds struct {
	mu sync.Mutex
	// matcher is the inventory's matcher the answers hold for; guarded
	// by mu.
	matcher *capacity.Matcher
	// selects maps kind dimensions to answers; guarded by mu.
	answers map[v1.ResourceName]bool
}

func (g *gpuKinds) selects(ctx context.Context, m *capacity.Matcher, k *capacity.Kind) bool {
	if m == nil {
		return false
	}
	g.mu.Lock()
	if g.matcher == m {
		if ok, known := g.answers[k.Dimension]; known {
			g.mu.Unlock()
			return ok
		}
	}
	g.mu.Unlock()
	ok := fleet.SelectsGPUs(ctx, m, k)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.matcher != m {
		g.matcher, g.answers = m, map[v1.ResourceName]bool{}
	}
	g.answers[k.Dimension] = ok
	return ok
}

// sliceDevices is what a slice publishes, as the inventory holds devices,
// for judging the slice's node by it alone (hints).
func sliceDevices(s *resourceapi.ResourceSlice) []capacity.Device {
	out := make([]capacity.Device, len(s.Spec.Devices))
	for i := range s.Spec.Devices {
		d := &s.Spec.Devices[i]
		out[i] = capacity.Device{
			ID:     structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, d.Name),
			Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name, Name: d.Name,
			Attributes: d.Attributes, Capacity: d.Capacity, Taints: d.Taints,
		}
	}
	return out
}

// sliceOf names the ResourceSlice that publishes a device, for Events; ""
// when none does any more.
func (pl *Plugin) sliceOf(p *fleet.DeviceAttributeError) string {
	if pl.dra == nil {
		return ""
	}
	list, err := pl.dra.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return ""
	}
	// Slices of a pool's older generation may still be listed: name the
	// newest, and of those the first by name, whatever the list's order.
	var found *resourceapi.ResourceSlice
	for _, s := range list {
		if s.Spec.Driver != p.Driver || s.Spec.Pool.Name != p.Pool ||
			!slices.ContainsFunc(s.Spec.Devices, func(d resourceapi.Device) bool { return d.Name == p.Device }) {
			continue
		}
		if found == nil || s.Spec.Pool.Generation > found.Spec.Pool.Generation ||
			(s.Spec.Pool.Generation == found.Spec.Pool.Generation && s.Name < found.Name) {
			found = s
		}
	}
	if found == nil {
		return ""
	}
	return found.Name
}

// describeDevice says where a device attribute comes from for people:
// "ResourceSlice n1-gpu.nvidia.com, device gpu-3".
func (pl *Plugin) describeDevice(p *fleet.DeviceAttributeError) string {
	if s := pl.sliceOf(p); s != "" {
		return fmt.Sprintf("ResourceSlice %s, device %s", s, p.Device)
	}
	return fmt.Sprintf("device %s of pool %s/%s", p.Device, p.Driver, p.Pool)
}
