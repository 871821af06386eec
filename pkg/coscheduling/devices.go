package coscheduling

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	gangdra "github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// GPUs that reach pods through Dynamic Resource Allocation are capacity like
// any other: pkg/capacity owns the rules (which devices a request can take,
// which are free, how overlapping kinds stay exact), and this file reads
// them from the scheduler's DRA manager, the same listers and in-flight
// allocations DynamicResources reads. A planning pass asks the device
// source only when its members claim devices or ask for an extended
// resource a DeviceClass serves; otherwise it costs nothing.

// deviceSource is the plugin's handle on DRA. Nil when the framework has no
// DRA manager (then no pod can claim devices either).
type deviceSource struct {
	dra         fwk.SharedDRAManager
	inventories *capacity.Inventories
	// registry names the device kinds this plugin met, so that what one
	// gang holds of a kind can be read by another.
	registry *capacity.Registry
	reader   *capacity.Reader
	// allocator computes the allocations of the claims members share.
	allocator *gangdra.Allocator
}

func newDeviceSource(ctx context.Context, handle fwk.Handle) *deviceSource {
	dra := handle.SharedDRAManager()
	if dra == nil {
		return nil
	}
	inventories := capacity.ForDRAManager(ctx, dra)
	if factory := handle.SharedInformerFactory(); factory != nil {
		// Events on the slices and DeviceTaintRules spare a pass the list
		// of slices when nothing changed; without them it lists.
		if err := inventories.Watch(factory); err != nil {
			klog.FromContext(ctx).Error(err, "Reading ResourceSlices on every pass")
		}
	}
	return &deviceSource{
		dra:         dra,
		inventories: inventories,
		registry:    capacity.NewRegistry(),
		reader:      &capacity.Reader{Claims: dra.ResourceClaims(), Classes: dra.DeviceClasses(), Resolver: dra.DeviceClassResolver()},
		allocator:   gangdra.NewAllocator(dra, clock.RealClock{}),
	}
}

// pass returns the device side of capacity now: the current inventory and
// the devices allocated, in the API and in flight.
func (s *deviceSource) pass(ctx context.Context) (*capacity.Devices, error) {
	m, err := s.inventories.Current()
	if err != nil {
		return nil, err
	}
	claims := s.dra.ResourceClaims()
	devices, err := capacity.NewDevicesFromTracker(m, s.registry, s.dra.DeviceClassResolver(), claims, s.inventories.Claims(), func() (sets.Set[structured.DeviceID], error) {
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

// demand is what the members of one planning pass ask for.
type demand struct {
	// reqs[i] is member i's request: its plain amounts, plus device
	// dimensions when it takes devices.
	reqs []capacity.Amounts
	// devices is the device source of the pass; nil when no member takes
	// devices and no dimension is served by them: the plain pass.
	devices *capacity.Devices
	// gang is the device demand in planner dimensions; nil on a plain
	// pass.
	gang *capacity.Demand
	// pods are the members' device demands, by member.
	pods []*capacity.PodDevices
	// alternatives is how many firstAvailable alternatives the richest
	// request has: a pass may be retried with the next one.
	alternatives int
}

// accelerated reports whether member i is bound by topology: it asks for an
// accelerator, or takes devices (through its own claim or one it shares).
func (d *demand) accelerated(i int) bool {
	return usesAccelerators(d.reqs[i]) || d.gang != nil && d.gang.Accelerated[i]
}

// exact reports whether the model counts member i's devices exactly, so
// that DynamicResources' per-node verdict need not narrow its nodes.
func (d *demand) exact(i int) bool {
	return d.gang == nil || d.pods[i] == nil || !d.pods[i].Any() || d.gang.Exact[i]
}

// unions are the pass's union dimensions.
func (d *demand) unions() map[v1.ResourceName][]v1.ResourceName {
	if d.gang == nil {
		return nil
	}
	return d.gang.Unions
}

// demandOf reads what members ask for. alt chooses the firstAvailable
// alternative to plan with. A claim that does not exist yet or names an
// unknown class fails the pass with a status (and, for bad input, an
// Event on the gang).
func (pl *Plugin) demandOf(ctx context.Context, spec *gang.Spec, members []*v1.Pod, alt int) (*demand, *fwk.Status) {
	d := &demand{reqs: make([]capacity.Amounts, len(members))}
	for i, p := range members {
		d.reqs[i] = capacity.PodAmounts(p)
	}
	if pl.devices == nil {
		return d, nil
	}
	d.pods = make([]*capacity.PodDevices, len(members))
	anyDevices := false
	for i, p := range members {
		pd, err := pl.devices.reader.Pod(p)
		if err != nil {
			return nil, pl.claimProblem(spec, p, err)
		}
		d.pods[i] = pd
		anyDevices = anyDevices || pd.Any()
		for _, c := range pd.Claims {
			for _, r := range c.Requests {
				d.alternatives = max(d.alternatives, len(r.Alternatives))
			}
		}
	}
	if !anyDevices {
		return d, nil
	}
	pl.reportClassConflicts(spec, d.pods)
	devices, err := pl.devices.pass(ctx)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	d.devices = devices
	d.gang = devices.GangDemand(ctx, d.pods, alt)
	for i := range members {
		d.reqs[i].Add(d.gang.Extra[i])
	}
	return d, nil
}

// claimProblem turns a failure to read a member's claims into a status: a
// claim not created yet is worth waiting for, a claim that names an
// unknown DeviceClass is bad input that only its owner can fix.
func (pl *Plugin) claimProblem(spec *gang.Spec, pod *v1.Pod, err error) *fwk.Status {
	var missing *capacity.ClaimNotFoundError
	var class *capacity.ClassNotFoundError
	if spec == nil {
		// A plain pod: DynamicResources reports its claims.
		return fwk.NewStatus(fwk.Unschedulable, err.Error())
	}
	switch {
	case errors.As(err, &missing):
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s waits for %v", spec.Key, missing))
	case errors.As(err, &class):
		pl.events.gang(spec, pod, v1.EventTypeWarning, ReasonInvalidResourceClaim, "member %s: %v", pod.Name, class)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gang %s: %v", spec.Key, class))
	}
	return fwk.AsStatus(fmt.Errorf("reading the device claims of %s/%s: %w", pod.Namespace, pod.Name, err))
}

// column reads one dimension of the pass node by node, from the node's
// allocatable or its devices.
type column struct {
	name v1.ResourceName
	// devices is set when the dimension may be served by devices; the
	// zero column reads the node's allocatable alone.
	devices bool
	dev     capacity.Column
}

// columns resolves the pass's dimensions once.
func (d *demand) columns(dims []v1.ResourceName) []column {
	out := make([]column, len(dims))
	for i, name := range dims {
		out[i].name = name
		if d.devices == nil {
			continue
		}
		c := d.devices.Column(name, d.unions())
		if c.Devices() {
			out[i] = column{name: name, devices: true, dev: c}
		}
	}
	return out
}

// allocatable is node ni's whole capacity in the column.
func (c *column) allocatable(ctx context.Context, ni fwk.NodeInfo) int64 {
	if c.devices {
		return c.dev.Allocatable(ctx, nodeCapacity{ni})
	}
	return resourceQuantity(ni.GetAllocatable(), c.name)
}

// free is what the gang may use of the column on node ni now, less held.
func (c *column) free(ctx context.Context, ni fwk.NodeInfo, held capacity.Amounts) int64 {
	if c.devices {
		return c.dev.Free(ctx, nodeCapacity{ni}, held)
	}
	return nodeFree(ni, c.name) - held[c.name]
}

// nodeCapacity reads a NodeInfo as pkg/capacity's allocatable source.
type nodeCapacity struct{ ni fwk.NodeInfo }

func (n nodeCapacity) Name() string { return n.ni.Node().Name }
func (n nodeCapacity) Allocatable(name v1.ResourceName) int64 {
	return resourceQuantity(n.ni.GetAllocatable(), name)
}
func (n nodeCapacity) Free(name v1.ResourceName) int64 { return nodeFree(n.ni, name) }

// describe names a dimension of the pass for people: a resource name, or
// the devices a kind takes.
func (d *demand) describe(name string) string {
	if d.devices == nil || !capacity.IsDeviceDimension(v1.ResourceName(name)) {
		return name
	}
	return d.devices.DescribeDimension(v1.ResourceName(name), d.unions())
}

// chosen names the firstAvailable subrequests the pass planned with, for
// the plan's Event; "" when there are none.
func (d *demand) chosen() string {
	if d.gang == nil || len(d.gang.Chosen) == 0 {
		return ""
	}
	return "; firstAvailable: " + strings.Join(d.gang.Chosen, ", ")
}

// podDevicesFor reads what pod takes of devices, for Filter to keep it out
// of held devices; nil when it takes none. A claim the pod cannot read yet
// is DynamicResources' to report: the pod is then checked on its plain
// requests alone.
func (pl *Plugin) podDevicesFor(ctx context.Context, pod *v1.Pod, plain capacity.Amounts) *podDevices {
	if pl.devices == nil {
		return nil
	}
	pd, err := pl.devices.reader.Pod(pod)
	if err != nil || !pd.Any() {
		return nil
	}
	devices, err := pl.devices.pass(ctx)
	if err != nil {
		return nil
	}
	g := devices.GangDemand(ctx, []*capacity.PodDevices{pd}, 0)
	out := &podDevices{request: g.Extra[0], columns: map[v1.ResourceName]capacity.Column{}}
	for _, a := range []capacity.Amounts{plain, out.request} {
		for name := range a {
			out.columns[name] = devices.Column(name, g.Unions)
		}
	}
	return out
}

// markCounted notes, per template, whether the model counts its members'
// devices exactly. DynamicResources' verdict on a node is then capacity,
// which the planner counts itself (and counts what will free up), as it
// does NodeResourcesFit's; otherwise DynamicResources narrows the
// template's nodes to those where a member could allocate now.
//
// It also notes the allocated claims that pin the template's members to
// some nodes (template.pins), which the eligibility pass enforces whether
// or not DynamicResources' Filter runs: that Filter is where kube-scheduler
// enforces them, and a counted template skips it.
func (d *demand) markCounted(templates []*template, of []int) {
	for _, t := range templates {
		t.devicesCounted, t.devices, t.pins = false, nil, nil
		if d.pods != nil {
			t.pins = pinsOf(d.pods, t.members)
		}
		if d.gang == nil {
			continue
		}
		t.devices = d.pods[t.members[0]]
		takes, exact := false, true
		for _, i := range t.members {
			takes = takes || d.pods[i] != nil && d.pods[i].Any()
			exact = exact && d.exact(i)
		}
		t.devicesCounted = takes && exact
	}
}

// pinsOf returns the allocated claims that pin any of members (indices into
// pods), each once, in member order. Members of one template share their
// spec's claims, but a claim made from a template is each member's own:
// the template keeps to the nodes every member's claims reach, which may
// leave it none (then the gang waits, and says which claim pins it).
func pinsOf(pods []*capacity.PodDevices, members []int) []capacity.PinnedClaim {
	var out []capacity.PinnedClaim
	for _, i := range members {
		if pods[i] == nil {
			continue
		}
		for _, p := range pods[i].Pinned {
			if !slices.ContainsFunc(out, func(q capacity.PinnedClaim) bool { return q.Name == p.Name }) {
				out = append(out, p)
			}
		}
	}
	return out
}

// isUnion reports whether a dimension of the pass is a union of kinds.
func (d *demand) isUnion(name v1.ResourceName) bool {
	_, ok := d.unions()[name]
	return ok
}

// devicesOf returns where, on node, the devices allocated to pods' claims
// sit: their own claims and the claims kube-scheduler made for their
// extended resources.
func (pl *Plugin) devicesOf(devices *capacity.Devices, node string, pods []*v1.Pod) capacity.Bits {
	var ids []structured.DeviceID
	claims := pl.devices.dra.ResourceClaims()
	read := func(ns, name string) {
		if c, err := claims.Get(ns, name); err == nil {
			ids = append(ids, capacity.AllocatedDevices(c)...)
		}
	}
	for _, p := range pods {
		for _, st := range p.Status.ResourceClaimStatuses {
			if st.ResourceClaimName != nil {
				read(p.Namespace, *st.ResourceClaimName)
			}
		}
		for _, pc := range p.Spec.ResourceClaims {
			if pc.ResourceClaimName != nil {
				read(p.Namespace, *pc.ResourceClaimName)
			}
		}
		if st := p.Status.ExtendedResourceClaimStatus; st != nil {
			read(p.Namespace, st.ResourceClaimName)
		}
	}
	return devices.Matcher().Inventory().Positions(node, ids)
}

// onClaimDelete fails the attempt in flight of every gang with a member that
// reserved a node and uses the deleted claim: that member cannot bind as
// planned. Its siblings give back their nodes at once and the gang plans
// again when the claim is back (the claim controller recreates a claim from
// a template while the pod exists).
func (pl *Plugin) onClaimDelete(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	claim, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	pods, err := pl.podLister.Pods(claim.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	ctx := klog.NewContext(context.Background(), pl.logger)
	failed := map[gang.Key]bool{}
	for _, p := range pods {
		key, member := pl.unitOf(p)
		if !member || failed[key] || !usesClaim(p, claim.Name) {
			continue
		}
		if _, reserved := pl.ledger.Claims.Reservations(key)[p.UID]; !reserved || p.Spec.NodeName != "" {
			continue
		}
		failed[key] = true
		pl.failGang(ctx, key, ReasonClaimDeleted, fmt.Sprintf("ResourceClaim %s of member %s was deleted while the member waited for its gang; it plans again once the claim exists: the claim controller makes a template's claim again, a claim the pod names (resourceClaimName) must be created again", claim.Name, p.Name), false)
	}
}

// usesClaim reports whether pod names the claim, directly or through the
// claim made for it from a template.
func usesClaim(pod *v1.Pod, name string) bool {
	for _, pc := range pod.Spec.ResourceClaims {
		if pc.ResourceClaimName != nil && *pc.ResourceClaimName == name {
			return true
		}
	}
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.ResourceClaimName != nil && *st.ResourceClaimName == name {
			return true
		}
	}
	return false
}

// onClaimAdd tells a native PodGroup that the claim the claim controller
// just made for it from a template (DRAWorkloadResourceClaims) cannot be
// used: kube-scheduler 1.37's DynamicResources accepts a claim owned by a
// PodGroup only with its GenericWorkload gate on, which gpu-gang's scheduler
// runs with off, and otherwise holds the pods without a word. A claim the
// PodGroup names (resourceClaimName) is an ordinary shared claim and works.
//
// The Event regards the PodGroup the claim's controller reference names:
// the claim controller makes the claim as soon as it sees the PodGroup, and
// the plugin's own PodGroup informer may hear of the group only after this
// claim, so the group is not looked up.
func (pl *Plugin) onClaimAdd(obj interface{}) {
	claim, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	ref := metav1.GetControllerOf(claim)
	if ref == nil || ref.Kind != "PodGroup" || !strings.HasPrefix(ref.APIVersion, schedulingv1beta1.GroupName+"/") {
		return
	}
	group := &v1.ObjectReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: claim.Namespace, Name: ref.Name, UID: ref.UID}
	pl.events.gangObject(group, nil, v1.EventTypeWarning, ReasonInvalidResourceClaim,
		"ResourceClaim %s was made for this PodGroup from a template (spec.resourceClaims[].resourceClaimTemplateName); kube-scheduler 1.37 accepts such a claim only with its GenericWorkload gate on, which gpu-gang runs with off (see the README), so the members that use it cannot start: create the claim yourself and name it in resourceClaimName instead",
		claim.Name)
}
