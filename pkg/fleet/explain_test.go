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
	require.Equal(t, 40, fl.GPUNodes())

	req := Requirements{MinCUDA: MustParseVersion("12.4")}
	e := fl.Explain(req, Demand{Whole: true}, nil)
	require.Equal(t, 42, e.Considered)
	require.Zero(t, e.Admitted)
	require.Equal(t, map[Rule]int{RuleCUDA: 42}, e.Refused)
	require.Equal(t, 8, e.Unlabelled)
	require.Equal(t, "none of 42 nodes admits the member's GPU requirements: "+
		"needs CUDA >= 12.4; the best in the cluster is 12.2 (nvidia.com/cuda.runtime-version.full) on 14 of 40 GPU nodes; "+
		"8 nodes have no CUDA label (unlabelledNodes: Skip)", e.Message)

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
	require.Equal(t, make([]bool, len(nodes)), fl.Eligible(req, Demand{Whole: true}, base))

	// A member without GPUs is not explained, and keeps its base.
	e = fl.Explain(req, Demand{}, base)
	require.Equal(t, 20, e.Admitted)
	require.Empty(t, e.Message)
	got := fl.Eligible(req, Demand{}, base)
	require.Equal(t, base, got)
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
	req := Requirements{MinCUDA: MustParseVersion("12.4"), MinCompute: MustParseVersion("9.0"), Capacity: CapacityPolicySpot}
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
	require.Equal(t, []bool{false, false, false, false, false, true}, fl.Eligible(req, Demand{Whole: true}, nil))

	// Shared GPUs allowed, the shared node qualifies too.
	req.AllowSharedGPUs = true
	require.Equal(t, []bool{false, false, false, false, true, true}, fl.Eligible(req, Demand{Whole: true}, nil))
}

func TestExplainNoLabelAnywhere(t *testing.T) {
	fl := New([]placement.Node{node("a", kv()), node("b", kv())}, Options{AllowUnlabelled: false})
	e := fl.Explain(Requirements{MinCompute: MustParseVersion("8.0")}, Demand{MIG: true}, nil)
	require.Equal(t, "none of 2 nodes admits the member's GPU requirements: "+
		"needs compute capability >= 8.0; no node in the cluster has a compute capability label (nvidia.com/gpu.compute.{major,minor}); "+
		"2 nodes have no compute capability label (unlabelledNodes: Skip)", e.Message)

	allow := New([]placement.Node{node("a", kv()), node("b", kv())}, Options{AllowUnlabelled: true})
	e = allow.Explain(Requirements{MinCompute: MustParseVersion("8.0")}, Demand{MIG: true}, nil)
	require.Equal(t, 2, e.Admitted)
	require.Empty(t, e.Message)
}

func TestFleetProblems(t *testing.T) {
	fl := New([]placement.Node{
		node("ok", gfd("12.4", "550.54.15", "9.0")),
		node("bad", kv("nvidia.com/cuda.runtime-version.full", "12.4.x", "nvidia.com/gpu.replicas", "0")),
	}, DefaultOptions())
	problems := fl.Problems()
	require.Len(t, problems, 2)
	require.Equal(t, "bad", problems[0].Node)
	require.Equal(t, "nvidia.com/cuda.runtime-version.full", problems[0].Err.Label)
	require.Equal(t, "bad", problems[1].Node)
	require.EqualError(t, problems[1].Err, `label nvidia.com/gpu.replicas="0" is not a positive whole number; want the number of pods sharing each GPU, such as "4"`)
}

func TestDescribeGroups(t *testing.T) {
	var nodes []placement.Node
	add := func(n int, labels func() map[string]string) {
		for range n {
			nodes = append(nodes, node(fmt.Sprintf("n%02d", len(nodes)), labels()))
		}
	}
	add(3, func() map[string]string { return gfd("12.4", "550.54.15", "", "nvidia.com/gpu.product", a100) })
	add(5, func() map[string]string { return gfd("12.4", "550.54.15", "", "nvidia.com/gpu.product", h100) })
	add(3, func() map[string]string { return gfd("12.2", "535.104.05", "", "nvidia.com/gpu.product", h100) })
	fl := New(nodes, DefaultOptions())
	r := DefaultRequirements()
	g := fl.Group(r)
	require.Len(t, g.Groups, 3)
	require.Equal(t, "3 uniform groups; the largest hold 5 eligible nodes (nvidia.com/gpu.product="+h100+", driver 550.54, on-demand capacity), "+
		"3 eligible nodes (nvidia.com/gpu.product="+a100+", driver 550.54, on-demand capacity), ...", fl.DescribeGroups(g, nil, 2))

	r.MinCUDA = MustParseVersion("12.4")
	el := fl.Eligible(r, Demand{Whole: true}, nil)
	require.Equal(t, "3 uniform groups; the largest hold 5 eligible nodes (nvidia.com/gpu.product="+h100+", driver 550.54, on-demand capacity), "+
		"3 eligible nodes (nvidia.com/gpu.product="+a100+", driver 550.54, on-demand capacity), "+
		"0 eligible nodes (nvidia.com/gpu.product="+h100+", driver 535.104, on-demand capacity)", fl.DescribeGroups(g, el, 5))

	one := fl.Group(Requirements{Capacity: CapacityPolicyAny})
	require.Equal(t, "1 uniform group of 11 eligible nodes (all nodes)", fl.DescribeGroups(one, nil, 3))
	require.Equal(t, "no nodes", New(nil, DefaultOptions()).DescribeGroups(&Grouping{}, nil, 3))
}
