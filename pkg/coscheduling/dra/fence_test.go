package dra

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

func fencePod(name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)}, Spec: v1.PodSpec{SchedulerName: "gpu-gang"}}
}

func gpuID(node, device string) structured.DeviceID {
	return structured.MakeDeviceID("gpu.nvidia.com", node, device)
}

// A fence is up only between RailFence's PreFilter and the gang plugin's:
// Raise signals the node's other devices in flight, Lower takes them back,
// and a fence a cycle left up (DynamicResources' PreFilter failed before
// the gang plugin's ran) comes down at the next Raise. A member reads as
// fenced only with its own, current fence; its fence goes when it reserves
// and when its gang's attempt ends.
func TestFenceLifecycle(t *testing.T) {
	ctx := context.Background()
	tracker := &fakeTracker{pending: map[types.UID]*resourceapi.ResourceClaim{}}
	f := &Fences{tracker: tracker, byPod: map[types.UID]*fenceEntry{}, later: map[types.UID]*v1.Pod{}, enabled: map[string]bool{"gpu-gang": true}}
	key := gang.Key{Namespace: "ns", Name: "job"}
	a, b, plain := fencePod("a"), fencePod("b"), fencePod("plain")
	fenceOf := func(node string) Fence {
		return Fence{Node: node, Chosen: []structured.DeviceID{gpuID(node, "gpu-2")}, Others: []structured.DeviceID{gpuID(node, "gpu-0"), gpuID(node, "gpu-1")}}
	}
	f.Set(key, map[types.UID]Fence{a.UID: fenceOf("n0"), b.UID: fenceOf("n1")})

	// a's first cycle read before its plan: turned away, and brought back
	// by the next cycle of another pod.
	require.False(t, f.AsFenced(a, Raised{}), "a plan made after DynamicResources read leaves the read unfenced")
	f.Later(a)
	later := f.Raise(ctx, b)
	require.Contains(t, later, "ns/a")
	up := tracker.pending[fenceUID]
	require.NotNil(t, up, "b's fence is in flight")
	require.Equal(t, []resourceapi.DeviceRequestAllocationResult{
		{Request: "fence", Driver: "gpu.nvidia.com", Pool: "n1", Device: "gpu-0"},
		{Request: "fence", Driver: "gpu.nvidia.com", Pool: "n1", Device: "gpu-1"},
	}, up.Status.Allocation.Devices.Results, "the fence holds n1's other devices, not the chosen one")
	r := f.Lower()
	require.Empty(t, tracker.pending, "lowered before the gang plugin reads devices")
	require.True(t, f.AsFenced(b, r))
	require.False(t, f.AsFenced(a, r), "b's fence is not a's")
	require.True(t, f.AsFenced(plain, Raised{}), "a pod without a fence reads as it should")

	// a new plan in the cycle replaces the fence the cycle raised.
	f.Raise(ctx, a)
	r = f.Lower()
	f.Set(key, map[types.UID]Fence{a.UID: fenceOf("n2")})
	require.False(t, f.AsFenced(a, r), "a plan made in the cycle makes its read stale")

	// A cycle that ends before the gang plugin's PreFilter leaves its
	// fence up; the next Raise takes it down first.
	f.Raise(ctx, a)
	require.NotNil(t, tracker.pending[fenceUID])
	f.Raise(ctx, plain)
	require.Empty(t, tracker.pending, "a pod without a fence runs unfenced")

	require.Equal(t, map[string][]structured.DeviceID{"n2": {gpuID("n2", "gpu-2")}}, f.ChosenByOthers(gang.Key{Namespace: "ns", Name: "other"}))
	require.Nil(t, f.ChosenByOthers(key), "a gang's own choices are not promised away from it")
	f.Done(a.UID)
	require.False(t, f.Fenced(a.UID), "reserved: DynamicResources holds its devices")
	f.Set(key, map[types.UID]Fence{b.UID: fenceOf("n1")})
	f.Forget(key)
	require.False(t, f.Fenced(b.UID), "the attempt ended")

	f.Disable("gpu-gang")
	f.Set(key, map[types.UID]Fence{a.UID: fenceOf("n0")})
	require.True(t, f.AsFenced(a, Raised{}), "a profile whose RailFence cannot fence holds no member to one")
}
