package metrics

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/fleet"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

// A leaf per product and driver, so that tests can pick nodes by leaf:
// s0-l0 H100 on driver 550 (CUDA 12.4), s0-l1 H100 on driver 535 (CUDA
// 12.2, deprecated labels), s0-l2 A100 on driver 550; capacity by clique
// (spot in the second clique of each leaf); sharing on nothing.
const countScenario = `
name: count
seed: 1
fabric:
  spines: 1
  leavesPerSpine: 3
  nodesPerLeaf: 4
  gpusPerNode: 8
  cliqueSize: 2
workload:
  gangs:
    - {count: 1, pods: 2, gpusPerPod: 8}
`

func countLayout(t *testing.T) *fabric.Layout {
	t.Helper()
	s, err := scenario.Parse([]byte(countScenario))
	require.NoError(t, err)
	l, err := fabric.NewLayout(s.Fabric)
	require.NoError(t, err)
	set := func(node string, kv ...string) {
		n := &l.Nodes[l.Index()[node]]
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
	for _, n := range l.Nodes {
		leaf := n.Name[:len("s0-l0")]
		switch leaf {
		case "s0-l0":
			set(n.Name, "nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3", "nvidia.com/cuda.runtime-version.full", "12.4", "nvidia.com/cuda.driver-version.full", "550.54.15")
		case "s0-l1":
			set(n.Name, "nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3", "nvidia.com/cuda.runtime.major", "12", "nvidia.com/cuda.runtime.minor", "2",
				"nvidia.com/cuda.driver.major", "535", "nvidia.com/cuda.driver.minor", "104", "nvidia.com/cuda.driver.rev", "05")
		case "s0-l2":
			set(n.Name, "nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB", "nvidia.com/cuda.runtime-version.full", "12.4", "nvidia.com/cuda.driver-version.full", "550.90.07")
		}
		if n.Domain[fabric.Clique]%2 == 1 {
			set(n.Name, "karpenter.sh/capacity-type", "spot")
		}
	}
	set("s0-l0-n1", "nvidia.com/gpu-driver-upgrade-state", "upgrade-required")
	return l
}

func TestCountFleet(t *testing.T) {
	l := countLayout(t)
	jobs := []scenario.Job{
		{Name: "ok", Gang: true, Pods: 2, GPUsPerPod: 8, GPU: &scenario.GPURequirements{MinCUDA: "12.4"}},
		{Name: "old-cuda", Gang: true, Pods: 2, GPUsPerPod: 8, GPU: &scenario.GPURequirements{MinCUDA: "12.4", Uniform: "none", CapacityType: "any"}},
		{Name: "mixed-product", Gang: true, Pods: 2, GPUsPerPod: 8},
		{Name: "mixed-capacity", Gang: true, Pods: 2, GPUsPerPod: 8},
		{Name: "capacity-any", Gang: true, Pods: 2, GPUsPerPod: 8, GPU: &scenario.GPURequirements{CapacityType: "any"}},
		{Name: "upgrading-and-mixed", Gang: true, Pods: 2, GPUsPerPod: 8},
		{Name: "forced-spot", Gang: true, Pods: 1, GPUsPerPod: 8, GPU: &scenario.GPURequirements{CapacityType: "spot"}},
		{Name: "unbound", Gang: true, Pods: 2, GPUsPerPod: 8, GPU: &scenario.GPURequirements{MinCUDA: "13.0"}},
		{Name: "cpu-only", Gang: true, Pods: 2, GPUsPerPod: 0, GPU: &scenario.GPURequirements{MinCUDA: "13.0"}},
		{Name: "plain-pod", Pods: 1, GPUsPerPod: 1, GPU: &scenario.GPURequirements{MinCUDA: "13.0"}},
	}
	gangs := []Gang{
		{Name: "ok", Nodes: []string{"s0-l0-n0", "s0-l0-n0"}},
		{Name: "old-cuda", Nodes: []string{"s0-l0-n0", "s0-l1-n0"}},
		{Name: "mixed-product", Nodes: []string{"s0-l0-n0", "s0-l2-n0"}},
		{Name: "mixed-capacity", Nodes: []string{"s0-l0-n0", "s0-l0-n2"}},
		{Name: "capacity-any", Nodes: []string{"s0-l0-n0", "s0-l0-n2"}},
		{Name: "upgrading-and-mixed", Nodes: []string{"s0-l0-n1", "s0-l1-n1"}},
		{Name: "forced-spot", Nodes: []string{"s0-l0-n0"}},
		{Name: "unbound"},
		{Name: "cpu-only", Nodes: []string{"s0-l1-n0", "s0-l1-n1"}},
		{Name: "plain-pod", Nodes: []string{"s0-l1-n0"}},
	}
	c, err := CountFleet(l, jobs, gangs)
	require.NoError(t, err)
	require.Equal(t, 7, c.Gangs, "gangs with GPUs and a bound member")
	require.Equal(t, 3, c.Incompatible, "old-cuda, upgrading-and-mixed, forced-spot")
	require.Equal(t, 3, c.Mixed, "mixed-product, mixed-capacity, upgrading-and-mixed")
	require.Equal(t, map[fleet.Rule]int{fleet.RuleCUDA: 1, fleet.RuleDriverUpgrade: 1, fleet.RuleCapacityType: 1}, c.ByRule)
	require.Equal(t, []string{
		"old-cuda incompatible (CUDA): s0-l1-n0: the node's driver supports CUDA 12.2 (nvidia.com/cuda.runtime.{major,minor}), below the 12.4 the member needs",
		"mixed-product mixed: nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3, driver 550.54, on-demand capacity | nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB, driver 550.90, on-demand capacity",
		"mixed-capacity mixed: nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3, driver 550.54, on-demand capacity | nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3, driver 550.54, spot capacity",
		"upgrading-and-mixed incompatible (DriverUpgrade): s0-l0-n1: the GPU Operator is upgrading the node's driver (nvidia.com/gpu-driver-upgrade-state=upgrade-required)",
		"upgrading-and-mixed mixed: nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3, driver 550.54, on-demand capacity | nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3, driver 535.104, on-demand capacity",
	}, c.Examples)

	_, err = CountFleet(l, jobs, []Gang{{Name: "ghost", Nodes: []string{"s0-l0-n0"}}})
	require.ErrorContains(t, err, "gang ghost is not one of the scenario's jobs")
	_, err = CountFleet(l, jobs, []Gang{{Name: "ok", Nodes: []string{"elsewhere"}}})
	require.ErrorContains(t, err, "node elsewhere is not in the fabric")
}
