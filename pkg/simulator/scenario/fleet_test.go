package scenario

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/fleet"
)

const withFleet = `
name: fleet
seed: 9
fabric:
  spines: 1
  leavesPerSpine: 2
  nodesPerLeaf: 4
  gpusPerNode: 8
  cliqueSize: 2
  fleet:
    products:
      per: leaf
      choices: [{name: NVIDIA-H100-80GB-HBM3, compute: "9.0"}]
    drivers:
      choices: [{version: 550.54.15, cuda: "12.4"}]
    sharing:
      choices: [{strategy: none}, {strategy: mps, replicas: 4}]
    capacity:
      choices: [{type: spot}, {type: on-demand, label: eks.amazonaws.com/capacityType}]
    upgrading: 0.25
workload:
  gangs:
    - {name: g, count: 2, pods: 2, gpusPerPod: 8, gpu: {minCUDA: "12.4", capacityType: spot}}
  jobs:
    - {name: fixed, pods: 2, gpusPerPod: 8, gpu: {uniform: none, allowSharedGPUs: true}}
`

func TestParseFleetDefaults(t *testing.T) {
	s, err := Parse([]byte(withFleet))
	require.NoError(t, err)
	f := s.Fabric.Fleet
	require.Equal(t, ptr.To[int64](9), f.Seed, "the fleet's seed defaults to the scenario's")
	require.Equal(t, PerLeaf, f.Products.Per)
	require.Equal(t, PerNode, f.Drivers.Per)
	require.Equal(t, DriverLabelsBoth, f.Drivers.Choices[0].Labels)
	require.Equal(t, "karpenter.sh/capacity-type", f.Capacity.Choices[0].Label)
	require.Equal(t, "eks.amazonaws.com/capacityType", f.Capacity.Choices[1].Label)
	require.Equal(t, []int{1, 1}, f.Sharing.Weights())

	jobs := Expand(s)
	require.Len(t, jobs, 3)
	for _, j := range jobs {
		r, err := j.GPU.Requirements()
		require.NoError(t, err)
		switch {
		case strings.HasPrefix(j.Name, "g-"):
			require.Equal(t, "12.4", r.MinCUDA.String())
			require.Equal(t, fleet.CapacityPolicySpot, r.Capacity)
		case j.Name == "fixed":
			require.True(t, r.Uniform.IsNone())
			require.True(t, r.AllowSharedGPUs)
		}
	}
}

func TestParseFleetErrors(t *testing.T) {
	tests := []struct {
		name     string
		old, new string
		want     []string
	}{
		{name: "bad compute", old: `compute: "9.0"`, new: `compute: "9.0a"`,
			want: []string{"fabric.fleet.products.choices[0].compute", `want a compute capability such as "9.0"`}},
		{name: "bad driver", old: "version: 550.54.15", new: "version: 550.54.15.1.2",
			want: []string{"fabric.fleet.drivers.choices[0].version"}},
		{name: "bad CUDA", old: `cuda: "12.4"`, new: `cuda: "12.4.1"`, want: []string{"fabric.fleet.drivers.choices[0].cuda", "at most 2 components"}},
		{name: "label set", old: `cuda: "12.4"}`, new: `cuda: "12.4", labels: old}`, want: []string{"fabric.fleet.drivers.choices[0].labels", `"old"`}},
		{name: "no replicas", old: "replicas: 4", new: "replicas: 1", want: []string{"fabric.fleet.sharing.choices[1].replicas", "at least 2"}},
		{name: "replicas without sharing", old: "{strategy: none}", new: "{strategy: none, replicas: 2}", want: []string{"fabric.fleet.sharing.choices[0].replicas"}},
		{name: "strategy", old: "strategy: mps", new: "strategy: mig", want: []string{"fabric.fleet.sharing.choices[1].strategy"}},
		{name: "capacity type", old: "{type: spot}", new: "{type: preemptible}", want: []string{"fabric.fleet.capacity.choices[0].type"}},
		{name: "capacity label the plugin does not read", old: "label: eks.amazonaws.com/capacityType", new: "label: example.com/spot",
			want: []string{"fabric.fleet.capacity.choices[1].label", "karpenter.sh/capacity-type"}},
		{name: "per", old: "per: leaf", new: "per: rack", want: []string{"fabric.fleet.products.per"}},
		{name: "per leaf needs no cliques", old: "cliqueSize: 2", new: "cliqueSize: 0", want: []string{}},
		{name: "no choices", old: "choices: [{version: 550.54.15, cuda: \"12.4\"}]", new: "choices: []", want: []string{"fabric.fleet.drivers.choices: Required value"}},
		{name: "negative weight", old: "{strategy: none}", new: "{strategy: none, weight: -1}", want: []string{"fabric.fleet.sharing.choices[0].weight"}},
		{name: "upgrading", old: "upgrading: 0.25", new: "upgrading: 1", want: []string{"fabric.fleet.upgrading", "[0, 1)"}},
		{name: "gang's min CUDA", old: `minCUDA: "12.4"`, new: `minCUDA: "12.x"`,
			want: []string{"workload.gangs[0].gpu.minCUDA", `has a component "x" that is not a number`, `want a CUDA version major.minor such as "12.4"`}},
		{name: "job's uniform", old: "uniform: none", new: "uniform: 'a b'", want: []string{"workload.jobs[0].gpu.uniform", "not a label key"}},
		{name: "capacity policy", old: "capacityType: spot", new: "capacityType: cheap", want: []string{"workload.gangs[0].gpu.capacityType"}},
		{name: "unknown gpu field", old: "allowSharedGPUs: true", new: "allowShared: true", want: []string{`unknown field "allowShared"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Contains(t, withFleet, tt.old)
			_, err := Parse([]byte(strings.Replace(withFleet, tt.old, tt.new, 1)))
			if len(tt.want) == 0 {
				require.NoError(t, err, "per: leaf needs no cliques")
				return
			}
			require.Error(t, err)
			for _, w := range tt.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
	_, err := Parse([]byte(strings.Replace(strings.Replace(withFleet, "cliqueSize: 2", "cliqueSize: 0", 1), "per: leaf", "per: clique", 1)))
	require.ErrorContains(t, err, "fabric.fleet.products.per: Invalid value: \"clique\": the fabric has no cliques")
}
