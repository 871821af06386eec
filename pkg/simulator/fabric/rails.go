package fabric

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

// dranet's vocabulary, the DRA driver that publishes a node's network
// interfaces (github.com/google/dranet): what a DRA node of a
// rail-optimized fabric publishes for its RDMA NICs.
const (
	// DRADriverNIC is dranet's driver name and the domain of its
	// attributes. It publishes one pool per node, named after the node.
	DRADriverNIC = "dra.net"
	// DeviceClassNIC is the DeviceClass of dranet's devices, with
	// DeviceClassNICSelector as its selector.
	DeviceClassNIC = "dra.net"
	// DeviceClassNICSelector is DeviceClassNIC's CEL selector.
	DeviceClassNICSelector = `device.driver == "dra.net"`
	// RDMASelector is what a request adds to take RDMA NICs only.
	RDMASelector = `device.attributes["dra.net"].rdma == true`
	// DeviceNameNICPrefix starts each NIC's device name, followed by a
	// number that, as interface names go, need not follow PCI order.
	DeviceNameNICPrefix = "nic-"

	// NIC attributes, written with their domain as dranet writes them:
	// rdma is a bool, the others strings.
	NICAttributeRDMA       = "dra.net/rdma"
	NICAttributePCIAddress = "dra.net/pciAddress"
	NICAttributeIfName     = "dra.net/ifName"
	// AttributePCIeRoot is Kubernetes' standard attribute naming a
	// device's PCIe root; GPU k and NIC k of a rail-optimized node share
	// it.
	AttributePCIeRoot = "resource.kubernetes.io/pcieRoot"
)

// Random streams of the rails' draws, apart from the fleet's.
const (
	streamRailsNICs = 201 + iota
	streamRailsPrefill
)

// NIC is one RDMA NIC a DRA node of a rail-optimized fabric publishes.
type NIC struct {
	// Rail is the NIC's rail: its position among the node's NICs in PCI
	// address order. It shares its PCIe root with GPU Rail.
	Rail int
	// Number is the number in its device name (nic-<Number>) and interface
	// name (eth<Number+1>).
	Number int
}

// Name is the NIC's device name.
func (n NIC) Name() string { return DeviceNameNICPrefix + strconv.Itoa(n.Number) }

// pickNICs gives every DRA node of a rail-optimized fabric one NIC per GPU,
// in the order its slice lists them: with NICOrderShuffled, names and
// order drawn per node, nodes in fabric order, from the rails' seed.
func (l *Layout) pickNICs() {
	r := l.Spec.Rails
	if r == nil {
		return
	}
	var seed uint64
	if r.Seed != nil { // scenario.SetDefaults sets it; a bare Fabric may not
		seed = uint64(*r.Seed)
	}
	rng := rand.New(rand.NewPCG(seed, streamRailsNICs))
	for i := range l.Nodes {
		n := &l.Nodes[i]
		if !n.DRA {
			continue
		}
		numbers, order := identity(n.GPUs), identity(n.GPUs)
		if r.NICOrder != scenario.NICOrderPCI {
			numbers, order = rng.Perm(n.GPUs), rng.Perm(n.GPUs)
		}
		n.NICs = make([]NIC, n.GPUs)
		for k, rail := range order {
			n.NICs[k] = NIC{Rail: rail, Number: numbers[rail]}
		}
	}
}

func identity(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// prefillDevices picks which GPUs each pre-fill pod on a DRA node of a
// rail-optimized fabric holds, at random from the rails' seed, so that
// nodes are left in use on differing rails; elsewhere the pod holds the
// first GPUs, as before.
func (l *Layout) prefillDevices(pods []PrefillPod) {
	r := l.Spec.Rails
	if r == nil {
		return
	}
	var seed uint64
	if r.Seed != nil {
		seed = uint64(*r.Seed)
	}
	rng := rand.New(rand.NewPCG(seed, streamRailsPrefill))
	for i := range pods {
		p := &pods[i]
		if n := &l.Nodes[p.Node]; n.DRA {
			p.Devices = rng.Perm(n.GPUs)[:p.GPUs]
			slices.Sort(p.Devices)
		}
	}
}

// NICDeviceClass is the DeviceClass of dranet's devices.
func NICDeviceClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: DeviceClassNIC},
		Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: DeviceClassNICSelector}}},
		},
	}
}

// NICSlice builds the slice dranet publishes for a DRA node of a
// rail-optimized fabric: one pool named after the node, in one slice, with
// the node's RDMA NICs in the order NICs lists them; nil for other nodes.
func (l *Layout) NICSlice(n *NodeInfo) *resourceapi.ResourceSlice {
	if len(n.NICs) == 0 {
		return nil
	}
	str := func(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: ptr.To(s)} }
	devices := make([]resourceapi.Device, len(n.NICs))
	for i, nic := range n.NICs {
		devices[i] = resourceapi.Device{
			Name: nic.Name(),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				NICAttributeRDMA:       {BoolValue: ptr.To(true)},
				NICAttributePCIAddress: str(nicPCIAddress(nic.Rail)),
				NICAttributeIfName:     str("eth" + strconv.Itoa(nic.Number+1)),
				AttributePCIeRoot:      str(railRoot(nic.Rail)),
			},
		}
	}
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name + "-" + DRADriverNIC},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   DRADriverNIC,
			Pool:     resourceapi.ResourcePool{Name: n.Name, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(n.Name),
			Devices:  devices,
		},
	}
}

// ResourceSlices lists every ResourceSlice the layout's DRA nodes publish,
// nodes in fabric order, each node's GPUs first, then its NICs.
func (l *Layout) ResourceSlices() []*resourceapi.ResourceSlice {
	var out []*resourceapi.ResourceSlice
	for i := range l.Nodes {
		n := &l.Nodes[i]
		if !n.DRA {
			continue
		}
		out = append(out, l.ResourceSlice(n))
		if s := l.NICSlice(n); s != nil {
			out = append(out, s)
		}
	}
	return out
}

// On a rail-optimized node each GPU has a PCIe root of its own, shared
// with its rail's NIC: GPU k at bus hgxBuses[k], NIC k just below it, both
// under root port hgxBuses[k]-3; boards of more GPUs repeat them in further
// PCI domains. Both orders follow k, so the k-th NIC by PCI address is
// rail k and sits with GPU k.

func railRoot(rail int) string {
	return fmt.Sprintf("pci%04x:%02x", rail/len(hgxBuses), hgxBuses[rail%len(hgxBuses)]-3)
}

func nicPCIAddress(rail int) string {
	return fmt.Sprintf("%04x:%02x:00.0", rail/len(hgxBuses), hgxBuses[rail%len(hgxBuses)]-1)
}
