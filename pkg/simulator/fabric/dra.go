package fabric

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/fleet"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/internal/parallel"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

// DefaultHardware is what a DRA node's devices say about fields the
// scenario's fleet does not draw: an HGX H100 with a driver of early 2024.
var DefaultHardware = Hardware{Product: "NVIDIA-H100-80GB-HBM3", Compute: "9.0", Driver: "550.54.15", CUDA: "12.4"}

// pickDRANodes marks the nodes that publish their GPUs through DRA, as the
// fabric's GPU source says.
func (l *Layout) pickDRANodes() {
	switch l.Spec.GPUSource {
	case scenario.GPUSourceDRA:
		for i := range l.Nodes {
			l.Nodes[i].DRA = true
		}
	case scenario.GPUSourceMixed:
		d := l.Spec.DRANodes
		if len(d.Spines) > 0 {
			for i := range l.Nodes {
				l.Nodes[i].DRA = slices.Contains(d.Spines, l.Nodes[i].Domain[Spine])
			}
			return
		}
		var seed uint64
		if d.Seed != nil { // scenario.SetDefaults sets it; a bare Fabric may not
			seed = uint64(*d.Seed)
		}
		unitOf, units := l.units(d.Per)
		picked := make([]bool, units)
		for _, u := range rand.New(rand.NewPCG(seed, streamDRANodes)).Perm(units)[:d.DrawnUnits(units)] {
			picked[u] = true
		}
		for i := range l.Nodes {
			l.Nodes[i].DRA = picked[unitOf(i)]
		}
	}
}

// DRANodes counts the nodes that publish their GPUs through DRA, and their
// GPUs.
func (l *Layout) DRANodes() (nodes, gpus int) {
	for _, n := range l.Nodes {
		if n.DRA {
			nodes++
			gpus += n.GPUs
		}
	}
	return nodes, gpus
}

// CanServe reports whether the node can give job's pods their GPUs: a
// device-plugin node serves only nvidia.com/gpu requests, a DRA node serves
// them through the DeviceClass's extended resource and serves claims too.
func (n *NodeInfo) CanServe(job *scenario.Job) bool { return n.DRA || !job.ClaimsGPUs() }

// DeviceClass is the DeviceClass NVIDIA's GPU DRA driver chart installs for
// whole GPUs, mapped to the nvidia.com/gpu extended resource.
func DeviceClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: scheduling.DeviceClassGPU},
		Spec: resourceapi.DeviceClassSpec{
			Selectors:            []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: scheduling.DeviceClassGPUSelector}}},
			ExtendedResourceName: ptr.To(string(GPU)),
		},
	}
}

// ResourceSlice builds the slice NVIDIA's GPU DRA driver publishes for a
// DRA node: one pool named after the node, in one slice, with a device
// gpu-<minor> for each of its GPUs. On a rail-optimized fabric each GPU
// has a PCIe root of its own, which its rail's NIC shares.
func (l *Layout) ResourceSlice(n *NodeInfo) *resourceapi.ResourceSlice {
	hw := n.Hardware.orDefault()
	devices := make([]resourceapi.Device, n.GPUs)
	for minor := range devices {
		root := pcieRoot(minor)
		if len(n.NICs) > 0 {
			root = railRoot(minor)
		}
		devices[minor] = gpuDevice(n.Name, minor, root, hw)
	}
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name + "-" + scheduling.DRADriverGPU},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   scheduling.DRADriverGPU,
			Pool:     resourceapi.ResourcePool{Name: n.Name, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(n.Name),
			Devices:  devices,
		},
	}
}

// CreateDRA creates what NVIDIA's GPU DRA driver and its chart would for
// the layout's DRA nodes: the DeviceClass and one ResourceSlice per node,
// workers at a time; on a rail-optimized fabric also what dranet would,
// its DeviceClass and one slice of NICs per DRA node. A layout without DRA
// nodes creates nothing.
func (l *Layout) CreateDRA(ctx context.Context, client kubernetes.Interface, workers int) error {
	var dra []int
	for i := range l.Nodes {
		if l.Nodes[i].DRA {
			dra = append(dra, i)
		}
	}
	if len(dra) == 0 {
		return nil
	}
	classes := []*resourceapi.DeviceClass{DeviceClass()}
	if l.Spec.Rails != nil {
		classes = append(classes, NICDeviceClass())
	}
	for _, class := range classes {
		if _, err := client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating DeviceClass %s: %w", class.Name, err)
		}
	}
	return parallel.Do(ctx, len(dra), workers, func(ctx context.Context, i int) error {
		n := &l.Nodes[dra[i]]
		for _, slice := range []*resourceapi.ResourceSlice{l.ResourceSlice(n), l.NICSlice(n)} {
			if slice == nil {
				continue
			}
			if _, err := client.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating ResourceSlice %s: %w", slice.Name, err)
			}
		}
		return nil
	})
}

// orDefault fills the fields the fleet did not draw from DefaultHardware.
func (h Hardware) orDefault() Hardware {
	pick := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	return Hardware{
		Product: pick(h.Product, DefaultHardware.Product), Compute: pick(h.Compute, DefaultHardware.Compute),
		Driver: pick(h.Driver, DefaultHardware.Driver), CUDA: pick(h.CUDA, DefaultHardware.CUDA),
	}
}

// gpuDevice is GPU minor of node, on PCIe root root, as the driver
// publishes it. Identity attributes (UUID, PCI addresses) are made up, but
// the same for the same node and minor in every run.
func gpuDevice(node string, minor int, root string, hw Hardware) resourceapi.Device {
	str := func(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: ptr.To(s)} }
	ver := func(s string) resourceapi.DeviceAttribute {
		return resourceapi.DeviceAttribute{VersionValue: ptr.To(semver(s))}
	}
	return resourceapi.Device{
		Name: scheduling.DeviceNameGPUPrefix + strconv.Itoa(minor),
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			scheduling.DeviceAttributeType:                  str(scheduling.DeviceTypeGPU),
			scheduling.DeviceAttributeUUID:                  str(gpuUUID(node, minor)),
			scheduling.DeviceAttributeProductName:           str(productName(hw.Product)),
			scheduling.DeviceAttributeArchitecture:          str(architecture(hw.Compute)),
			scheduling.DeviceAttributeCUDAComputeCapability: ver(hw.Compute),
			scheduling.DeviceAttributeDriverVersion:         ver(hw.Driver),
			scheduling.DeviceAttributeCUDADriverVersion:     ver(hw.CUDA),
			scheduling.DeviceAttributePCIeRoot:              str(root),
			scheduling.DeviceAttributePCIBusID:              str(pciBusID(minor)),
		},
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			scheduling.DeviceCapacityMemory: {Value: gpuMemory(hw.Product)},
		},
	}
}

// semver writes a validated fleet version (such as "12.4" or "535.104.05")
// as the semantic version a version attribute holds ("12.4.0",
// "535.104.5"): three components, no leading zeros.
func semver(s string) string {
	v, err := fleet.ParseVersion(s)
	if err != nil {
		// Scenario validation parsed it already; the default is valid.
		panic(fmt.Sprintf("fabric: version %q: %v", s, err))
	}
	return fmt.Sprintf("%d.%d.%d", v.Part(0), v.Part(1), v.Part(2))
}

// productName turns GPU feature discovery's product label back into the
// name nvidia-smi prints, which the driver publishes: GFD replaces its
// spaces with dashes. Names with dashes of their own (A100-SXM4-80GB) come
// back with spaces there too; nothing reads those apart.
func productName(label string) string { return strings.ReplaceAll(label, "-", " ") }

// architecture names the GPU generation of a compute capability, as the
// driver's architecture attribute does.
func architecture(compute string) string {
	switch {
	case strings.HasPrefix(compute, "7.5"):
		return "Turing"
	case strings.HasPrefix(compute, "7."):
		return "Volta"
	case strings.HasPrefix(compute, "8.9"):
		return "Ada Lovelace"
	case strings.HasPrefix(compute, "8."):
		return "Ampere"
	case strings.HasPrefix(compute, "9."):
		return "Hopper"
	case strings.HasPrefix(compute, "10."), strings.HasPrefix(compute, "12."):
		return "Blackwell"
	}
	return "Unknown"
}

// memoryInName finds the memory size a product name states, such as the
// 80GB of NVIDIA-H100-80GB-HBM3.
var memoryInName = regexp.MustCompile(`(\d+)GB`)

// gpuMemory is a GPU's memory capacity: what its product name states, or
// 80Gi.
func gpuMemory(product string) resource.Quantity {
	if m := memoryInName.FindStringSubmatch(product); m != nil {
		return resource.MustParse(m[1] + "Gi")
	}
	return resource.MustParse("80Gi")
}

// gpuUUID is a stable, made-up GPU UUID in nvidia-smi's form.
func gpuUUID(node string, minor int) string {
	h := sha256.Sum256([]byte(node + "/" + strconv.Itoa(minor)))
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// hgxBuses are the PCI buses of an HGX H100 board's eight GPUs; each pair
// shares a PCIe switch under one root port. Boards of more GPUs repeat them
// in further PCI domains.
var hgxBuses = [8]int{0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb}

func pciBusID(minor int) string {
	return fmt.Sprintf("%04x:%02x:00.0", minor/len(hgxBuses), hgxBuses[minor%len(hgxBuses)])
}

func pcieRoot(minor int) string {
	pair := minor % len(hgxBuses) / 2 * 2
	return fmt.Sprintf("pci%04x:%02x", minor/len(hgxBuses), hgxBuses[pair]-3)
}
