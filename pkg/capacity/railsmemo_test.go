package capacity

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
)

// TestRailsReadAgainWhenDevicesChange checks that what Devices.Rails keeps
// of a node (railsMemo) is read again whenever what it counted changed: a
// GPU of the node allocated, then freed; the allocated devices of copies
// that see others (WithAllocated), and the pass's own again after them;
// and new slices, which move a GPU off the rails. Another node, whose devices
// did not change, reads as before throughout. Each reading is compared
// with counts the test works out from the rail rules itself.
func TestRailsReadAgainWhenDevicesChange(t *testing.T) {
	ctx := context.Background()
	var bus []int
	for k := range 8 {
		bus = append(bus, 0x10*(k+1)+2)
	}
	nicName := func(k int) string { return fmt.Sprintf("nic-%d", k) }
	n1, n2 := railNode("n1", bus, nicName), railNode("n2", bus, nicName)
	list := append(append([]*resourceapi.ResourceSlice{}, n1...), n2...)
	inventories := NewInventories(func() ([]*resourceapi.ResourceSlice, error) { return list, nil }, testCEL)
	m, err := inventories.Current()
	require.NoError(t, err)

	objs := newObjects([]*resourceapi.DeviceClass{gpuClass(false)}, claim("ns", "half", gpuDriver, 4))
	registry := NewRegistry()
	pd, err := objs.reader().Pod(podWithClaims("ns", "half", "half"))
	require.NoError(t, err)
	NewDevices(m, registry, objs, nil).GangDemand(ctx, []*PodDevices{pd}, 0)
	dim := pd.Claims[0].Requests[0].Alternatives[0].Kind.Dimension

	gpu := func(node string, k int) structured.DeviceID {
		return structured.MakeDeviceID(gpuDriver, node, fmt.Sprintf("gpu-%d", k))
	}
	// counts are the rail counts of 8 GPUs on rails 0-7, one each, less
	// the taken rails; none of the rails of off.
	counts := func(taken []int, off ...int) NodeRails {
		var want NodeRails
		for r := range 8 {
			want.Total[r] = 1
			want.Free[r] = 1
		}
		for _, r := range taken {
			want.Free[r] = 0
		}
		for _, r := range off {
			want.Total[r], want.Free[r] = 0, 0
		}
		want.Rails = 8
		return want
	}
	check := func(d *Devices, node string, want NodeRails, why string) {
		t.Helper()
		got, ok := d.Rails(ctx, node, dim)
		require.True(t, ok, "%s: %s has rails", why, node)
		require.Equal(t, want, got, "%s: %s", why, node)
	}

	free := NewDevices(m, registry, objs, sets.New[structured.DeviceID]())
	check(free, "n1", counts(nil), "nothing allocated")
	check(free, "n2", counts(nil), "nothing allocated")

	taken := NewDevices(m, registry, objs, sets.New(gpu("n1", 2)))
	check(taken, "n1", counts([]int{2}), "gpu-2 allocated")
	check(taken, "n2", counts(nil), "gpu-2 of n1 allocated")

	freed := NewDevices(m, registry, objs, sets.New[structured.DeviceID]())
	check(freed, "n1", counts(nil), "gpu-2 freed")
	check(freed, "n2", counts(nil), "gpu-2 of n1 freed")

	other := freed.WithAllocated(map[string]Bits{"n1": m.Inventory().Positions("n1", []structured.DeviceID{gpu("n1", 5)})})
	check(other, "n1", counts([]int{5}), "a copy that sees gpu-5 allocated")
	another := freed.WithAllocated(map[string]Bits{"n1": m.Inventory().Positions("n1", []structured.DeviceID{gpu("n1", 6)})})
	check(another, "n1", counts([]int{6}), "another copy, that sees gpu-6 allocated")
	check(freed, "n1", counts(nil), "the pass again, after the copy")
	check(taken, "n1", counts([]int{2}), "an earlier pass again")

	// n1's NIC on rail 3 is withdrawn: its GPU on that root has no rail,
	// and the NICs after it move down one rail.
	nics := n1[1].DeepCopy()
	nics.Spec.Devices = append(nics.Spec.Devices[:3:3], nics.Spec.Devices[4:]...)
	nics.Spec.Pool.Generation++
	list = []*resourceapi.ResourceSlice{n1[0], nics, n2[0], n2[1]}
	m2, err := inventories.Current()
	require.NoError(t, err)
	require.NotSame(t, m, m2, "new slices make a new inventory")
	moved := NewDevices(m2, registry, objs, sets.New(gpu("n1", 6)))
	want := counts(nil, 7)
	want.Free[5] = 0 // gpu-6 is on rail 5 now
	want.Rails = 7
	check(moved, "n1", want, "a NIC withdrawn, gpu-6 allocated")
	check(moved, "n2", counts(nil), "another node's NIC withdrawn")
}

// TestRailsKeptWhileNothingChanged checks that a pass reading the same
// allocated devices takes each node's reading from the memo: one the test
// plants there is what it reads, until the node's allocated devices move.
func TestRailsKeptWhileNothingChanged(t *testing.T) {
	ctx := context.Background()
	var bus []int
	for k := range 8 {
		bus = append(bus, 0x10*(k+1)+2)
	}
	m := NewMatcher(BuildInventory(railNode("n1", bus, func(k int) string { return fmt.Sprint("nic-", k) })), testCEL)
	objs := newObjects([]*resourceapi.DeviceClass{gpuClass(false)}, claim("ns", "half", gpuDriver, 4))
	registry := NewRegistry()
	pd, err := objs.reader().Pod(podWithClaims("ns", "half", "half"))
	require.NoError(t, err)
	d := NewDevices(m, registry, objs, sets.New[structured.DeviceID]())
	d.GangDemand(ctx, []*PodDevices{pd}, 0)
	dim := pd.Claims[0].Requests[0].Alternatives[0].Kind.Dimension

	read, ok := d.Rails(ctx, "n1", dim)
	require.True(t, ok)
	planted := read
	planted.Free[0] = 42
	nd := m.Inventory().Node("n1")
	m.rails.store(d, nd, 1, dim, planted, true)
	for _, again := range []*Devices{d, NewDevices(m, registry, objs, sets.New[structured.DeviceID]())} {
		got, _ := again.Rails(ctx, "n1", dim)
		require.Equal(t, planted, got, "the same allocated devices: the kept reading")
	}
	taken := NewDevices(m, registry, objs, sets.New(structured.MakeDeviceID(gpuDriver, "n1", "gpu-1")))
	got, _ := taken.Rails(ctx, "n1", dim)
	want := read
	want.Free[1] = 0
	require.Equal(t, want, got, "gpu-1 allocated: read again")
}
