package fabric

import (
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

const draScenario = `
name: dra
seed: 3
fabric:
  spines: 2
  leavesPerSpine: 2
  nodesPerLeaf: 4
  gpusPerNode: 8
  cliqueSize: 2
  gpuSource: mixed
  draNodes: {spines: [1]}
  fleet:
    products:
      per: spine
      choices: [{name: NVIDIA-A100-SXM4-40GB, compute: "8.0"}]
    drivers:
      choices: [{version: 535.104.05, cuda: "12.2", labels: none}]
workload:
  gangs:
    - {count: 1, pods: 2, gpusPerPod: 8, gpuRequest: claim}
`

func TestPickDRANodes(t *testing.T) {
	t.Run("spines", func(t *testing.T) {
		l := fleetLayout(t, draScenario)
		for _, n := range l.Nodes {
			require.Equal(t, n.Domain[Spine] == 1, n.DRA, "node %s", n.Name)
		}
		nodes, gpus := l.DRANodes()
		require.Equal(t, 8, nodes)
		require.Equal(t, 64, gpus)
		require.Equal(t, 128, l.TotalGPUs(), "DRA nodes' GPUs count among all GPUs")
	})
	t.Run("every node", func(t *testing.T) {
		l := fleetLayout(t, strings.Replace(draScenario, "gpuSource: mixed\n  draNodes: {spines: [1]}", "gpuSource: dra", 1))
		nodes, _ := l.DRANodes()
		require.Equal(t, len(l.Nodes), nodes)
	})
	t.Run("a fraction of leaves", func(t *testing.T) {
		yaml := strings.Replace(draScenario, "spines: [1]", "fraction: 0.5, per: leaf", 1)
		l := fleetLayout(t, yaml)
		draLeaves := 0
		for _, leaf := range l.Leaves {
			dra := l.Nodes[leaf[0]].DRA
			for _, n := range leaf {
				require.Equal(t, dra, l.Nodes[n].DRA, "a leaf is drawn whole")
			}
			if dra {
				draLeaves++
			}
		}
		require.Equal(t, 2, draLeaves, "half of 4 leaves")
		again := fleetLayout(t, yaml)
		for i := range l.Nodes {
			require.Equal(t, l.Nodes[i].DRA, again.Nodes[i].DRA, "the same seed draws the same nodes")
		}
	})
	t.Run("device plugin by default", func(t *testing.T) {
		l, err := NewLayout(scenario.Fabric{Spines: 1, LeavesPerSpine: 1, NodesPerLeaf: 2, GPUsPerNode: 8, Preset: "nvidia"})
		require.NoError(t, err)
		nodes, _ := l.DRANodes()
		require.Zero(t, nodes)
	})
}

// A DRA node advertises no nvidia.com/gpu: DRAExtendedResource serves
// nvidia.com/gpu from devices only on nodes that do not advertise it.
func TestDRANodeAdvertisesNoGPU(t *testing.T) {
	l := fleetLayout(t, draScenario)
	for i := range l.Nodes {
		n := &l.Nodes[i]
		q, ok := l.Node(n).Status.Allocatable[GPU]
		if n.DRA {
			require.False(t, ok, "node %s", n.Name)
			continue
		}
		require.Equal(t, int64(8), q.Value())
	}
}

func TestResourceSlice(t *testing.T) {
	l := fleetLayout(t, draScenario)
	n := &l.Nodes[len(l.Nodes)-1]
	require.True(t, n.DRA)
	require.NotContains(t, n.Labels, scheduling.LabelCUDADriverVersionFull, "the driver's labels are left out")
	s := l.ResourceSlice(n)
	require.Equal(t, scheduling.DRADriverGPU, s.Spec.Driver)
	require.Equal(t, resourceapi.ResourcePool{Name: n.Name, Generation: 1, ResourceSliceCount: 1}, s.Spec.Pool)
	require.Equal(t, ptr.To(n.Name), s.Spec.NodeName)
	require.Len(t, s.Spec.Devices, 8)

	d := s.Spec.Devices[5]
	require.Equal(t, "gpu-5", d.Name)
	attr := func(name string) resourceapi.DeviceAttribute { return d.Attributes[resourceapi.QualifiedName(name)] }
	require.Equal(t, ptr.To("gpu"), attr("type").StringValue)
	require.Equal(t, ptr.To("NVIDIA A100 SXM4 40GB"), attr("productName").StringValue)
	require.Equal(t, ptr.To("Ampere"), attr("architecture").StringValue)
	require.Equal(t, ptr.To("8.0.0"), attr("cudaComputeCapability").VersionValue)
	require.Equal(t, ptr.To("535.104.5"), attr("driverVersion").VersionValue,
		"the drawn driver, although the node has no driver label, as a semantic version")
	require.Equal(t, ptr.To("12.2.0"), attr("cudaDriverVersion").VersionValue)
	require.Equal(t, ptr.To("0000:ab:00.0"), attr("resource.kubernetes.io/pciBusID").StringValue)
	require.Equal(t, ptr.To("pci0000:97"), attr("resource.kubernetes.io/pcieRoot").StringValue)
	require.Equal(t, *attr("resource.kubernetes.io/pcieRoot").StringValue,
		*s.Spec.Devices[4].Attributes["resource.kubernetes.io/pcieRoot"].StringValue, "GPUs pair under PCIe roots")
	require.Equal(t, "40Gi", ptr.To(d.Capacity["memory"].Value).String())
	require.LessOrEqual(t, len(d.Attributes)+len(d.Capacity), resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice)

	uuids := sets.New[string]()
	for i := range l.Nodes {
		if l.Nodes[i].DRA {
			for _, dev := range l.ResourceSlice(&l.Nodes[i]).Spec.Devices {
				uuids.Insert(*dev.Attributes["uuid"].StringValue)
			}
		}
	}
	require.Equal(t, 64, uuids.Len(), "every GPU has a UUID of its own")
	require.Equal(t, s, l.ResourceSlice(n), "the same node publishes the same slice")
}

func TestResourceSliceDefaultHardware(t *testing.T) {
	l, err := NewLayout(scenario.Fabric{Spines: 1, LeavesPerSpine: 1, NodesPerLeaf: 1, GPUsPerNode: 16, Preset: "nvidia", GPUSource: scenario.GPUSourceDRA})
	require.NoError(t, err)
	s := l.ResourceSlice(&l.Nodes[0])
	d := s.Spec.Devices[9]
	require.Equal(t, ptr.To("NVIDIA H100 80GB HBM3"), d.Attributes["productName"].StringValue)
	require.Equal(t, ptr.To("Hopper"), d.Attributes["architecture"].StringValue)
	require.Equal(t, ptr.To("550.54.15"), d.Attributes["driverVersion"].VersionValue)
	require.Equal(t, ptr.To("12.4.0"), d.Attributes["cudaDriverVersion"].VersionValue)
	require.Equal(t, ptr.To("0001:2a:00.0"), d.Attributes["resource.kubernetes.io/pciBusID"].StringValue, "a second board's GPUs sit in another PCI domain")
	require.Equal(t, "80Gi", ptr.To(d.Capacity["memory"].Value).String())
}

// The DeviceClass NVIDIA's chart installs selects every device the fabric
// publishes, through the same CEL library the scheduler evaluates it with.
func TestDeviceClassSelectsEveryDevice(t *testing.T) {
	class := DeviceClass()
	require.Equal(t, scheduling.DeviceClassGPU, class.Name)
	require.Equal(t, ptr.To("nvidia.com/gpu"), class.Spec.ExtendedResourceName)
	require.Len(t, class.Spec.Selectors, 1)
	program := cel.GetCompiler(cel.Features{}).CompileCELExpression(class.Spec.Selectors[0].CEL.Expression, cel.Options{})
	require.Nil(t, program.Error)

	l := fleetLayout(t, draScenario)
	s := l.ResourceSlice(&l.Nodes[len(l.Nodes)-1])
	for _, d := range s.Spec.Devices {
		ok, _, err := program.DeviceMatches(t.Context(), cel.Device{Driver: s.Spec.Driver, Attributes: d.Attributes, Capacity: d.Capacity})
		require.NoError(t, err)
		require.True(t, ok, "device %s", d.Name)
	}
	ok, _, err := program.DeviceMatches(t.Context(), cel.Device{Driver: "other.example.com", Attributes: s.Spec.Devices[0].Attributes})
	require.NoError(t, err)
	require.False(t, ok, "another driver's devices are not the class's")
}

func TestArchitecture(t *testing.T) {
	for compute, want := range map[string]string{
		"7.0": "Volta", "7.5": "Turing", "8.0": "Ampere", "8.6": "Ampere", "8.9": "Ada Lovelace",
		"9.0": "Hopper", "10.0": "Blackwell", "12.0": "Blackwell", "6.1": "Unknown",
	} {
		require.Equal(t, want, architecture(compute), compute)
	}
}
