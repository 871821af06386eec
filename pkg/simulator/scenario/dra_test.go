package scenario

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
)

const withDRA = `
name: dra
seed: 5
fabric:
  spines: 2
  leavesPerSpine: 2
  nodesPerLeaf: 4
  gpusPerNode: 8
  cliqueSize: 2
  gpuSource: mixed
  draNodes: {spines: [1]}
workload:
  gangs:
    - {name: g, count: 2, pods: 2, gpusPerPod: 8, gpuRequest: claim}
  jobs:
    - {name: fixed, pods: 2, gpusPerPod: 4}
  pods:
    - {count: 2, gpus: {choices: [1, 2]}, gpuRequest: claim}
`

func TestParseDRADefaults(t *testing.T) {
	s, err := Parse([]byte(withDRA))
	require.NoError(t, err)
	require.Equal(t, GPURequestClaim, s.Workload.Gangs[0].GPURequest)
	require.Equal(t, GPURequestExtendedResource, s.Workload.Jobs[0].GPURequest, "unset: the nvidia.com/gpu request of every earlier scenario")
	require.True(t, s.Fabric.HasDRANodes())
	require.Empty(t, s.Fabric.DRANodes.Per, "per goes with a fraction only")

	claims := map[string]bool{}
	for _, j := range Expand(s) {
		claims[j.Name] = j.ClaimsGPUs()
	}
	require.Equal(t, map[string]bool{"g-0": true, "g-1": true, "fixed": false, "pod-0": true, "pod-1": true}, claims)

	s, err = Parse([]byte(strings.Replace(withDRA, "draNodes: {spines: [1]}", "draNodes: {fraction: 0.5}", 1)))
	require.NoError(t, err)
	require.Equal(t, PerNode, s.Fabric.DRANodes.Per)
	require.Equal(t, ptr.To[int64](5), s.Fabric.DRANodes.Seed, "the draw's seed defaults to the scenario's")

	s, err = Parse([]byte(minimal))
	require.NoError(t, err)
	require.Equal(t, GPUSourceDevicePlugin, s.Fabric.GPUSource, "a scenario that says nothing keeps the device plugin")
	require.False(t, s.Fabric.HasDRANodes())
}

func TestParseDRAErrors(t *testing.T) {
	tests := []struct {
		name     string
		old, new string
		want     []string
	}{
		{name: "unknown source", old: "gpuSource: mixed", new: "gpuSource: cdi",
			want: []string{"fabric.gpuSource", `"cdi"`}},
		{name: "mixed without DRA nodes", old: "  draNodes: {spines: [1]}\n", new: "",
			want: []string{"fabric.draNodes: Required value"}},
		{name: "DRA nodes without mixed", old: "gpuSource: mixed", new: "gpuSource: dra",
			want: []string{"fabric.draNodes: Forbidden: only a mixed gpuSource picks DRA nodes"}},
		{name: "spine out of range", old: "spines: [1]", new: "spines: [2]",
			want: []string{"fabric.draNodes.spines[0]", "spines 0 to 1"}},
		{name: "spine twice", old: "spines: [1]", new: "spines: [1, 1]",
			want: []string{"fabric.draNodes.spines[1]: Duplicate"}},
		{name: "every spine", old: "spines: [1]", new: "spines: [0, 1]",
			want: []string{"fabric.draNodes.spines", "use gpuSource dra"}},
		{name: "spines and fraction", old: "spines: [1]", new: "spines: [1], fraction: 0.5",
			want: []string{"set either spines or fraction"}},
		{name: "per with spines", old: "spines: [1]", new: "spines: [1], per: leaf",
			want: []string{"fabric.draNodes.per: Forbidden"}},
		{name: "fraction out of range", old: "spines: [1]", new: "fraction: 1",
			want: []string{"fabric.draNodes.fraction", "(0, 1)"}},
		{name: "fraction that rounds to no unit", old: "spines: [1]", new: "fraction: 0.2, per: spine",
			want: []string{"picks 0 of the fabric's 2 spine units"}},
		{name: "fraction that rounds to every unit", old: "spines: [1]", new: "fraction: 0.9, per: leaf",
			want: []string{"picks 4 of the fabric's 4 leaf units"}},
		{name: "claim on a device-plugin fabric", old: "gpuSource: mixed\n  draNodes: {spines: [1]}", new: "gpuSource: device-plugin",
			want: []string{"workload.gangs[0].gpuRequest", "no node publishes gpu.nvidia.com devices", "workload.pods[0].gpuRequest"}},
		{name: "claim of no GPU", old: "gpus: {choices: [1, 2]}", new: "gpus: {choices: [0, 2]}",
			want: []string{"workload.pods[0].gpuRequest", "at least one GPU"}},
		{name: "unknown request", old: "gpusPerPod: 8, gpuRequest: claim", new: "gpusPerPod: 8, gpuRequest: cdi",
			want: []string{"workload.gangs[0].gpuRequest", `"cdi"`}},
		{name: "job's request", old: "gpusPerPod: 4}", new: "gpusPerPod: 0, gpuRequest: claim}",
			want: []string{"workload.jobs[0].gpuRequest", "at least one GPU"}},
		{name: "too many devices for a slice", old: "gpusPerNode: 8", new: "gpusPerNode: 129",
			want: []string{"fabric.gpusPerNode", "a ResourceSlice holds at most 128 devices"}},
		{name: "shared GPUs through DRA", old: "  draNodes: {spines: [1]}\n",
			new:  "  draNodes: {spines: [1]}\n  fleet: {sharing: {choices: [{strategy: none}, {strategy: time-slicing, replicas: 2}]}}\n",
			want: []string{"fabric.fleet.sharing.choices[1]: Forbidden", "claim configuration"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Contains(t, withDRA, tt.old)
			_, err := Parse([]byte(strings.Replace(withDRA, tt.old, tt.new, 1)))
			require.Error(t, err)
			for _, w := range tt.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
	mixedCliques := strings.Replace(strings.Replace(withDRA, "cliqueSize: 2", "cliqueSize: 0", 1), "spines: [1]", "fraction: 0.5, per: clique", 1)
	_, err := Parse([]byte(mixedCliques))
	require.ErrorContains(t, err, `fabric.draNodes.per: Invalid value: "clique": the fabric has no cliques`)
}

func TestFabricUnits(t *testing.T) {
	f := Fabric{Spines: 2, LeavesPerSpine: 3, NodesPerLeaf: 4, CliqueSize: 2}
	require.Equal(t, 24, f.Units(PerNode))
	require.Equal(t, 12, f.Units(PerClique))
	require.Equal(t, 6, f.Units(PerLeaf))
	require.Equal(t, 2, f.Units(PerSpine))
	f.CliqueSize = 0
	require.Zero(t, f.Units(PerClique))
}
