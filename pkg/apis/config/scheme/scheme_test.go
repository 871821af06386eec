package scheme

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
	configv1 "github.com/gpu-gang/gpu-gang/pkg/apis/config/v1"
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

func TestDecodeCoschedulingArgs(t *testing.T) {
	defaultConsolidation := config.ConsolidationArgs{WaitingFor: 2 * time.Minute, MaxEvictionsPerHour: 10, Cooldown: 30 * time.Minute, MinRunTime: 10 * time.Minute}
	defaults := config.CoschedulingArgs{
		Consolidation: defaultConsolidation, PermitWaitingTimeSeconds: 60, PodGroupBackoffSeconds: 2, PodGroupMaxBackoffSeconds: 60, TopologyPreset: "nvidia",
		ClaimReleaseGraceSeconds: 60,
	}
	tests := []struct {
		name    string
		obj     runtime.Object
		want    *config.CoschedulingArgs
		wantErr string
	}{
		{name: "no pluginConfig entry yields the defaults", obj: nil, want: &defaults},
		{name: "empty args yield the defaults", obj: &runtime.Unknown{Raw: []byte(`{}`)}, want: &defaults},
		{
			name: "scheduler-plugins field names keep their meaning",
			obj:  &runtime.Unknown{Raw: []byte(`{"apiVersion":"kubescheduler.config.k8s.io/v1","kind":"CoschedulingArgs","permitWaitingTimeSeconds":30,"podGroupBackoffSeconds":5}`)},
			want: &config.CoschedulingArgs{Consolidation: defaultConsolidation, PermitWaitingTimeSeconds: 30, PodGroupBackoffSeconds: 5, PodGroupMaxBackoffSeconds: 60, TopologyPreset: "nvidia", ClaimReleaseGraceSeconds: 60},
		},
		{
			name: "explicit levels replace the default preset",
			obj:  &runtime.Unknown{Raw: []byte(`{"topologyLevels":["example.com/rack","example.com/row"]}`)},
			want: &config.CoschedulingArgs{Consolidation: defaultConsolidation, PermitWaitingTimeSeconds: 60, PodGroupBackoffSeconds: 2, PodGroupMaxBackoffSeconds: 60,
				TopologyLevels: []string{"example.com/rack", "example.com/row"}, ClaimReleaseGraceSeconds: 60},
		},
		{
			name: "a claim release grace of its own",
			obj:  &runtime.Unknown{Raw: []byte(`{"claimReleaseGraceSeconds":5}`)},
			want: &config.CoschedulingArgs{Consolidation: defaultConsolidation, PermitWaitingTimeSeconds: 60, PodGroupBackoffSeconds: 2, PodGroupMaxBackoffSeconds: 60, TopologyPreset: "nvidia", ClaimReleaseGraceSeconds: 5},
		},
		{
			name: "a claim release grace of 0 is allowed",
			obj:  &runtime.Unknown{Raw: []byte(`{"claimReleaseGraceSeconds":0}`)},
			want: &config.CoschedulingArgs{Consolidation: defaultConsolidation, PermitWaitingTimeSeconds: 60, PodGroupBackoffSeconds: 2, PodGroupMaxBackoffSeconds: 60, TopologyPreset: "nvidia"},
		},
		{
			name: "rail attributes",
			obj:  &runtime.Unknown{Raw: []byte(`{"railAttributes":["dra.net/rail","example.com/subnet"]}`)},
			want: &config.CoschedulingArgs{Consolidation: defaultConsolidation, PermitWaitingTimeSeconds: 60, PodGroupBackoffSeconds: 2, PodGroupMaxBackoffSeconds: 60, TopologyPreset: "nvidia",
				ClaimReleaseGraceSeconds: 60, RailAttributes: []string{"dra.net/rail", "example.com/subnet"}},
		},
		{
			name: "rail unit level",
			obj:  &runtime.Unknown{Raw: []byte(`{"railUnitLevel":"network.topology.nvidia.com/spine"}`)},
			want: &config.CoschedulingArgs{Consolidation: defaultConsolidation, PermitWaitingTimeSeconds: 60, PodGroupBackoffSeconds: 2, PodGroupMaxBackoffSeconds: 60, TopologyPreset: "nvidia",
				ClaimReleaseGraceSeconds: 60, RailUnitLevel: "network.topology.nvidia.com/spine"},
		},
		{name: "a rail unit level that is no configured level", obj: &runtime.Unknown{Raw: []byte(`{"railUnitLevel":"example.com/rack"}`)},
			wantErr: `args.railUnitLevel: Invalid value: "example.com/rack": unknown topology level "example.com/rack" for the rails' scalable unit; name one of the configured levels: nvidia.com/gpu.clique, network.topology.nvidia.com/leaf, network.topology.nvidia.com/spine`},
		{
			name: "consolidation knobs",
			obj:  &runtime.Unknown{Raw: []byte(`{"consolidation":{"enabled":true,"waitingFor":"30s","maxEvictionsPerHour":4,"cooldown":"1h","minRunTime":"5m","movablePriorityClasses":["batch-low"]}}`)},
			want: &config.CoschedulingArgs{PermitWaitingTimeSeconds: 60, PodGroupBackoffSeconds: 2, PodGroupMaxBackoffSeconds: 60, TopologyPreset: "nvidia",
				ClaimReleaseGraceSeconds: 60, Consolidation: config.ConsolidationArgs{Enabled: true, WaitingFor: 30 * time.Second, MaxEvictionsPerHour: 4,
					Cooldown: time.Hour, MinRunTime: 5 * time.Minute, MovablePriorityClasses: []string{"batch-low"}}},
		},
		{name: "consolidation enabled without a wait", obj: &runtime.Unknown{Raw: []byte(`{"consolidation":{"enabled":true,"waitingFor":"0s"}}`)},
			wantErr: `args.consolidation.waitingFor: Invalid value: "0s": must be above 0 when consolidation is enabled`},
		{name: "consolidation enabled without a budget", obj: &runtime.Unknown{Raw: []byte(`{"consolidation":{"enabled":true,"maxEvictionsPerHour":0}}`)},
			wantErr: `args.consolidation.maxEvictionsPerHour: Invalid value: 0: must be at least 1 when consolidation is enabled`},
		{name: "negative cooldown", obj: &runtime.Unknown{Raw: []byte(`{"consolidation":{"cooldown":"-1m"}}`)},
			wantErr: `args.consolidation.cooldown: Invalid value: "-1m0s": must not be negative`},
		{name: "a movable priority class that is no name", obj: &runtime.Unknown{Raw: []byte(`{"consolidation":{"movablePriorityClasses":["Batch_Low"]}}`)},
			wantErr: `args.consolidation.movablePriorityClasses[0]: Invalid value: "Batch_Low": must be a PriorityClass name`},
		{name: "a movable priority class twice", obj: &runtime.Unknown{Raw: []byte(`{"consolidation":{"movablePriorityClasses":["low","low"]}}`)},
			wantErr: `args.consolidation.movablePriorityClasses[1]: Duplicate value: "low"`},
		{name: "a rail attribute without its domain", obj: &runtime.Unknown{Raw: []byte(`{"railAttributes":["rail"]}`)}, wantErr: `args.railAttributes[0]: Invalid value: "rail": must be a qualified device attribute name`},
		{name: "negative claim release grace", obj: &runtime.Unknown{Raw: []byte(`{"claimReleaseGraceSeconds":-1}`)}, wantErr: "args.claimReleaseGraceSeconds: Invalid value: -1: must be at least 0"},
		{name: "unknown field", obj: &runtime.Unknown{Raw: []byte(`{"permitWaitingTime":3}`)}, wantErr: `unknown field "permitWaitingTime"`},
		{name: "zero wait", obj: &runtime.Unknown{Raw: []byte(`{"permitWaitingTimeSeconds":0}`)}, wantErr: "args.permitWaitingTimeSeconds: Invalid value: 0"},
		{name: "negative backoff", obj: &runtime.Unknown{Raw: []byte(`{"podGroupBackoffSeconds":-1}`)}, wantErr: "args.podGroupBackoffSeconds: Invalid value: -1"},
		{name: "zero backoff", obj: &runtime.Unknown{Raw: []byte(`{"podGroupBackoffSeconds":0}`)}, wantErr: "args.podGroupBackoffSeconds: Invalid value: 0: must be at least 1"},
		{name: "unknown preset", obj: &runtime.Unknown{Raw: []byte(`{"topologyPreset":"nvl"}`)}, wantErr: `args.topologyPreset: Unsupported value: "nvl"`},
		{name: "preset and levels", obj: &runtime.Unknown{Raw: []byte(`{"topologyPreset":"gke","topologyLevels":["a/b"]}`)}, wantErr: "args.topologyLevels: Forbidden: set either topologyPreset or topologyLevels"},
		{name: "duplicate level", obj: &runtime.Unknown{Raw: []byte(`{"topologyLevels":["a/b","a/b"]}`)}, wantErr: "args.topologyLevels: Invalid value"},
		{name: "the fleet fields belong to GPUFleetArgs", obj: &runtime.Unknown{Raw: []byte(`{"unlabelledNodes":"Allow"}`)}, wantErr: `unknown field "unlabelledNodes"`},
		{name: "internal args are validated too", obj: &config.CoschedulingArgs{}, wantErr: "args.permitWaitingTimeSeconds: Invalid value: 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeCoschedulingArgs(tt.obj, field.NewPath("args"))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("args (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestDecodeGPUFleetArgs(t *testing.T) {
	defaultCapacityLabels := []string{"karpenter.sh/capacity-type", "cloud.google.com/gke-spot", "eks.amazonaws.com/capacityType", "node.kubernetes.io/lifecycle"}
	defaults := config.GPUFleetArgs{UnlabelledNodes: "Skip", CapacityTypeLabels: defaultCapacityLabels}
	tests := []struct {
		name    string
		obj     runtime.Object
		want    *config.GPUFleetArgs
		wantErr string
	}{
		{name: "no pluginConfig entry yields the defaults", obj: nil, want: &defaults},
		{name: "empty args yield the defaults", obj: &runtime.Unknown{Raw: []byte(`{}`)}, want: &defaults},
		{
			name: "unlabelled nodes allowed and capacity labels replaced",
			obj:  &runtime.Unknown{Raw: []byte(`{"apiVersion":"kubescheduler.config.k8s.io/v1","kind":"GPUFleetArgs","unlabelledNodes":"Allow","capacityTypeLabels":["example.com/lifecycle","karpenter.sh/capacity-type"]}`)},
			want: &config.GPUFleetArgs{UnlabelledNodes: "Allow", CapacityTypeLabels: []string{"example.com/lifecycle", "karpenter.sh/capacity-type"}},
		},
		{name: "unknown field", obj: &runtime.Unknown{Raw: []byte(`{"unlabeledNodes":"Allow"}`)}, wantErr: `unknown field "unlabeledNodes"`},
		{name: "unlabelledNodes is case-sensitive", obj: &runtime.Unknown{Raw: []byte(`{"unlabelledNodes":"skip"}`)},
			wantErr: `args.unlabelledNodes: Unsupported value: "skip": supported values: "Skip", "Allow"`},
		{name: "empty capacity label list", obj: &runtime.Unknown{Raw: []byte(`{"capacityTypeLabels":[]}`)}, wantErr: "args.capacityTypeLabels: Required value: list at least one node label key"},
		{name: "capacity label that is no label key", obj: &runtime.Unknown{Raw: []byte(`{"capacityTypeLabels":["karpenter.sh/capacity-type","spot nodes"]}`)},
			wantErr: `args.capacityTypeLabels[1]: Invalid value: "spot nodes": must be a node label key`},
		{name: "duplicate capacity label", obj: &runtime.Unknown{Raw: []byte(`{"capacityTypeLabels":["a/b","a/b"]}`)}, wantErr: `args.capacityTypeLabels[1]: Duplicate value: "a/b"`},
		{name: "internal args are validated too", obj: &config.GPUFleetArgs{}, wantErr: `args.unlabelledNodes: Unsupported value: ""`},
		{name: "another plugin's args", obj: &config.CoschedulingArgs{}, wantErr: "want GPUFleetArgs, got *config.CoschedulingArgs"},
	}
	require.Equal(t, scheduling.DefaultCapacityTypeLabels(), defaultCapacityLabels, "the default list is the shared one")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeGPUFleetArgs(tt.obj, field.NewPath("args"))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("args (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestDefaultCapacityLabelsAreNotShared(t *testing.T) {
	a, err := DecodeGPUFleetArgs(nil, field.NewPath("args"))
	require.NoError(t, err)
	b, err := DecodeGPUFleetArgs(nil, field.NewPath("args"))
	require.NoError(t, err)
	a.CapacityTypeLabels[0] = "example.com/changed"
	require.Equal(t, "karpenter.sh/capacity-type", b.CapacityTypeLabels[0], "each decode gets its own default list")
	require.Equal(t, "karpenter.sh/capacity-type", scheduling.DefaultCapacityTypeLabels()[0])
}

func TestDefaultClaimReleaseGraceIsNotShared(t *testing.T) {
	a := &configv1.CoschedulingArgs{}
	b := &configv1.CoschedulingArgs{}
	configv1.SetDefaultsCoschedulingArgs(a)
	configv1.SetDefaultsCoschedulingArgs(b)
	*a.ClaimReleaseGraceSeconds = 1
	require.Equal(t, int64(60), *b.ClaimReleaseGraceSeconds, "each defaulting hands out its own pointer")
}
