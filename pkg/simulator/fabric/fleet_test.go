package fabric

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/fleet"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

const fleetScenario = `
name: fleet
seed: 11
fabric:
  spines: 2
  leavesPerSpine: 4
  nodesPerLeaf: 8
  gpusPerNode: 8
  cliqueSize: 4
  fleet:
    products:
      per: leaf
      choices:
        - {name: NVIDIA-H100-80GB-HBM3, compute: "9.0", weight: 3}
        - {name: NVIDIA-A100-SXM4-80GB, compute: "8.0"}
    drivers:
      choices:
        - {version: 550.54.15, cuda: "12.4", weight: 2}
        - {version: 535.104.05, cuda: "12.2", labels: deprecated}
        - {version: 570.86.10, cuda: "12.8", labels: current}
    sharing:
      choices:
        - {strategy: none, weight: 6}
        - {strategy: time-slicing, replicas: 2}
    capacity:
      per: clique
      choices:
        - {type: on-demand, weight: 2}
        - {type: spot, label: cloud.google.com/gke-spot}
    upgrading: 0.1
workload:
  gangs:
    - {count: 1, pods: 2, gpusPerPod: 8}
`

func fleetLayout(t *testing.T, yaml string) *Layout {
	t.Helper()
	s, err := scenario.Parse([]byte(yaml))
	require.NoError(t, err)
	l, err := NewLayout(s.Fabric)
	require.NoError(t, err)
	return l
}

func TestFleetLabels(t *testing.T) {
	l := fleetLayout(t, fleetScenario)
	require.Len(t, l.Nodes, 64)
	opts := fleet.DefaultOptions()
	products, cudas, spot, shared, upgrading := map[string]int{}, map[string]int{}, 0, 0, 0
	for i := range l.Nodes {
		n := &l.Nodes[i]
		f := fleet.ReadNode(n.Labels, &opts)
		require.Empty(t, f.Problems, "node %s: every label the fabric writes reads back", n.Name)
		require.True(t, f.GPU)
		products[f.Product]++
		cudas[f.CUDA.String()+" from "+f.CUDALabel]++
		switch f.CUDA.String() {
		case "12.4":
			require.Equal(t, "550.54.15", f.Driver.String())
			require.Equal(t, scheduling.LabelCUDARuntimeVersionFull, f.CUDALabel, "both label sets: the current one wins")
			require.Equal(t, "12", n.Labels[scheduling.LabelCUDARuntimeMajor], "both label sets: the deprecated one is there too")
		case "12.2":
			require.Equal(t, "535.104.05", f.Driver.String(), "the deprecated revision label keeps its leading zero")
			require.NotContains(t, n.Labels, scheduling.LabelCUDARuntimeVersionFull)
		case "12.8":
			require.NotContains(t, n.Labels, scheduling.LabelCUDARuntimeMajor)
		default:
			t.Fatalf("node %s: unexpected CUDA %q", n.Name, f.CUDA)
		}
		if f.Capacity == fleet.CapacitySpot {
			spot++
			require.Equal(t, "true", n.Labels[scheduling.LabelGKESpot])
		} else {
			require.NotContains(t, n.Labels, scheduling.LabelGKESpot)
		}
		if ok, _ := f.SharedGPUs(); ok {
			shared++
			require.Equal(t, 16, n.GPUs, "time-slicing with 2 replicas doubles nvidia.com/gpu")
			require.Equal(t, "time-slicing", n.Labels[scheduling.LabelGPUSharingStrategy])
			require.Contains(t, f.Product, "-SHARED")
			require.Equal(t, 16, int(l.Node(n).Status.Allocatable.Name(GPU, "").Value()))
		} else {
			require.Equal(t, 8, n.GPUs)
			require.Equal(t, "none", n.Labels[scheduling.LabelGPUSharingStrategy])
		}
		if f.Upgrading() {
			upgrading++
		} else {
			require.Equal(t, scheduling.UpgradeStateDone, f.UpgradeState)
		}
	}
	require.Equal(t, 6, upgrading, "10% of 64 nodes, rounded")
	require.Len(t, cudas, 3, "every driver was drawn: %v", cudas)
	require.Greater(t, spot, 0)
	require.Less(t, spot, 64)
	require.Greater(t, shared, 0)
	require.Equal(t, 64*8+shared*8, l.TotalGPUs())
	require.GreaterOrEqual(t, len(products), 2, "both products, some of them shared: %v", products)

	// Per-unit draws: every node of a leaf has one product, every node of a
	// clique one capacity type.
	for _, leaf := range l.Leaves {
		want := fleet.ReadNode(l.Nodes[leaf[0]].Labels, &opts).Product
		for _, n := range leaf {
			got := fleet.ReadNode(l.Nodes[n].Labels, &opts).Product
			require.Equal(t, trimShared(want), trimShared(got), "one product per leaf")
		}
	}
	for _, clique := range l.Cliques {
		want := fleet.ReadNode(l.Nodes[clique[0]].Labels, &opts).Capacity
		for _, n := range clique {
			require.Equal(t, want, fleet.ReadNode(l.Nodes[n].Labels, &opts).Capacity, "one capacity type per clique")
		}
	}
}

func trimShared(p string) string { return strings.TrimSuffix(p, sharedProductSuffix) }

func TestFleetIsDeterministicPerSeed(t *testing.T) {
	a, b := fleetLayout(t, fleetScenario), fleetLayout(t, fleetScenario)
	for i := range a.Nodes {
		require.Equal(t, a.Nodes[i].Labels, b.Nodes[i].Labels)
		require.Equal(t, a.Nodes[i].GPUs, b.Nodes[i].GPUs)
	}
	require.Equal(t, a.Prefill(3), b.Prefill(3))

	other := fleetLayout(t, replaceOnce(fleetScenario, "seed: 11", "seed: 12"))
	differ := 0
	for i := range a.Nodes {
		if a.Nodes[i].Labels[scheduling.LabelCUDARuntimeMajor] != other.Nodes[i].Labels[scheduling.LabelCUDARuntimeMajor] ||
			a.Nodes[i].Labels[scheduling.LabelCUDARuntimeVersionFull] != other.Nodes[i].Labels[scheduling.LabelCUDARuntimeVersionFull] {
			differ++
		}
	}
	require.Greater(t, differ, 0, "another seed draws another fleet")

	pinned := fleetLayout(t, replaceOnce(replaceOnce(fleetScenario, "seed: 11", "seed: 12"), "  fleet:\n", "  fleet:\n    seed: 11\n"))
	for i := range a.Nodes {
		require.Equal(t, a.Nodes[i].Labels, pinned.Nodes[i].Labels, "fleet.seed pins the fleet whatever the scenario's seed")
	}
}

func TestFleetPrefillCountsSharedCapacity(t *testing.T) {
	yaml := replaceOnce(fleetScenario, "    upgrading: 0.1\n", "    upgrading: 0.1\n  prefill: {fraction: 0.5}\n")
	l := fleetLayout(t, yaml)
	total := 0
	for _, p := range l.Prefill(5) {
		require.LessOrEqual(t, p.GPUs, l.Nodes[p.Node].GPUs)
		total += p.GPUs
	}
	require.Equal(t, l.TotalGPUs()/2, total)
}

func TestNoFleetNoGPULabels(t *testing.T) {
	l, err := NewLayout(scenario.Fabric{Spines: 1, LeavesPerSpine: 1, NodesPerLeaf: 2, GPUsPerNode: 8, Preset: "nvidia"})
	require.NoError(t, err)
	for _, n := range l.Nodes {
		f := fleet.ReadNode(n.Labels, nil)
		require.False(t, f.GPU, "a fabric without a fleet writes no GPU labels")
	}
}

func replaceOnce(s, old, new string) string {
	if !strings.Contains(s, old) {
		panic("replaceOnce: " + old + " not found")
	}
	return strings.Replace(s, old, new, 1)
}
