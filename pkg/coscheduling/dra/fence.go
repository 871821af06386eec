package dra

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// A member that asks for GPUs through an extended resource a DeviceClass
// serves (nvidia.com/gpu on a DRA node) has no claim of its own for gpu-gang
// to write: DynamicResources makes one in its cycle and picks the devices
// first fit, from the allocated devices it reads once, in its PreFilter.
// To have it pick the devices a rail-aligned plan chose, gpu-gang fences the
// node's other devices of the class for that one read: the RailFence plugin,
// whose PreFilter runs before DynamicResources', signals them to the claim
// tracker as an allocation in flight, and the gang plugin's PreFilter, which
// runs right after DynamicResources', takes the fence down again before it
// reads a device itself. So DynamicResources' allocator sees the chosen
// devices free on the member's node and nothing else of the class, and every
// other cycle, and every other reader of the tracker, sees no fence.
//
// The fence's claim is a name DynamicResources itself gives its in-memory
// claims, which the tracker takes in flight without looking it up; it is
// never written to the API server.

// fenceClaimName is the name the tracker takes in flight without a claim
// object behind it (DynamicResources' own in-memory claims).
const fenceClaimName = "<extended-resources>"

// fenceUID is the in-flight identity of the one fence up at a time.
const fenceUID = types.UID("gpu-gang-rail-fence")

// Fence is what a member's cycle fences on its node: every device of the
// classes it asks for through extended resources but the ones its plan
// chose.
type Fence struct {
	// Node is the node the member's plan put it on.
	Node string
	// Chosen are the devices the plan chose for it there.
	Chosen []structured.DeviceID
	// Others are the node's other devices of those classes: fenced.
	Others []structured.DeviceID
}

// fenceEntry is a member's fence, with the claim that signals it.
type fenceEntry struct {
	gang  gang.Key
	fence Fence
	claim *resourceapi.ResourceClaim
}

// Fences holds, per member of a rail-aligned plan that asks for its GPUs
// through an extended resource, the fence its cycles raise, from the plan
// until the member reserves its node or its gang's attempt ends. Safe for
// concurrent use; raised and lowered from the scheduling loop alone.
type Fences struct {
	tracker fwk.ResourceClaimTracker
	mu      sync.Mutex
	byPod   map[types.UID]*fenceEntry
	// up is the fence raised in the cycle now, nil when none is.
	up *fenceEntry
	// enabled are the profiles whose RailFence plugin raises fences ahead
	// of DynamicResources: only their plans fence.
	enabled map[string]bool
	// later are the members turned away because the cycle that planned
	// them read the devices unfenced; the next cycle activates them.
	later map[types.UID]*v1.Pod
}

var (
	fencesMu sync.Mutex
	fences   = map[fwk.ResourceClaimTracker]*Fences{}
)

// FencesFor returns the fences of a scheduler's claim tracker (its DRA
// manager's), the same to the gang plugin and the RailFence plugin of
// every profile; nil without DRA. It is forgotten when ctx ends.
func FencesFor(ctx context.Context, manager fwk.SharedDRAManager) *Fences {
	if manager == nil {
		return nil
	}
	tracker := manager.ResourceClaims()
	fencesMu.Lock()
	defer fencesMu.Unlock()
	if f, ok := fences[tracker]; ok {
		return f
	}
	f := &Fences{tracker: tracker, byPod: map[types.UID]*fenceEntry{}, later: map[types.UID]*v1.Pod{}, enabled: map[string]bool{}}
	fences[tracker] = f
	context.AfterFunc(ctx, func() {
		fencesMu.Lock()
		defer fencesMu.Unlock()
		if fences[tracker] == f {
			delete(fences, tracker)
		}
	})
	return f
}

// Enable says that profile's RailFence plugin raises the fences, ahead of
// DynamicResources: its plans then align members that ask for GPUs through
// an extended resource.
func (f *Fences) Enable(profile string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.enabled[profile] = true
}

// Disable says that profile's RailFence plugin cannot fence (it runs after
// DynamicResources): its members are no longer held to their fences.
func (f *Fences) Disable(profile string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.enabled[profile] = false
}

// Enabled reports whether profile's plans may fence (Enable).
func (f *Fences) Enabled(profile string) bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.enabled[profile]
}

// Set makes fences, by member UID, the fences of gang's plan, in place of
// those of its earlier plans.
func (f *Fences) Set(key gang.Key, byPod map[types.UID]Fence) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgetLocked(key)
	for uid, fence := range byPod {
		f.byPod[uid] = &fenceEntry{gang: key, fence: fence, claim: fenceClaim(fence)}
	}
}

// Forget drops gang's fences: its attempt ended.
func (f *Fences) Forget(key gang.Key) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgetLocked(key)
}

func (f *Fences) forgetLocked(key gang.Key) {
	for uid, e := range f.byPod {
		if e.gang == key {
			delete(f.byPod, uid)
			delete(f.later, uid)
		}
	}
}

// Done drops member pod's fence: it reserved its node, and
// DynamicResources holds the devices it picked in flight.
func (f *Fences) Done(pod types.UID) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.byPod, pod)
}

// Raise fences pod's node for the cycle now, if pod has a fence; it
// lowers first a fence a cycle that ended early left up. It returns the
// members turned away earlier for want of a fence, for the caller to
// activate.
func (f *Fences) Raise(ctx context.Context, pod *v1.Pod) map[string]*v1.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lowerLocked()
	var later map[string]*v1.Pod
	if len(f.later) > 0 {
		later = make(map[string]*v1.Pod, len(f.later))
		for uid, p := range f.later {
			if uid != pod.UID {
				later[p.Namespace+"/"+p.Name] = p
			}
			delete(f.later, uid)
		}
	}
	e, ok := f.byPod[pod.UID]
	if !ok {
		return later
	}
	if err := f.tracker.SignalClaimPendingAllocation(fenceUID, e.claim); err != nil {
		// The tracker refuses no in-memory claim today; a tracker that
		// did leaves the member unfenced, and the gang plugin turns it
		// away rather than let it take devices first fit.
		klog.FromContext(ctx).Error(err, "Fencing a member's node for DynamicResources", "pod", klog.KObj(pod), "node", e.fence.Node)
		return later
	}
	f.up = e
	klog.FromContext(ctx).V(5).Info("Fenced the node's other devices for the member's cycle", "pod", klog.KObj(pod), "node", e.fence.Node, "chosen", len(e.fence.Chosen), "fenced", len(e.fence.Others))
	return later
}

// Raised is the fence a cycle raised, as Lower took it down.
type Raised struct{ e *fenceEntry }

// Lower takes down the fence of the cycle now, if one is up, and returns
// it, for AsFenced to judge once the cycle planned.
func (f *Fences) Lower() Raised {
	if f == nil {
		return Raised{}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	up := f.up
	f.lowerLocked()
	return Raised{up}
}

// AsFenced reports whether pod's cycle, which raised r, read
// DynamicResources' allocated devices as pod's fence now has them: pod
// has no fence, or r is it. A plan made or changed in the cycle, after
// DynamicResources read, makes the read stale.
func (f *Fences) AsFenced(pod *v1.Pod, r Raised) bool {
	if f == nil {
		return true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.byPod[pod.UID]
	return !ok || e == r.e || !f.enabled[pod.Spec.SchedulerName]
}

// Fenced reports whether pod has a fence its cycles must raise.
func (f *Fences) Fenced(pod types.UID) bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.byPod[pod]
	return ok
}

// ChosenByOthers returns, by node, the devices the plans of gangs other
// than key chose for their fenced members: not allocated yet, but
// promised, so that no other plan chooses them too. Nil when there are
// none.
func (f *Fences) ChosenByOthers(key gang.Key) map[string][]structured.DeviceID {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out map[string][]structured.DeviceID
	for _, e := range f.byPod {
		if e.gang == key {
			continue
		}
		if out == nil {
			out = map[string][]structured.DeviceID{}
		}
		out[e.fence.Node] = append(out[e.fence.Node], e.fence.Chosen...)
	}
	return out
}

// Later remembers pod, turned away because its cycle read the devices
// unfenced, for the next cycle to activate.
func (f *Fences) Later(pod *v1.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.later[pod.UID] = pod
}

func (f *Fences) lowerLocked() {
	if f.up == nil {
		return
	}
	f.tracker.MaybeRemoveClaimPendingAllocation(fenceUID, true)
	f.up = nil
}

// fenceClaim is the in-memory claim whose allocation in flight fences
// fence's other devices.
func fenceClaim(fence Fence) *resourceapi.ResourceClaim {
	results := make([]resourceapi.DeviceRequestAllocationResult, len(fence.Others))
	for i, id := range fence.Others {
		results[i] = resourceapi.DeviceRequestAllocationResult{Request: "fence", Driver: id.Driver.String(), Pool: id.Pool.String(), Device: id.Device.String()}
	}
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: fenceClaimName, UID: fenceUID},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: results},
		}},
	}
}
