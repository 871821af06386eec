package fleet

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// kv builds a label or annotation map from key, value pairs.
func kv(pairs ...string) map[string]string {
	m := make(map[string]string, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
	}
	return m
}

// problemLabels lists the labels of a node's problems, in order.
func problemLabels(f *NodeFacts) []string {
	var out []string
	for _, p := range f.Problems {
		out = append(out, p.Label)
	}
	return out
}

func TestReadNodeCUDA(t *testing.T) {
	tests := []struct {
		name      string
		labels    map[string]string
		want      string // "" for no version
		wantLabel string
		problems  []string
	}{
		{name: "no labels", labels: kv()},
		{
			name:   "current keys, as GFD writes them alongside the deprecated ones",
			labels: kv("nvidia.com/cuda.runtime-version.full", "12.2", "nvidia.com/cuda.runtime-version.major", "12", "nvidia.com/cuda.runtime-version.minor", "2", "nvidia.com/cuda.runtime.major", "12", "nvidia.com/cuda.runtime.minor", "2"),
			want:   "12.2", wantLabel: "nvidia.com/cuda.runtime-version.full",
		},
		{
			name:   "only current major and minor",
			labels: kv("nvidia.com/cuda.runtime-version.major", "12", "nvidia.com/cuda.runtime-version.minor", "10"),
			want:   "12.10", wantLabel: "nvidia.com/cuda.runtime-version.{major,minor}",
		},
		{
			name:   "only the deprecated keys, as older GFD releases write",
			labels: kv("nvidia.com/cuda.runtime.major", "11", "nvidia.com/cuda.runtime.minor", "8"),
			want:   "11.8", wantLabel: "nvidia.com/cuda.runtime.{major,minor}",
		},
		{
			name:   "the full key wins over disagreeing deprecated keys",
			labels: kv("nvidia.com/cuda.runtime-version.full", "12.4", "nvidia.com/cuda.runtime.major", "11", "nvidia.com/cuda.runtime.minor", "8"),
			want:   "12.4", wantLabel: "nvidia.com/cuda.runtime-version.full",
		},
		{
			name:   "a malformed full key falls back to the parts, and is reported",
			labels: kv("nvidia.com/cuda.runtime-version.full", "12.x", "nvidia.com/cuda.runtime-version.major", "12", "nvidia.com/cuda.runtime-version.minor", "4"),
			want:   "12.4", wantLabel: "nvidia.com/cuda.runtime-version.{major,minor}",
			problems: []string{"nvidia.com/cuda.runtime-version.full"},
		},
		{
			name:   "a major without its minor counts as major.0",
			labels: kv("nvidia.com/cuda.runtime.major", "12"),
			want:   "12", wantLabel: "nvidia.com/cuda.runtime.{major,minor}",
		},
		{
			name:     "a minor without its major is reported and ignored",
			labels:   kv("nvidia.com/cuda.runtime.minor", "4"),
			problems: []string{"nvidia.com/cuda.runtime.minor"},
		},
		{
			name:     "a dotted major is not a whole number",
			labels:   kv("nvidia.com/cuda.runtime-version.major", "12.4", "nvidia.com/cuda.runtime-version.minor", "4"),
			problems: []string{"nvidia.com/cuda.runtime-version.major"},
		},
		{
			name:     "every source malformed",
			labels:   kv("nvidia.com/cuda.runtime-version.full", "twelve", "nvidia.com/cuda.runtime.major", "12", "nvidia.com/cuda.runtime.minor", "four"),
			problems: []string{"nvidia.com/cuda.runtime-version.full", "nvidia.com/cuda.runtime.minor"},
		},
		{name: "an empty value counts as missing", labels: kv("nvidia.com/cuda.runtime-version.full", "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ReadNode(tt.labels, nil)
			require.Equal(t, tt.want, f.CUDA.String())
			require.Equal(t, tt.want != "", f.HasCUDA())
			require.Equal(t, tt.wantLabel, f.CUDALabel)
			require.Equal(t, tt.problems, problemLabels(&f))
			require.Equal(t, tt.want != "", f.GPU, "a CUDA label makes a GPU node")
		})
	}
}

func TestReadNodeDriverAndCompute(t *testing.T) {
	tests := []struct {
		name                  string
		labels                map[string]string
		driver, driverLabel   string
		compute, computeLabel string
	}{
		{
			name:   "current driver key",
			labels: kv("nvidia.com/cuda.driver-version.full", "550.54.15", "nvidia.com/cuda.driver.major", "535"),
			driver: "550.54.15", driverLabel: "nvidia.com/cuda.driver-version.full",
		},
		{
			name:   "current driver parts",
			labels: kv("nvidia.com/cuda.driver-version.major", "550", "nvidia.com/cuda.driver-version.minor", "107", "nvidia.com/cuda.driver-version.revision", "02"),
			driver: "550.107.02", driverLabel: "nvidia.com/cuda.driver-version.{major,minor,revision}",
		},
		{
			name:   "deprecated driver parts, with .rev",
			labels: kv("nvidia.com/cuda.driver.major", "535", "nvidia.com/cuda.driver.minor", "104", "nvidia.com/cuda.driver.rev", "05"),
			driver: "535.104.05", driverLabel: "nvidia.com/cuda.driver.{major,minor,rev}",
		},
		{
			name:    "compute capability",
			labels:  kv("nvidia.com/gpu.compute.major", "9", "nvidia.com/gpu.compute.minor", "0"),
			compute: "9.0", computeLabel: "nvidia.com/gpu.compute.{major,minor}",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ReadNode(tt.labels, nil)
			require.Empty(t, f.Problems)
			require.Equal(t, tt.driver, f.Driver.String())
			require.Equal(t, tt.driverLabel, f.DriverLabel)
			require.Equal(t, tt.compute, f.Compute.String())
			require.Equal(t, tt.computeLabel, f.ComputeLabel)
			require.True(t, f.GPU)
		})
	}
}

func TestReadNodeStateSharingAndMIG(t *testing.T) {
	tests := []struct {
		name      string
		labels    map[string]string
		upgrading bool
		shared    bool
		sharedHow string
		mig       bool
		gpu       bool
		problems  []string
	}{
		{name: "a plain node", labels: kv("kubernetes.io/hostname", "n0")},
		{name: "gpu.present alone makes a GPU node", labels: kv("nvidia.com/gpu.present", "true"), gpu: true},
		{name: "upgrade done", labels: kv("nvidia.com/gpu-driver-upgrade-state", "upgrade-done"), gpu: false},
		{name: "upgrade required", labels: kv("nvidia.com/gpu-driver-upgrade-state", "upgrade-required"), upgrading: true},
		{name: "drain required", labels: kv("nvidia.com/gpu-driver-upgrade-state", "drain-required"), upgrading: true},
		{name: "upgrade failed", labels: kv("nvidia.com/gpu-driver-upgrade-state", "upgrade-failed"), upgrading: true},
		{name: "sharing none", labels: kv("nvidia.com/gpu.sharing-strategy", "none"), gpu: true},
		{
			name:   "time-slicing with replicas",
			labels: kv("nvidia.com/gpu.sharing-strategy", "time-slicing", "nvidia.com/gpu.replicas", "4"),
			shared: true, sharedHow: "time-slicing with 4 replicas per GPU", gpu: true,
		},
		{name: "mps without replicas", labels: kv("nvidia.com/gpu.sharing-strategy", "mps"), shared: true, sharedHow: "mps", gpu: true},
		{
			name:   "unknown strategy counts as shared, and is reported",
			labels: kv("nvidia.com/gpu.sharing-strategy", "vgpu"),
			shared: true, sharedHow: `sharing strategy "vgpu"`, gpu: true, problems: []string{"nvidia.com/gpu.sharing-strategy"},
		},
		{
			name:   "malformed replicas",
			labels: kv("nvidia.com/gpu.sharing-strategy", "time-slicing", "nvidia.com/gpu.replicas", "four"),
			shared: true, sharedHow: "time-slicing", gpu: true, problems: []string{"nvidia.com/gpu.replicas"},
		},
		{
			name:   "MIG single: nvidia.com/gpu is a slice",
			labels: kv("nvidia.com/mig.strategy", "single", "nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"),
			shared: true, sharedHow: "MIG single strategy (nvidia.com/gpu is a MIG slice)", mig: true, gpu: true,
		},
		{name: "MIG mixed", labels: kv("nvidia.com/mig.strategy", "mixed"), mig: true, gpu: true},
		{name: "MIG profile labels alone", labels: kv("nvidia.com/mig-1g.10gb.count", "7"), mig: true, gpu: true},
		{name: "unknown MIG strategy", labels: kv("nvidia.com/mig.strategy", "both"), gpu: true, problems: []string{"nvidia.com/mig.strategy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ReadNode(tt.labels, nil)
			require.Equal(t, tt.upgrading, f.Upgrading())
			shared, how := f.SharedGPUs()
			require.Equal(t, tt.shared, shared)
			require.Equal(t, tt.sharedHow, how)
			require.Equal(t, tt.mig, f.MIG)
			require.Equal(t, tt.gpu, f.GPU)
			require.Equal(t, tt.problems, problemLabels(&f))
		})
	}
}

func TestReadNodeCapacity(t *testing.T) {
	tests := []struct {
		name      string
		labels    map[string]string
		opts      *Options
		want      CapacityType
		wantLabel string
		problems  []string
	}{
		{name: "no capacity label counts as on-demand", labels: kv(), want: CapacityOnDemand},
		{name: "karpenter spot", labels: kv("karpenter.sh/capacity-type", "spot"), want: CapacitySpot, wantLabel: "karpenter.sh/capacity-type"},
		{name: "karpenter reserved", labels: kv("karpenter.sh/capacity-type", "reserved"), want: CapacityOnDemand, wantLabel: "karpenter.sh/capacity-type"},
		{name: "GKE spot", labels: kv("cloud.google.com/gke-spot", "true"), want: CapacitySpot, wantLabel: "cloud.google.com/gke-spot"},
		{name: "EKS spot", labels: kv("eks.amazonaws.com/capacityType", "SPOT"), want: CapacitySpot, wantLabel: "eks.amazonaws.com/capacityType"},
		{name: "EKS on-demand", labels: kv("eks.amazonaws.com/capacityType", "ON_DEMAND"), want: CapacityOnDemand, wantLabel: "eks.amazonaws.com/capacityType"},
		{name: "EKS capacity block", labels: kv("eks.amazonaws.com/capacityType", "CAPACITY_BLOCK"), want: CapacityOnDemand, wantLabel: "eks.amazonaws.com/capacityType"},
		{name: "lifecycle normal", labels: kv("node.kubernetes.io/lifecycle", "normal"), want: CapacityOnDemand, wantLabel: "node.kubernetes.io/lifecycle"},
		{
			name:   "the first key in the list decides",
			labels: kv("karpenter.sh/capacity-type", "on-demand", "node.kubernetes.io/lifecycle", "spot"),
			want:   CapacityOnDemand, wantLabel: "karpenter.sh/capacity-type",
		},
		{
			name:   "a configured order",
			labels: kv("karpenter.sh/capacity-type", "on-demand", "node.kubernetes.io/lifecycle", "spot"),
			opts:   &Options{CapacityTypeLabels: []string{"node.kubernetes.io/lifecycle", "karpenter.sh/capacity-type"}},
			want:   CapacitySpot, wantLabel: "node.kubernetes.io/lifecycle",
		},
		{
			name:   "keys outside the configured list are ignored",
			labels: kv("karpenter.sh/capacity-type", "spot"),
			opts:   &Options{CapacityTypeLabels: []string{"example.com/lifecycle"}},
			want:   CapacityOnDemand,
		},
		{
			name:   "a configured key with a known spelling",
			labels: kv("cloud.google.com/gke-preemptible", "true"),
			opts:   &Options{CapacityTypeLabels: []string{"cloud.google.com/gke-preemptible"}},
			want:   CapacitySpot, wantLabel: "cloud.google.com/gke-preemptible",
		},
		{
			name:   "an unknown value is reported, and is neither type",
			labels: kv("karpenter.sh/capacity-type", "interruptible", "node.kubernetes.io/lifecycle", "spot"),
			want:   CapacityUnknown, wantLabel: "karpenter.sh/capacity-type", problems: []string{"karpenter.sh/capacity-type"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ReadNode(tt.labels, tt.opts)
			require.Equal(t, tt.want, f.Capacity)
			require.Equal(t, tt.wantLabel, f.CapacityLabel)
			require.Equal(t, tt.problems, problemLabels(&f))
		})
	}
}

// TestCapacityLabelValueReadsBack holds the simulator and the plugin to one
// convention: every value CapacityLabelValue writes, ReadNode reads back.
func TestCapacityLabelValueReadsBack(t *testing.T) {
	keys := append(scheduling.DefaultCapacityTypeLabels(), "example.com/capacity")
	for _, key := range keys {
		for _, want := range []CapacityType{CapacitySpot, CapacityOnDemand} {
			labels := kv()
			if v, ok := CapacityLabelValue(key, want); ok {
				labels[key] = v
			}
			f := ReadNode(labels, &Options{CapacityTypeLabels: []string{key}})
			require.Equal(t, want, f.Capacity, "%s for %s", key, want)
			require.Empty(t, f.Problems)
		}
	}
}

func TestLabelErrorMessage(t *testing.T) {
	f := ReadNode(kv("nvidia.com/cuda.runtime-version.full", "12.x"), nil)
	require.Len(t, f.Problems, 1)
	require.EqualError(t, f.Problems[0],
		`label nvidia.com/cuda.runtime-version.full="12.x" has a component "x" that is not a number; want a CUDA version such as "12.4"`)
}

// Every label that is set but unreadable is reported, in reading order,
// naming the label, its value and the form wanted.
func TestReadNodeReportsEveryUnreadableLabel(t *testing.T) {
	f := ReadNode(kv("nvidia.com/cuda.runtime-version.full", "12.4.x", "nvidia.com/gpu.replicas", "0"), nil)
	require.Len(t, f.Problems, 2)
	require.Equal(t, "nvidia.com/cuda.runtime-version.full", f.Problems[0].Label)
	require.EqualError(t, f.Problems[1], `label nvidia.com/gpu.replicas="0" is not a positive whole number; want the number of pods sharing each GPU, such as "4"`)
}
