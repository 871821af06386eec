package gpufleet

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	fwk "k8s.io/kube-scheduler/framework"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
	"github.com/gpu-gang/gpu-gang/pkg/plugintest"
)

const (
	h100 = "NVIDIA-H100-80GB-HBM3"
	a100 = "NVIDIA-A100-SXM4-80GB"
)

// A small mixed fleet: every rule has a node that fails it and one that
// passes.
func fleetNodes() []*v1.Node {
	return []*v1.Node{
		node("h100-cuda124", gfd(h100, "550.54.15", "12.4", "9.0")),
		node("h100-cuda122", gfd(h100, "535.104.05", "12.2", "9.0")),
		node("a100-cuda124", gfd(a100, "550.54.15", "12.4", "8.0")),
		node("h100-cuda1210", gfd(h100, "580.65.06", "12.10", "9.0")),
		node("h100-cuda129", gfd(h100, "575.57.08", "12.9", "9.0")),
		node("h100-upgrading", gfd(h100, "550.54.15", "12.4", "9.0"), label(scheduling.LabelGPUDriverUpgradeState, "upgrade-required")),
		node("h100-upgraded", gfd(h100, "550.54.15", "12.4", "9.0"), label(scheduling.LabelGPUDriverUpgradeState, scheduling.UpgradeStateDone)),
		node("h100-spot", gfd(h100, "550.54.15", "12.4", "9.0"), label(scheduling.LabelKarpenterCapacityType, "spot")),
		node("h100-shared", gfd(h100+"-SHARED", "550.54.15", "12.4", "9.0"),
			label(scheduling.LabelGPUSharingStrategy, scheduling.SharingStrategyTimeSlicing, scheduling.LabelGPUReplicas, "4")),
		node("a100-mig", gfd(a100, "550.54.15", "12.4", "8.0"), label(scheduling.LabelMIGStrategy, scheduling.MIGStrategyMixed, "nvidia.com/mig-1g.10gb.count", "7")),
		node("bare"),
	}
}

func TestFilter(t *testing.T) {
	all := []string{"a100-cuda124", "a100-mig", "bare", "h100-cuda1210", "h100-cuda122", "h100-cuda124", "h100-cuda129", "h100-shared", "h100-spot", "h100-upgraded", "h100-upgrading"}
	tests := []struct {
		name     string
		pod      *v1.Pod
		pg       *v1alpha1.PodGroup
		args     *config.GPUFleetArgs
		want     []string
		wantWhy  map[string]string
		wantCode fwk.Code
	}{
		{
			name: "a pod that asks for no GPU is not bound",
			pod:  pod("cpu", map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj(),
			want: all,
		},
		{
			name: "defaults: no driver upgrade in progress, whole GPUs are not shared",
			pod:  pod("p", gpus("8")).Obj(),
			want: []string{"a100-cuda124", "a100-mig", "bare", "h100-cuda1210", "h100-cuda122", "h100-cuda124", "h100-cuda129", "h100-spot", "h100-upgraded"},
			wantWhy: map[string]string{
				"h100-upgrading": "the GPU Operator is upgrading the node's driver (nvidia.com/gpu-driver-upgrade-state=upgrade-required)",
				"h100-shared": "the member asks for whole GPUs (nvidia.com/gpu) and the node's are shared: time-slicing with 4 replicas per GPU; " +
					"set gpu-gang.x-k8s.io/allow-shared-gpus: \"true\" to allow it",
			},
		},
		{
			name: "allow-shared-gpus lets whole-GPU pods on time-sliced nodes",
			pod:  pod("p", gpus("1")).Annotation(scheduling.AnnotationAllowSharedGPUs, "true").Obj(),
			want: []string{"a100-cuda124", "a100-mig", "bare", "h100-cuda1210", "h100-cuda122", "h100-cuda124", "h100-cuda129", "h100-shared", "h100-spot", "h100-upgraded"},
		},
		{
			name: "CUDA 12.4 skips 12.2 drivers and unlabelled nodes; 12.10 is above 12.4",
			pod:  pod("p", gpus("8")).Annotation(scheduling.AnnotationMinCUDA, "12.4").Obj(),
			want: []string{"a100-cuda124", "a100-mig", "h100-cuda1210", "h100-cuda124", "h100-cuda129", "h100-spot", "h100-upgraded"},
			wantWhy: map[string]string{
				"h100-cuda122": "the node's driver supports CUDA 12.2 (nvidia.com/cuda.runtime-version.full), below the 12.4 the member needs",
				"bare": "the member needs CUDA >= 12.4 and the node says no CUDA version: no label (nvidia.com/cuda.runtime-version.full, " +
					"nvidia.com/cuda.runtime-version.{major,minor}, nvidia.com/cuda.runtime.{major,minor}), no device attribute gpu.nvidia.com/cudaDriverVersion (unlabelledNodes: Skip)",
			},
		},
		{
			name: "versions compare as numbers: 12.10 passes a 12.10 minimum, 12.9 does not",
			pod:  pod("p", gpus("8")).Annotation(scheduling.AnnotationMinCUDA, "12.10").Obj(),
			want: []string{"h100-cuda1210"},
			wantWhy: map[string]string{
				"h100-cuda129": "the node's driver supports CUDA 12.9 (nvidia.com/cuda.runtime-version.full), below the 12.10 the member needs",
			},
		},
		{
			name: "unlabelledNodes: Allow lets a versioned pod on nodes that do not say",
			pod:  pod("p", gpus("8")).Annotation(scheduling.AnnotationMinCUDA, "12.4").Obj(),
			args: &config.GPUFleetArgs{UnlabelledNodes: config.UnlabelledNodesAllow, CapacityTypeLabels: scheduling.DefaultCapacityTypeLabels()},
			want: []string{"a100-cuda124", "a100-mig", "bare", "h100-cuda1210", "h100-cuda124", "h100-cuda129", "h100-spot", "h100-upgraded"},
		},
		{
			name: "compute capability from the PodGroup",
			pod:  pod("p", gpus("8")).Label(scheduling.PodGroupLabel, "g").Obj(),
			pg:   gangtest.MakePodGroup("g", testNS).Annotation(scheduling.AnnotationMinComputeCapability, "9.0").Obj(),
			want: []string{"h100-cuda1210", "h100-cuda122", "h100-cuda124", "h100-cuda129", "h100-spot", "h100-upgraded"},
			wantWhy: map[string]string{
				"a100-cuda124": "the node's GPUs have compute capability 8.0 (nvidia.com/gpu.compute.{major,minor}), below the 9.0 the member needs",
			},
		},
		{
			name: "the pod's annotation wins over its PodGroup's",
			pod:  pod("p", gpus("8")).Label(scheduling.PodGroupLabel, "g").Annotation(scheduling.AnnotationMinCUDA, "12.9").Obj(),
			pg:   gangtest.MakePodGroup("g", testNS).Annotation(scheduling.AnnotationMinCUDA, "12.2").Obj(),
			want: []string{"h100-cuda1210", "h100-cuda129"},
		},
		{
			name: "spot capacity forced",
			pod:  pod("p", gpus("8")).Annotation(scheduling.AnnotationCapacityType, "spot").Obj(),
			want: []string{"h100-spot"},
			wantWhy: map[string]string{
				"h100-cuda124": "the gang asks for spot capacity (gpu-gang.x-k8s.io/capacity-type) and the node is on-demand (no capacity label)",
			},
		},
		{
			name: "on-demand capacity forced",
			pod:  pod("p", gpus("8")).Annotation(scheduling.AnnotationCapacityType, "on-demand").Obj(),
			want: []string{"a100-cuda124", "a100-mig", "bare", "h100-cuda1210", "h100-cuda122", "h100-cuda124", "h100-cuda129", "h100-upgraded"},
			wantWhy: map[string]string{
				"h100-spot": "the gang asks for on-demand capacity (gpu-gang.x-k8s.io/capacity-type) and the node is spot (karpenter.sh/capacity-type)",
			},
		},
		{
			name: "a MIG slice is not a whole GPU: the sharing rule does not apply, the others do",
			pod:  pod("p", map[v1.ResourceName]string{"nvidia.com/mig-1g.10gb": "1"}).Annotation(scheduling.AnnotationMinCUDA, "12.4").Obj(),
			want: []string{"a100-cuda124", "a100-mig", "h100-cuda1210", "h100-cuda124", "h100-cuda129", "h100-shared", "h100-spot", "h100-upgraded"},
		},
		{
			name: "shared GPUs asked for by name go to shared nodes",
			pod:  pod("p", map[v1.ResourceName]string{scheduling.ResourceGPUShared: "1"}).Obj(),
			want: []string{"a100-cuda124", "a100-mig", "bare", "h100-cuda1210", "h100-cuda122", "h100-cuda124", "h100-cuda129", "h100-shared", "h100-spot", "h100-upgraded"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pgs []*v1alpha1.PodGroup
			if tt.pg != nil {
				pgs = append(pgs, tt.pg)
			}
			env := newTestEnv(t, fleetNodes(), nil, pgs, tt.args)
			got, why, status := env.feasible(tt.pod)
			require.Nil(t, status, "PreFilter")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("feasible nodes (-want,+got):\n%s\nwhy: %v", diff, why)
			}
			for n, w := range tt.wantWhy {
				require.Equal(t, w, why[n], "why node %s is rejected", n)
			}
		})
	}
}

// When no node admits a pod, PreFilter says so in one sentence: what it
// needs, the best in the cluster and the label read.
func TestPreFilterExplainsWhenNoNodeQualifies(t *testing.T) {
	env := newTestEnv(t, fleetNodes(), nil, nil, nil)
	_, status := env.preFilter(pod("p", gpus("8")).Annotation(scheduling.AnnotationMinCUDA, "12.12").Obj())
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	require.Equal(t, Name, status.Plugin())
	require.Equal(t, "none of 11 nodes admits the member's GPU requirements: 1 node is in a GPU driver upgrade "+
		"(nvidia.com/gpu-driver-upgrade-state is not upgrade-done); needs CUDA >= 12.12; the best in the cluster is 12.10 "+
		"(nvidia.com/cuda.runtime-version.full) on 1 of 10 GPU nodes; 1 node has no CUDA label or device attribute (unlabelledNodes: Skip)", status.Message())

	// The same with every node refused by a different rule.
	_, status = env.preFilter(pod("p", gpus("8")).Annotation(scheduling.AnnotationMinComputeCapability, "10.0").Obj())
	require.Equal(t, "none of 11 nodes admits the member's GPU requirements: 1 node is in a GPU driver upgrade "+
		"(nvidia.com/gpu-driver-upgrade-state is not upgrade-done); needs compute capability >= 10.0; the best in the cluster is 9.0 "+
		"(nvidia.com/gpu.compute.{major,minor}) on 8 of 10 GPU nodes; 1 node has no compute capability label or device attribute (unlabelledNodes: Skip)", status.Message())
}

// Bad annotations keep the pod waiting with an Event on the object that
// holds them, naming the annotation, the value and the fix.
func TestPreFilterRejectsBadAnnotations(t *testing.T) {
	pg := gangtest.MakePodGroup("g", testNS).Annotation(scheduling.AnnotationMinCUDA, "12.x").Obj()
	env := newTestEnv(t, fleetNodes(), nil, []*v1alpha1.PodGroup{pg}, nil)

	member := pod("m", gpus("8")).Label(scheduling.PodGroupLabel, "g").Annotation(scheduling.AnnotationCapacityType, "cheap").Obj()
	_, status := env.preFilter(member)
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	require.Contains(t, status.Message(), `invalid GPU requirements: PodGroup team-a/g: annotation gpu-gang.x-k8s.io/min-cuda="12.x" is not a version`)
	require.Contains(t, status.Message(), `pod m: annotation gpu-gang.x-k8s.io/capacity-type="cheap" is not a capacity-type policy`)
	evs := env.Events.Await(t, "Warning InvalidGPURequirements PodGroup team-a/g", "Warning InvalidGPURequirements pod team-a/m")
	require.Len(t, evs, 2, "one Event per bad annotation: %v", evs)
	require.Contains(t, evs, `Warning InvalidGPURequirements PodGroup team-a/g: annotation gpu-gang.x-k8s.io/min-cuda="12.x" is not a version: `+
		`it has a component "x" that is not a number; want a CUDA version major.minor such as "12.4" (drivers report the CUDA version they support to the minor); `+
		`fix or remove the annotation: no GPU member of the gang schedules until then`)
	require.Contains(t, evs, `Warning InvalidGPURequirements pod team-a/m: annotation gpu-gang.x-k8s.io/capacity-type="cheap" is not a capacity-type policy; `+
		`want "on-demand", "spot", "uniform" or "any" (uniform is the default); fix or remove the annotation`)

	_, status = env.preFilter(member)
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	env.Events.None(t) // a retry records the same Events again only after a while

	// A member that asks for no GPU is not bound by the annotations.
	state, status := env.preFilter(pod("launcher", map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Label(scheduling.PodGroupLabel, "g").Obj())
	require.True(t, status.IsSuccess(), "status %v", status)
	require.True(t, state.GetSkipFilterPlugins().Has(Name), "the plugin skips pods that ask for no GPU")
}

// A member whose PodGroup the gang sources do not have waits, and is
// activated, with the other members of its gang and no one else, when they
// have it.
func TestMemberWaitsForItsPodGroup(t *testing.T) {
	m0 := pod("m0", gpus("8")).Label(scheduling.PodGroupLabel, "late").Obj()
	m1 := pod("m1", gpus("8")).Label(scheduling.PodGroupLabel, "late").Obj()
	other := pod("other", gpus("8")).Label(scheduling.PodGroupLabel, "other").Obj()
	env := newTestEnv(t, fleetNodes(), []*v1.Pod{m0, m1, other}, nil, nil)

	_, status := env.preFilter(m0)
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	require.Contains(t, status.Message(), "PodGroup team-a/late, whose annotations may set the pod's GPU requirements, is not known yet; "+
		"create it in namespace team-a or remove the label scheduling.x-k8s.io/pod-group from the pod")
	require.Empty(t, env.Activator.Get())

	env.CreatePodGroup(gangtest.MakePodGroup("late", testNS).Annotation(scheduling.AnnotationMinCUDA, "12.4").Obj())
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, []string{"team-a/m0", "team-a/m1"}, env.Activator.Get())
	}, wait.ForeverTestTimeout, 10*time.Millisecond, "the members of the PodGroup that arrived are activated")
	require.Never(t, func() bool { return len(env.Activator.Get()) != 2 }, plugintest.QuietWindow, 10*time.Millisecond,
		"and no one else, nor again")
	ok, _, status := env.feasible(m0)
	require.Nil(t, status)
	require.NotContains(t, ok, "h100-cuda122", "the PodGroup's annotations apply")
}
