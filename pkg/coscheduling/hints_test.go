package coscheduling

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// A pod turned away for devices is queued again when a claim frees
// devices (deallocated or deleted while allocated, also as a tombstone)
// and when a claim it names appears; other claim changes skip it, since
// each failed attempt lengthens its backoff. The plugin registers claim,
// slice and DeviceClass events only where DRA is on.
func TestClaimEventsRequeueWhenDevicesFree(t *testing.T) {
	env, job := draGang(t, "job", 2, gpuClaimSpec(scheduling.DeviceClassGPU, 8, "H100"), "H100", "H100")
	pod := job[0]
	logger, _ := ktesting.NewTestContext(t)
	allocated := allocatedClaim(testNS, "other", "node-0", "gpu-0")
	released := allocated.DeepCopy()
	released.Status.Allocation = nil
	reserved := allocated.DeepCopy()
	reserved.Status.ReservedFor = nil
	unallocated := released.DeepCopy()
	own := released.DeepCopy()
	own.Name = *pod.Status.ResourceClaimStatuses[0].ResourceClaimName
	ownReserved := own.DeepCopy()
	ownReserved.Status.ReservedFor = reserved.Status.ReservedFor

	for _, tc := range []struct {
		name     string
		old, new any
		want     fwk.QueueingHint
	}{
		{"an allocated claim deleted", allocated, nil, fwk.Queue},
		{"an allocated claim deleted, seen as a tombstone", cache.DeletedFinalStateUnknown{Key: "ns/other", Obj: allocated}, nil, fwk.Queue},
		{"a claim deallocated", allocated, released, fwk.Queue},
		{"the pod's own claim created", nil, own, fwk.Queue},
		{"an unallocated claim deleted", unallocated, nil, fwk.QueueSkip},
		{"another claim created", nil, unallocated, fwk.QueueSkip},
		{"an allocated claim's reservations changed", allocated, reserved, fwk.QueueSkip},
		{"the pod's own claim changed", own, ownReserved, fwk.QueueSkip},
	} {
		got, err := env.pl.isClaimChangeForPod(logger, pod, tc.old, tc.new)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, got, tc.name)
	}

	registered := func(pl *Plugin) map[fwk.EventResource]bool {
		events, err := pl.EventsToRegister(t.Context())
		require.NoError(t, err)
		out := map[fwk.EventResource]bool{}
		for _, e := range events {
			out[e.Event.Resource] = true
		}
		return out
	}
	withDRA := registered(env.pl)
	for _, r := range []fwk.EventResource{fwk.ResourceClaim, fwk.ResourceSlice, fwk.DeviceClass} {
		require.True(t, withDRA[r], "with DRA, %s events are registered", r)
	}
	devices := env.pl.devices
	env.pl.devices = nil
	withoutDRA := registered(env.pl)
	env.pl.devices = devices
	for _, r := range []fwk.EventResource{fwk.ResourceClaim, fwk.ResourceSlice, fwk.DeviceClass} {
		require.False(t, withoutDRA[r], "without DRA, %s events are not registered", r)
	}
}
