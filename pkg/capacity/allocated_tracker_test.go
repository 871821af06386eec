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
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)}}
	c.Status.Allocation = allocation(node, devices...)
	return c
}

// Positions read through the tracker stand while it holds the same claim
// objects and allocations in flight, without listing the allocated set;
// any change to them lists it again; and a set that does not yet account
// for the objects (the tracker's handlers lag behind them) is used but
// never kept.
func TestAllocatedPositionsFollowTheTracker(t *testing.T) {
	m := NewMatcher(BuildInventory([]*resourceapi.ResourceSlice{
		sliceOf("a", gpus(8, "H100")...), sliceOf("b", gpus(8, "H100")...),
	}), testCEL)
	id := func(node, dev string) structured.DeviceID { return structured.MakeDeviceID(gpuDriver, node, dev) }
	tr := &fakeTracker{
		claims:    []*resourceapi.ResourceClaim{allocatedOn("c1", "a", "gpu-0", "gpu-1"), {ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c2", UID: "c2"}}},
		pending:   map[types.UID]*resourceapi.AllocationResult{},
		allocated: sets.New(id("a", "gpu-0"), id("a", "gpu-1")),
	}
	lists := 0
	read := func() map[string]int {
		t.Helper()
		d, err := NewDevicesFromTracker(m, NewRegistry(), nil, tr, func() (sets.Set[structured.DeviceID], error) {
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
	step("same objects", 0, map[string]int{"a": 2, "b": 0})

	tr.pending["c2"] = allocation("b", "gpu-3")
	tr.allocated.Insert(id("b", "gpu-3"))
	step("an allocation in flight", 1, map[string]int{"a": 2, "b": 1})
	step("still in flight", 0, map[string]int{"a": 2, "b": 1})

	// The claim's allocation is written; its new object is listed before
	// the tracker's set follows it.
	tr.claims = []*resourceapi.ResourceClaim{tr.claims[0], allocatedOn("c2", "b", "gpu-3", "gpu-4")}
	delete(tr.pending, "c2")
	tr.allocated.Delete(id("b", "gpu-3"))
	step("objects ahead of the set", 1, map[string]int{"a": 2, "b": 0})
	step("a lagging set is not kept", 1, map[string]int{"a": 2, "b": 0})
	tr.allocated.Insert(id("b", "gpu-3"), id("b", "gpu-4"))
	step("the set caught up", 1, map[string]int{"a": 2, "b": 2})
	step("kept once it accounts for the objects", 0, map[string]int{"a": 2, "b": 2})

	// Admin access takes no device.
	admin := allocatedOn("c3", "b", "gpu-7")
	admin.Status.Allocation.Devices.Results[0].AdminAccess = ptr.To(true)
	tr.claims = append(tr.claims, admin)
	step("a claim with admin access", 1, map[string]int{"a": 2, "b": 2})
	step("admin access accounted for", 0, map[string]int{"a": 2, "b": 2})

	tr.claims = tr.claims[1:]
	tr.allocated.Delete(id("a", "gpu-0"), id("a", "gpu-1"))
	step("a claim deleted", 1, map[string]int{"a": 0, "b": 2})
	step("and kept", 0, map[string]int{"a": 0, "b": 2})
}
