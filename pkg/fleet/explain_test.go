package fleet

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

func TestExplainNoNodeQualifies(t *testing.T) {
	// 40 GPU nodes: 14 at CUDA 12.2, 20 at 12.1 through the deprecated
	// keys, 6 with no CUDA label; and 2 nodes without GPUs at all.
	var nodes []placement.Node
	for i := range 14 {
		nodes = append(nodes, node(fmt.Sprintf("new-%02d", i), gfd("12.2", "535.104.05", "9.0")))
	}
	for i := range 20 {
		nodes = append(nodes, node(fmt.Sprintf("old-%02d", i), kv("nvidia.com/cuda.runtime.major", "12", "nvidia.com/cuda.runtime.minor", "1")))
	}
	for i := range 6 {
		nodes = append(nodes, node(fmt.Sprintf("bare-%d", i), kv("nvidia.com/gpu.present", "true")))
	}
	nodes = append(nodes, node("cpu-0", kv()), node("cpu-1", kv()))
	fl := New(nodes, DefaultOptions())

	req := Requirements{MinCUDA: mustParseVersion("12.4")}
	e := fl.Explain(req, Demand{Whole: true}, nil)
	require.Equal(t, 42, e.Considered)
	require.Zero(t, e.Admitted)
	require.Equal(t, map[Rule]int{RuleCUDA: 42}, e.Refused)
	require.Equal(t, 8, e.Unlabelled)
	require.Equal(t, "none of 42 nodes admits the member's GPU requirements: "+
		"needs CUDA >= 12.4; the best in the cluster is 12.2 (nvidia.com/cuda.runtime-version.full) on 14 of 40 GPU nodes; "+
		"8 nodes have no CUDA label or device attribute (unlabelledNodes: Skip)", e.Message)

	// Restricted to nodes the member may use for other reasons, the counts
	// shrink; the best version is still the cluster's.
	base := make([]bool, len(nodes))
	for i := 14; i < 34; i++ {
		base[i] = true
	}
	e = fl.Explain(req, Demand{Whole: true}, base)
	require.Equal(t, 20, e.Considered)
	require.Equal(t, "none of 20 nodes admits the member's GPU requirements: "+
		"needs CUDA >= 12.4; the best in the cluster is 12.2 (nvidia.com/cuda.runtime-version.full) on 14 of 40 GPU nodes", e.Message)
	require.Equal(t, make([]bool, len(nodes)), admitted(fl, req, Demand{Whole: true}))

	// A member without GPUs is not explained, and every node admits it.
	e = fl.Explain(req, Demand{}, base)
	require.Equal(t, 20, e.Admitted)
	require.Empty(t, e.Message)
	require.NotContains(t, admitted(fl, req, Demand{}), false)
}

// admitted is Fleet.Admits on every node.
func admitted(fl *Fleet, r Requirements, d Demand) []bool {
	out := make([]bool, len(fl.facts))
	for i := range out {
		out[i], _ = fl.Admits(i, r, d)
	}
	return out
}

func TestExplainEveryRule(t *testing.T) {
	nodes := []placement.Node{
		node("upgrading", gfd("12.4", "", "9.0", "nvidia.com/gpu-driver-upgrade-state", "drain-required")),
		node("old-cuda", gfd("12.2", "", "9.0")),
		node("ampere", gfd("12.4", "", "8.0")),
		node("on-demand", gfd("12.4", "", "9.0", "karpenter.sh/capacity-type", "on-demand")),
		node("shared", gfd("12.4", "", "9.0", "karpenter.sh/capacity-type", "spot", "nvidia.com/gpu.sharing-strategy", "time-slicing", "nvidia.com/gpu.replicas", "2")),
		node("good", gfd("12.8", "", "9.0", "karpenter.sh/capacity-type", "spot")),
	}
	fl := New(nodes, DefaultOptions())
	req := Requirements{MinCUDA: mustParseVersion("12.4"), MinCompute: mustParseVersion("9.0"), Capacity: CapacityPolicySpot}
	e := fl.Explain(req, Demand{Whole: true}, nil)
	require.Equal(t, 1, e.Admitted)
	require.Equal(t, map[Rule]int{RuleDriverUpgrade: 1, RuleCUDA: 1, RuleComputeCapability: 1, RuleCapacityType: 1, RuleSharedGPU: 1}, e.Refused)
	require.Equal(t, "1 of 6 nodes admit the member's GPU requirements: "+
		"1 node is in a GPU driver upgrade (nvidia.com/gpu-driver-upgrade-state is not upgrade-done); "+
		"needs CUDA >= 12.4; the best in the cluster is 12.8 (nvidia.com/cuda.runtime-version.full) on 1 of 6 GPU nodes; "+
		"needs compute capability >= 9.0; the best in the cluster is 9.0 (nvidia.com/gpu.compute.{major,minor}) on 5 of 6 GPU nodes; "+
		"needs spot capacity (gpu-gang.x-k8s.io/capacity-type); 1 node is not spot, and the cluster has 2 spot nodes; "+
		`asks for whole GPUs (nvidia.com/gpu) and 1 node has GPUs shared between pods or cut into MIG slices; set gpu-gang.x-k8s.io/allow-shared-gpus: "true" to allow them`,
		e.Message)
	require.Equal(t, []bool{false, false, false, false, false, true}, admitted(fl, req, Demand{Whole: true}))

	// Shared GPUs allowed, the shared node qualifies too.
	req.AllowSharedGPUs = true
	require.Equal(t, []bool{false, false, false, false, true, true}, admitted(fl, req, Demand{Whole: true}))
}

func TestExplainNoLabelAnywhere(t *testing.T) {
	fl := New([]placement.Node{node("a", kv()), node("b", kv())}, Options{AllowUnlabelled: false})
	e := fl.Explain(Requirements{MinCompute: mustParseVersion("8.0")}, Demand{MIG: true}, nil)
	require.Equal(t, "none of 2 nodes admits the member's GPU requirements: "+
		"needs compute capability >= 8.0; no node in the cluster says its compute capability (labels nvidia.com/gpu.compute.{major,minor}; device attribute gpu.nvidia.com/cudaComputeCapability); "+
		"2 nodes have no compute capability label or device attribute (unlabelledNodes: Skip)", e.Message)

	allow := New([]placement.Node{node("a", kv()), node("b", kv())}, Options{AllowUnlabelled: true})
	e = allow.Explain(Requirements{MinCompute: mustParseVersion("8.0")}, Demand{MIG: true}, nil)
	require.Equal(t, 2, e.Admitted)
	require.Empty(t, e.Message)
}
