package capacity

import (
	"context"
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// railNode publishes 8 GPUs and 8 RDMA NICs for node: GPU k and the NIC
// at PCI bus nicBus[k] share PCIe root k. NIC names follow nicName, so
// that name order and PCI order can differ.
func railNode(node string, nicBus []int, nicName func(k int) string) []*resourceapi.ResourceSlice {
	var gpusOut, nics []resourceapi.Device
	for k := range 8 {
		root := fmt.Sprintf("pci0000:%02x", 0x10*(k+1))
		g := gpuDevice(fmt.Sprintf("gpu-%d", k), "H100")
		g.Attributes[PCIeRootAttribute] = resourceapi.DeviceAttribute{StringValue: ptr.To(root)}
		g.Attributes["resource.kubernetes.io/pciBusID"] = resourceapi.DeviceAttribute{StringValue: ptr.To(fmt.Sprintf("0000:%02x:00.0", 0x10*(k+1)+1))}
		gpusOut = append(gpusOut, g)
		nics = append(nics, resourceapi.Device{Name: nicName(k), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"dra.net/rdma":       {BoolValue: ptr.To(true)},
			"dra.net/pciAddress": {StringValue: ptr.To(fmt.Sprintf("0000:%02x:00.0", nicBus[k]))},
			PCIeRootAttribute:    {StringValue: ptr.To(root)},
		}})
	}
	nicSlice := sliceOf(node, nics...)
	nicSlice.Name += "-nics"
	nicSlice.Spec.Driver = "dra.net"
	return []*resourceapi.ResourceSlice{sliceOf(node, gpusOut...), nicSlice}
}

// TestRailsFollowPCIOrderNotNames checks the rail rules: rail k is the
// k-th NIC in PCI address order whatever the NICs are called, and each
// GPU takes the rail of the NIC on its PCIe root.
func TestRailsFollowPCIOrderNotNames(t *testing.T) {
	// NIC on root k sits at bus 0x10*(k+1)+2, so PCI order is root order;
	// names run backwards.
	var bus []int
	for k := range 8 {
		bus = append(bus, 0x10*(k+1)+2)
	}
	inv := BuildInventory(railNode("n1", bus, func(k int) string { return fmt.Sprintf("mlx5_%d", 7-k) }))
	for k := range 8 {
		if got := inv.RailOf("n1", fmt.Sprintf("gpu-%d", k), gpuDriver, "n1"); got != k {
			t.Errorf("gpu-%d on rail %d, want %d", k, got, k)
		}
		if got := inv.RailOf("n1", fmt.Sprintf("mlx5_%d", 7-k), "dra.net", "n1"); got != k {
			t.Errorf("mlx5_%d on rail %d, want %d", 7-k, got, k)
		}
	}
}

// TestRailsWithoutNICs checks that a node publishing no NICs numbers its
// GPUs' rails by PCI address.
func TestRailsWithoutNICs(t *testing.T) {
	var devs []resourceapi.Device
	for k := range 4 {
		g := gpuDevice(fmt.Sprintf("gpu-%d", k), "H100")
		g.Attributes[PCIeRootAttribute] = resourceapi.DeviceAttribute{StringValue: ptr.To(fmt.Sprintf("pci0000:%02x", k))}
		// gpu-0 has the highest address: it is rail 3.
		g.Attributes["resource.kubernetes.io/pciBusID"] = resourceapi.DeviceAttribute{StringValue: ptr.To(fmt.Sprintf("0000:%02x:00.0", 0x40-0x10*k))}
		devs = append(devs, g)
	}
	inv := BuildInventory([]*resourceapi.ResourceSlice{sliceOf("n1", devs...)})
	for k := range 4 {
		if got := inv.RailOf("n1", fmt.Sprintf("gpu-%d", k), gpuDriver, "n1"); got != 3-k {
			t.Errorf("gpu-%d on rail %d, want %d", k, got, 3-k)
		}
	}
}

// TestRailSetSlots checks the counting the planner uses.
func TestRailSetSlots(t *testing.T) {
	var c RailCounts
	c[0], c[1], c[2], c[5] = 2, 1, 2, 1
	if got := c.Free(); got != 0b100111 {
		t.Fatalf("free %v", got)
	}
	if got := c.Slots(0b101); got != 2 {
		t.Fatalf("slots on rails 0,2: %d, want 2", got)
	}
	if got := c.Slots(0b11); got != 1 {
		t.Fatalf("slots on rails 0,1: %d, want 1", got)
	}
	if got := c.Slots(0b1000); got != 0 {
		t.Fatalf("slots on rail 3: %d, want 0", got)
	}
	if got := RailSet(0b11110100).String(); got != "2,4-7" {
		t.Fatalf("String %q", got)
	}
}

// TestRailsByConfiguredAttribute checks that a configured attribute names
// rails across nodes: the NICs' values, in order over the cluster, whatever
// their PCI order; and that a node whose NICs lack it keeps PCI order.
func TestRailsByConfiguredAttribute(t *testing.T) {
	var bus []int
	for k := range 8 {
		bus = append(bus, 0x10*(k+1)+2)
	}
	named := railNode("n1", bus, func(k int) string { return fmt.Sprintf("nic-%d", k) })
	// n1's NIC k says rail 7-k.
	for k := range named[1].Spec.Devices {
		named[1].Spec.Devices[k].Attributes["dra.net/rail"] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(7 - k))}
	}
	plain := railNode("n2", bus, func(k int) string { return fmt.Sprintf("nic-%d", k) })
	inv := BuildInventoryWith(append(named, plain...), []resourceapi.QualifiedName{"dra.net/rail"})
	for k := range 8 {
		if got := inv.RailOf("n1", fmt.Sprintf("gpu-%d", k), gpuDriver, "n1"); got != 7-k {
			t.Errorf("n1 gpu-%d on rail %d, want %d", k, got, 7-k)
		}
		if got := inv.RailOf("n2", fmt.Sprintf("gpu-%d", k), gpuDriver, "n2"); got != k {
			t.Errorf("n2 gpu-%d on rail %d, want %d (no names: PCI order)", k, got, k)
		}
	}
}

// BenchmarkRailsRead is what a rail-aligned pass reads of 5,000 nodes of
// 8 GPUs and 8 NICs, every other node with half its GPUs allocated: each
// node's free GPUs per rail, once the matcher knows the kind's devices and
// has read each node (as every pass after the first while the allocated
// devices stay as they were).
func BenchmarkRailsRead(b *testing.B) {
	ctx := context.Background()
	var list []*resourceapi.ResourceSlice
	allocated := sets.New[structured.DeviceID]()
	var bus []int
	for k := range 8 {
		bus = append(bus, 0x10*(k+1)+2)
	}
	nodes := make([]string, 5000)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("node-%04d", i)
		list = append(list, railNode(nodes[i], bus, func(k int) string { return fmt.Sprintf("nic-%d", k) })...)
		if i%2 == 0 {
			for g := range 4 {
				allocated.Insert(structured.MakeDeviceID(gpuDriver, nodes[i], fmt.Sprintf("gpu-%d", g)))
			}
		}
	}
	inv := BuildInventory(list)
	objs := newObjects([]*resourceapi.DeviceClass{gpuClass(true)}, claim("ns", "half", gpuDriver, 4))
	d := NewDevices(NewMatcher(inv, testCEL), NewRegistry(), objs, allocated)
	pd, err := objs.reader().Pod(podWithClaims("ns", "half", "half"))
	if err != nil {
		b.Fatal(err)
	}
	d.GangDemand(ctx, []*PodDevices{pd}, 0)
	dim := pd.Claims[0].Requests[0].Alternatives[0].Kind.Dimension
	read := func() {
		for _, n := range nodes {
			if _, ok := d.Rails(ctx, n, dim); !ok {
				b.Fatalf("node %s has no rails", n)
			}
		}
	}
	read()
	b.ReportAllocs()
	for b.Loop() {
		read()
	}
}
