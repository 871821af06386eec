package fabric

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

const railsScenario = `
name: rails
seed: 12
fabric:
  spines: 1
  leavesPerSpine: 2
  nodesPerLeaf: 4
  gpusPerNode: 8
  gpuSource: mixed
  draNodes: {fraction: 0.5, per: leaf}
  rails: {}
  prefill: {fraction: 0.3}
workload:
  gangs:
    - {count: 1, pods: 2, gpusPerPod: 4, gpuRequest: claim-with-nics}
`

func str(d *resourceapi.Device, name string) string {
	if a, ok := d.Attributes[resourceapi.QualifiedName(name)]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

// Every DRA node of a rail-optimized fabric publishes a NIC per GPU,
// with dranet's attributes, and GPU k shares its PCIe root with the k-th
// NIC in PCI address order (rail k) and with no other device.
func TestNICSlicePairsGPUsWithRails(t *testing.T) {
	l := fleetLayout(t, railsScenario)
	dra := 0
	for i := range l.Nodes {
		n := &l.Nodes[i]
		if !n.DRA {
			require.Empty(t, n.NICs, "node %s", n.Name)
			require.Nil(t, l.NICSlice(n), "a device-plugin node publishes no NICs")
			continue
		}
		dra++
		nics := l.NICSlice(n)
		require.Equal(t, DRADriverNIC, nics.Spec.Driver)
		require.Equal(t, resourceapi.ResourcePool{Name: n.Name, Generation: 1, ResourceSliceCount: 1}, nics.Spec.Pool)
		require.Equal(t, n.Name, *nics.Spec.NodeName)
		require.Len(t, nics.Spec.Devices, 8)

		byAddress := slices.Clone(nics.Spec.Devices)
		slices.SortFunc(byAddress, func(a, b resourceapi.Device) int {
			return cmp.Compare(str(&a, NICAttributePCIAddress), str(&b, NICAttributePCIAddress))
		})
		gpus := l.ResourceSlice(n).Spec.Devices
		roots, names, ifNames := sets.New[string](), sets.New[string](), sets.New[string]()
		for k := range gpus {
			gpu, nic := &gpus[k], &byAddress[k]
			require.Equal(t, ptr.To(true), nic.Attributes[NICAttributeRDMA].BoolValue, "%s %s", n.Name, nic.Name)
			require.True(t, strings.HasPrefix(nic.Name, DeviceNameNICPrefix))
			require.NotEmpty(t, str(nic, NICAttributeIfName))
			require.Equal(t, str(gpu, scheduling.DeviceAttributePCIeRoot), str(nic, AttributePCIeRoot),
				"%s: GPU %d shares its root with rail %d's NIC", n.Name, k, k)
			if k > 0 {
				require.Less(t, str(&gpus[k-1], scheduling.DeviceAttributePCIBusID), str(gpu, scheduling.DeviceAttributePCIBusID),
					"GPUs' bus IDs follow their index")
			}
			roots.Insert(str(gpu, scheduling.DeviceAttributePCIeRoot))
			names.Insert(nic.Name)
			ifNames.Insert(str(nic, NICAttributeIfName))
		}
		require.Equal(t, 8, roots.Len(), "one GPU per PCIe root")
		require.Equal(t, 8, names.Len())
		require.Equal(t, 8, ifNames.Len())
	}
	require.Equal(t, 4, dra)
}

// With NIC order shuffled (the default), names and slice order do not
// follow the rails on some nodes, so an allocator that picks devices by
// name or position does not align rails by chance; the draw is the seed's.
// With pci order, nic-k is rail k, listed in rail order.
func TestNICOrder(t *testing.T) {
	rails := func(l *Layout) (bySlice, byName [][]int) {
		for i := range l.Nodes {
			n := &l.Nodes[i]
			if !n.DRA {
				continue
			}
			var slice []int
			named := make([]int, len(n.NICs))
			for _, nic := range n.NICs {
				slice = append(slice, nic.Rail)
				named[nic.Number] = nic.Rail
			}
			bySlice, byName = append(bySlice, slice), append(byName, named)
		}
		return bySlice, byName
	}
	inOrder := []int{0, 1, 2, 3, 4, 5, 6, 7}
	l := fleetLayout(t, railsScenario)
	bySlice, byName := rails(l)
	require.NotEqual(t, inOrder, bySlice[0], "slice order is not rail order")
	require.NotEqual(t, inOrder, byName[0], "name order is not rail order")
	require.NotEqual(t, bySlice[0], bySlice[1], "each node draws its own order")

	again, againByName := rails(fleetLayout(t, railsScenario))
	require.Equal(t, bySlice, again, "the same seed draws the same order")
	require.Equal(t, byName, againByName)
	other, _ := rails(fleetLayout(t, strings.Replace(railsScenario, "rails: {}", "rails: {seed: 7}", 1)))
	require.NotEqual(t, bySlice, other, "the rails' own seed draws another order")

	bySlice, byName = rails(fleetLayout(t, strings.Replace(railsScenario, "rails: {}", "rails: {nicOrder: pci}", 1)))
	for i := range bySlice {
		require.Equal(t, inOrder, bySlice[i])
		require.Equal(t, inOrder, byName[i])
	}
}

// The classes and the request selector select what they should, through
// the CEL library the scheduler evaluates them with.
func TestNICDeviceClass(t *testing.T) {
	compile := func(expr string) cel.CompilationResult {
		program := cel.GetCompiler(cel.Features{}).CompileCELExpression(expr, cel.Options{})
		require.Nil(t, program.Error, expr)
		return program
	}
	class := NICDeviceClass()
	require.Equal(t, DeviceClassNIC, class.Name)
	require.Nil(t, class.Spec.ExtendedResourceName)
	programs := []cel.CompilationResult{compile(class.Spec.Selectors[0].CEL.Expression), compile(RDMASelector)}
	gpuClass := compile(DeviceClass().Spec.Selectors[0].CEL.Expression)

	l := fleetLayout(t, railsScenario)
	n := &l.Nodes[slices.IndexFunc(l.Nodes, func(n NodeInfo) bool { return n.DRA })]
	for _, s := range []*resourceapi.ResourceSlice{l.NICSlice(n), l.ResourceSlice(n)} {
		for _, d := range s.Spec.Devices {
			dev := cel.Device{Driver: s.Spec.Driver, Attributes: d.Attributes, Capacity: d.Capacity}
			isNIC := s.Spec.Driver == DRADriverNIC
			// The request's selector is evaluated only on the class's
			// devices, as the allocator does.
			for _, p := range programs {
				ok, _, err := p.DeviceMatches(t.Context(), dev)
				require.NoError(t, err)
				require.Equal(t, isNIC, ok, "device %s/%s", s.Spec.Driver, d.Name)
				if !ok {
					break
				}
			}
			ok, _, err := gpuClass.DeviceMatches(t.Context(), dev)
			require.NoError(t, err)
			require.Equal(t, !isNIC, ok, "the GPU class leaves NICs alone: %s", d.Name)
		}
	}
	require.Len(t, l.ResourceSlices(), 8, "a GPU slice and a NIC slice per DRA node")
}

// Pre-fill on a rail-optimized fabric holds GPUs drawn per node, not the
// first ones, so nodes are in use on differing rails.
func TestPrefillDevicesOnRails(t *testing.T) {
	l := fleetLayout(t, railsScenario)
	pods := l.Prefill(12)
	require.NotEmpty(t, pods)
	drawn := sets.New[string]()
	for _, p := range pods {
		if !l.Nodes[p.Node].DRA {
			require.Nil(t, p.Devices, "a device-plugin node's pre-fill names no devices")
			continue
		}
		require.Len(t, p.Devices, p.GPUs)
		require.True(t, slices.IsSorted(p.Devices))
		require.Len(t, slices.Compact(slices.Clone(p.Devices)), p.GPUs, "distinct GPUs")
		drawn.Insert(fmt.Sprint(p.Devices))
	}
	require.Greater(t, drawn.Len(), 1, "nodes are in use on differing GPUs")
	require.Equal(t, pods, l.Prefill(12), "the same seeds draw the same GPUs")

	plain, err := NewLayout(scenario.Fabric{Spines: 1, LeavesPerSpine: 1, NodesPerLeaf: 4, GPUsPerNode: 8, Preset: "nvidia",
		GPUSource: scenario.GPUSourceDRA, Prefill: &scenario.Prefill{Fraction: 0.5, Layout: scenario.PrefillScattered}})
	require.NoError(t, err)
	for _, p := range plain.Prefill(1) {
		require.Nil(t, p.Devices, "without rails, pre-fill takes the first GPUs as before")
	}
}
