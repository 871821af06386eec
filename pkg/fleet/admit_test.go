package fleet

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// gfd returns labels as current GPU feature discovery writes them for a
// node with the given CUDA, driver and compute capability, extended by
// extra key, value pairs.
func gfd(cuda, driver, compute string, extra ...string) map[string]string {
	m := kv(extra...)
	if cuda != "" {
		m["nvidia.com/cuda.runtime-version.full"] = cuda
	}
	if driver != "" {
		m["nvidia.com/cuda.driver-version.full"] = driver
	}
	if compute != "" {
		major, minor, _ := strings.Cut(compute, ".")
		m["nvidia.com/gpu.compute.major"] = major
		m["nvidia.com/gpu.compute.minor"] = minor
	}
	m["nvidia.com/gpu.present"] = "true"
	return m
}

func TestAdmits(t *testing.T) {
	whole := Demand{Whole: true}
	modern := gfd("12.4", "550.54.15", "9.0")
	tests := []struct {
		name       string
		req        Requirements
		demand     Demand
		labels     map[string]string
		opts       Options
		wantRule   Rule // "" when admitted
		unlabelled bool
		reason     string
	}{
		{name: "a member without GPUs goes anywhere", req: Requirements{MinCUDA: mustParseVersion("13.0")}, labels: gfd("12.2", "", "", "nvidia.com/gpu-driver-upgrade-state", "drain-required")},
		{name: "no requirements, modern node", req: DefaultRequirements(), demand: whole, labels: modern},
		{name: "upgrade done", req: DefaultRequirements(), demand: whole, labels: gfd("12.4", "", "", "nvidia.com/gpu-driver-upgrade-state", "upgrade-done")},
		{
			name: "upgrade in progress", req: DefaultRequirements(), demand: whole,
			labels:   gfd("12.4", "", "", "nvidia.com/gpu-driver-upgrade-state", "upgrade-required"),
			wantRule: RuleDriverUpgrade, reason: "the GPU Operator is upgrading the node's driver (nvidia.com/gpu-driver-upgrade-state=upgrade-required)",
		},
		{
			name: "upgrade beats CUDA", req: Requirements{MinCUDA: mustParseVersion("13.0")}, demand: whole,
			labels: gfd("12.2", "", "", "nvidia.com/gpu-driver-upgrade-state", "pod-restart-required"), wantRule: RuleDriverUpgrade,
		},
		{name: "CUDA 12.10 meets 12.9", req: Requirements{MinCUDA: mustParseVersion("12.9")}, demand: whole, labels: gfd("12.10", "", "")},
		{name: "CUDA 12.4 meets 12.4", req: Requirements{MinCUDA: mustParseVersion("12.4")}, demand: whole, labels: modern},
		{
			name: "CUDA 12.9 is below 12.10", req: Requirements{MinCUDA: mustParseVersion("12.10")}, demand: whole, labels: gfd("12.9", "", ""),
			wantRule: RuleCUDA, reason: "the node's driver supports CUDA 12.9 (nvidia.com/cuda.runtime-version.full), below the 12.10 the member needs",
		},
		{
			name: "CUDA read from the deprecated keys", req: Requirements{MinCUDA: mustParseVersion("12.4")}, demand: whole,
			labels:   kv("nvidia.com/cuda.runtime.major", "12", "nvidia.com/cuda.runtime.minor", "2"),
			wantRule: RuleCUDA, reason: "CUDA 12.2 (nvidia.com/cuda.runtime.{major,minor}), below",
		},
		{
			name: "unlabelled node skipped", req: Requirements{MinCUDA: mustParseVersion("12.4")}, demand: whole, labels: kv("nvidia.com/gpu.product", "X"),
			wantRule: RuleCUDA, unlabelled: true, reason: "says no CUDA version: no label (nvidia.com/cuda.runtime-version.full, nvidia.com/cuda.runtime-version.{major,minor}, nvidia.com/cuda.runtime.{major,minor}), no device attribute gpu.nvidia.com/cudaDriverVersion (unlabelledNodes: Skip)",
		},
		{
			name: "a malformed CUDA label is as good as none", req: Requirements{MinCUDA: mustParseVersion("12.4")}, demand: whole,
			labels: kv("nvidia.com/cuda.runtime-version.full", "12.x"), wantRule: RuleCUDA, unlabelled: true,
		},
		{name: "unlabelled node allowed", req: Requirements{MinCUDA: mustParseVersion("12.4")}, demand: whole, labels: kv(), opts: Options{AllowUnlabelled: true}},
		{name: "a labelled old node stays refused when unlabelled ones are allowed", req: Requirements{MinCUDA: mustParseVersion("12.4")}, demand: whole,
			labels: gfd("12.2", "", ""), opts: Options{AllowUnlabelled: true}, wantRule: RuleCUDA},
		{name: "compute capability met", req: Requirements{MinCompute: mustParseVersion("8.0")}, demand: whole, labels: modern},
		{
			name: "compute capability too low", req: Requirements{MinCompute: mustParseVersion("9.0")}, demand: Demand{MIG: true}, labels: gfd("", "", "8.0"),
			wantRule: RuleComputeCapability, reason: "compute capability 8.0 (nvidia.com/gpu.compute.{major,minor}), below the 9.0",
		},
		{name: "compute capability unlabelled", req: Requirements{MinCompute: mustParseVersion("9.0")}, demand: whole, labels: gfd("12.4", "", ""),
			wantRule: RuleComputeCapability, unlabelled: true},
		{name: "spot gang on a spot node", req: Requirements{Capacity: CapacityPolicySpot}, demand: whole, labels: kv("karpenter.sh/capacity-type", "spot")},
		{
			name: "spot gang on an unlabelled node", req: Requirements{Capacity: CapacityPolicySpot}, demand: whole, labels: kv(),
			wantRule: RuleCapacityType, reason: "the gang asks for spot capacity (gpu-gang.x-k8s.io/capacity-type) and the node is on-demand (no capacity label)",
		},
		{
			name: "on-demand gang on a spot node", req: Requirements{Capacity: CapacityPolicyOnDemand}, demand: whole, labels: kv("cloud.google.com/gke-spot", "true"),
			wantRule: RuleCapacityType, reason: "the node is spot (cloud.google.com/gke-spot)",
		},
		{name: "on-demand gang on an unknown capacity type", req: Requirements{Capacity: CapacityPolicyOnDemand}, demand: whole,
			labels: kv("karpenter.sh/capacity-type", "interruptible"), wantRule: RuleCapacityType},
		{name: "uniform capacity is not judged node by node", req: Requirements{Capacity: CapacityPolicyUniform}, demand: whole, labels: kv("karpenter.sh/capacity-type", "spot")},
		{
			name: "whole GPUs on a time-sliced node", req: DefaultRequirements(), demand: whole,
			labels:   gfd("12.4", "", "", "nvidia.com/gpu.sharing-strategy", "time-slicing", "nvidia.com/gpu.replicas", "4"),
			wantRule: RuleSharedGPU, reason: `the member asks for whole GPUs (nvidia.com/gpu) and the node's are shared: time-slicing with 4 replicas per GPU; set gpu-gang.x-k8s.io/allow-shared-gpus: "true" to allow it`,
		},
		{name: "whole GPUs on a time-sliced node, allowed", req: Requirements{AllowSharedGPUs: true}, demand: whole,
			labels: kv("nvidia.com/gpu.sharing-strategy", "time-slicing")},
		{name: "whole GPUs on an MPS node", req: DefaultRequirements(), demand: whole, labels: kv("nvidia.com/gpu.sharing-strategy", "mps"), wantRule: RuleSharedGPU},
		{name: "whole GPUs on a MIG single node", req: DefaultRequirements(), demand: whole, labels: kv("nvidia.com/mig.strategy", "single"), wantRule: RuleSharedGPU},
		{name: "whole GPUs on a MIG mixed node", req: DefaultRequirements(), demand: whole, labels: kv("nvidia.com/mig.strategy", "mixed")},
		{name: "shared GPUs on a time-sliced node", req: DefaultRequirements(), demand: Demand{Shared: true}, labels: kv("nvidia.com/gpu.sharing-strategy", "time-slicing")},
		{name: "MIG slices on a MIG node", req: DefaultRequirements(), demand: Demand{MIG: true}, labels: kv("nvidia.com/mig.strategy", "mixed")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ReadNode(tt.labels, &tt.opts)
			ok, why := tt.req.Admits(&f, tt.demand, &tt.opts)
			require.Equal(t, tt.wantRule == "", ok, "refusal: %+v", why)
			require.Equal(t, tt.wantRule, why.Rule)
			require.Equal(t, tt.unlabelled, why.Unlabelled)
			require.Contains(t, why.Reason, tt.reason)
		})
	}
}
