package capacity

import (
	"testing"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"
)

// fakeTracker is a claim tracker as NewDevicesFromTracker reads it: the
// claim objects it lists, allocations in flight by claim, and its set of
// allocated devices, which a test may leave behind the objects, as the
// real tracker's event handlers do for a moment.
type fakeTracker struct {
	fwk.ResourceClaimTracker
	claims    []*resourceapi.ResourceClaim
	pending   map[types.UID]*resourceapi.AllocationResult
	allocated sets.Set[structured.DeviceID]
}

func (f *fakeTracker) List() ([]*resourceapi.ResourceClaim, error) { return f.claims, nil }
func (f *fakeTracker) GetPendingAllocation(uid types.UID) *resourceapi.AllocationResult {
	return f.pending[uid]
}

func allocation(node string, devices ...string) *resourceapi.AllocationResult {
	a := &resourceapi.AllocationResult{}
	for _, d := range devices {
		a.Devices.Results = append(a.Devices.Results, resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: gpuDriver, Pool: node, Device: d})
	}
	return a
}

func allocatedOn(name, node string, devices ...string) *resourceapi.ResourceClaim {
	c := unallocated(name)
	c.Status.Allocation = allocation(node, devices...)
	return c
}

func unallocated(name string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), ResourceVersion: "1"}}
}

// Positions read through the tracker stand while the claim watch sees no
// event and the claims read unallocated have the same allocations in
// flight, without listing the claims or the allocated set; any change to
// them lists again; and positions are kept only from a read whose claims
// are the ones the watch knows (the tracker's handlers and ours run in no
// order) and whose allocated set accounts for them (the tracker's set lags
// behind its objects for a moment).
func TestAllocatedPositionsFollowTheTracker(t *testing.T) {
	m := NewMatcher(BuildInventory([]*resourceapi.ResourceSlice{
		sliceOf("a", gpus(8, "H100")...), sliceOf("b", gpus(8, "H100")...),
	}), testCEL)
	id := func(node, dev string) structured.DeviceID { return structured.MakeDeviceID(gpuDriver, node, dev) }
	tr := &fakeTracker{
		claims:    []*resourceapi.ResourceClaim{allocatedOn("c1", "a", "gpu-0", "gpu-1"), unallocated("c2")},
		pending:   map[types.UID]*resourceapi.AllocationResult{},
		allocated: sets.New(id("a", "gpu-0"), id("a", "gpu-1")),
	}
	w := newClaimWatch()
	deliver := func(claims ...*resourceapi.ResourceClaim) {
		for _, c := range claims {
			w.set(c.Namespace+"/"+c.Name, c, true)
		}
	}
	deliver(tr.claims...)
	lists := 0
	read := func() map[string]int {
		t.Helper()
		d, err := NewDevicesFromTracker(m, NewRegistry(), nil, tr, w, func() (sets.Set[structured.DeviceID], error) {
			lists++
			return tr.allocated.Clone(), nil
		})
		require.NoError(t, err)
		return map[string]int{"a": d.Allocated("a").Count(), "b": d.Allocated("b").Count()}
	}
	step := func(name string, wantLists int, want map[string]int) {
		t.Helper()
		before := lists
		require.Equal(t, want, read(), name)
		require.Equal(t, wantLists, lists-before, "%s: lists of the allocated set", name)
	}

	step("first read", 1, map[string]int{"a": 2, "b": 0})
	step("no event", 0, map[string]int{"a": 2, "b": 0})

	tr.pending["c2"] = allocation("b", "gpu-3")
	tr.allocated.Insert(id("b", "gpu-3"))
	step("an allocation in flight", 1, map[string]int{"a": 2, "b": 1})
	step("still in flight", 0, map[string]int{"a": 2, "b": 1})

	// The claim's allocation is written and assumed: the tracker lists a
	// new object, the informer has not delivered it, and the tracker's
	// set has not followed the object yet.
	written := allocatedOn("c2", "b", "gpu-3", "gpu-4")
	written.ResourceVersion = "2"
	tr.claims = []*resourceapi.ResourceClaim{tr.claims[0], written}
	delete(tr.pending, "c2")
	tr.allocated.Delete(id("b", "gpu-3"))
	step("the allocation in flight ended", 1, map[string]int{"a": 2, "b": 0})
	step("the tracker is ahead of the watch", 1, map[string]int{"a": 2, "b": 0})
	// The informer delivers its own object of that version to our
	// handler; the tracker keeps the assumed one.
	delivered := written.DeepCopy()
	deliver(delivered)
	step("a lagging set is not kept", 1, map[string]int{"a": 2, "b": 0})
	tr.allocated.Insert(id("b", "gpu-3"), id("b", "gpu-4"))
	step("the set caught up", 1, map[string]int{"a": 2, "b": 2})
	step("kept once it accounts for the claims", 0, map[string]int{"a": 2, "b": 2})

	// Admin access takes no device.
	admin := allocatedOn("c3", "b", "gpu-7")
	admin.Status.Allocation.Devices.Results[0].AdminAccess = ptr.To(true)
	deliver(admin)
	step("the watch is ahead of the tracker", 1, map[string]int{"a": 2, "b": 2})
	tr.claims = append(tr.claims, admin)
	step("a claim with admin access", 1, map[string]int{"a": 2, "b": 2})
	step("admin access accounted for", 0, map[string]int{"a": 2, "b": 2})

	tr.claims = tr.claims[1:]
	tr.allocated.Delete(id("a", "gpu-0"), id("a", "gpu-1"))
	w.set("ns/c1", nil, false)
	step("a claim deleted", 1, map[string]int{"a": 0, "b": 2})
	step("and kept", 0, map[string]int{"a": 0, "b": 2})

	// A plugin allocates and assumes a claim, without an allocation in
	// flight before.
	c4 := allocatedOn("c4", "a", "gpu-5")
	tr.claims = append(tr.claims, c4)
	tr.allocated.Insert(id("a", "gpu-5"))
	w.Changed()
	step("an assumed allocation", 1, map[string]int{"a": 1, "b": 2})

	// Without a watch, every read lists.
	d, err := NewDevicesFromTracker(m, NewRegistry(), nil, tr, nil, func() (sets.Set[structured.DeviceID], error) {
		lists++
		return tr.allocated.Clone(), nil
	})
	require.NoError(t, err)
	require.Equal(t, 1, d.Allocated("a").Count())
	before := lists
	_, err = NewDevicesFromTracker(m, NewRegistry(), nil, tr, nil, func() (sets.Set[structured.DeviceID], error) {
		lists++
		return tr.allocated.Clone(), nil
	})
	require.NoError(t, err)
	require.Equal(t, 1, lists-before, "lists without a watch")
}

// The claim watch keeps, by pod, the claims kube-scheduler made for pods'
// extended resources (annotated, controlled by the pod) as its handler
// sees them added, changed and deleted.
func TestClaimWatchKeepsExtendedResourceClaims(t *testing.T) {
	w := newClaimWatch()
	pod := PodRef{Namespace: "ns", UID: "pod-a"}
	ext := func(name string, owner types.UID, controller bool) *resourceapi.ResourceClaim {
		c := unallocated(name)
		c.Annotations = map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"}
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "a", UID: owner, Controller: ptr.To(controller)}}
		return c
	}
	require.False(t, w.HasExtendedResourceClaim(pod), "no claim yet")
	w.set("ns/owned", ext("owned", "pod-a", false), true)
	require.False(t, w.HasExtendedResourceClaim(pod), "owned, not controlled")
	w.set("ns/other", ext("other", "pod-b", true), true)
	require.False(t, w.HasExtendedResourceClaim(pod), "another pod's")
	w.set("ns/x", ext("x", "pod-a", true), true)
	require.True(t, w.HasExtendedResourceClaim(pod), "the pod's claim added")
	w.set("ns/y", ext("y", "pod-a", true), true)
	plain := ext("x", "pod-a", true)
	plain.Annotations = nil
	w.set("ns/x", plain, true)
	require.True(t, w.HasExtendedResourceClaim(pod), "one of two claims lost its annotation")
	w.set("ns/y", nil, false)
	require.False(t, w.HasExtendedResourceClaim(pod), "both gone")
	require.Len(t, w.extended, 1, "only pod-b's claim is counted")
}
