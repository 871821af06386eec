package fabric

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

func TestLayoutLabelsAndDomains(t *testing.T) {
	l, err := NewLayout(scenario.Fabric{Spines: 2, LeavesPerSpine: 2, NodesPerLeaf: 4, GPUsPerNode: 8, CliqueSize: 2, Preset: "nvidia"})
	require.NoError(t, err)
	require.Len(t, l.Nodes, 16)
	require.Len(t, l.Leaves, 4)
	require.Len(t, l.Cliques, 8)
	require.Equal(t, 128, l.TotalGPUs())
	n := l.Nodes[6] // spine 0, leaf 1, node 2
	require.Equal(t, "s0-l1-n2", n.Name)
	require.Equal(t, map[string]string{
		"kubernetes.io/hostname":            "s0-l1-n2",
		"nvidia.com/gpu.clique":             "s0-l1-c1",
		"network.topology.nvidia.com/leaf":  "s0-l1",
		"network.topology.nvidia.com/spine": "s0",
	}, n.Labels)
	require.Equal(t, [numTiers]int{3, 1, 0}, n.Domain)
	require.Equal(t, []int{6, 7}, l.Cliques[3])

	node := l.Node(&n)
	require.Equal(t, KwokNodeValue, node.Annotations[KwokNodeAnnotation])
	require.Equal(t, int64(8), node.Status.Allocatable.Name(GPU, "").Value())
}

func TestLayoutPresetTiers(t *testing.T) {
	// topograph has four levels: the fourth holds every node in one domain.
	l, err := NewLayout(scenario.Fabric{Spines: 1, LeavesPerSpine: 1, NodesPerLeaf: 2, GPUsPerNode: 8, CliqueSize: 0, Preset: "topograph"})
	require.NoError(t, err)
	require.Empty(t, l.TierKeys[Clique], "no cliques, no clique label")
	require.Equal(t, map[string]string{
		"kubernetes.io/hostname":            "s0-l0-n0",
		"network.topology.nvidia.com/leaf":  "s0-l0",
		"network.topology.nvidia.com/spine": "s0",
		"network.topology.nvidia.com/core":  "all",
	}, l.Nodes[0].Labels)
}

func TestPrefill(t *testing.T) {
	for _, layout := range []string{scenario.PrefillScattered, scenario.PrefillPacked} {
		t.Run(layout, func(t *testing.T) {
			l, err := NewLayout(scenario.Fabric{Spines: 2, LeavesPerSpine: 4, NodesPerLeaf: 8, GPUsPerNode: 8, CliqueSize: 4, Preset: "nvidia",
				Prefill: &scenario.Prefill{Fraction: 0.5, Layout: layout}})
			require.NoError(t, err)
			pods := l.Prefill(1)
			used := make([]int, len(l.Nodes))
			total := 0
			for _, p := range pods {
				require.Zero(t, used[p.Node], "one pre-fill pod per node")
				require.LessOrEqual(t, p.GPUs, 8)
				used[p.Node] = p.GPUs
				total += p.GPUs
			}
			require.Equal(t, l.TotalGPUs()/2, total)
			require.Equal(t, pods, l.Prefill(1), "the same seed gives the same pre-fill")
			if layout == scenario.PrefillPacked {
				whole := 0
				for _, u := range used {
					if u == 8 {
						whole++
					}
				}
				require.Equal(t, len(l.Nodes)/2, whole, "packed pre-fill takes whole nodes")
			}
			require.Less(t, FreeWhole(l.Leaves, used), len(l.Leaves), "pre-fill leaves some leaf partly used")
		})
	}
}
