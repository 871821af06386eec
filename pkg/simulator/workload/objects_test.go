package workload

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/lifecycle"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

var tierKeys = map[string]string{
	scenario.TierClique: "nvidia.com/gpu.clique",
	scenario.TierLeaf:   "network.topology.nvidia.com/leaf",
	scenario.TierSpine:  "network.topology.nvidia.com/spine",
}

func TestBuildPerFlavor(t *testing.T) {
	job := scenario.Job{Name: "j", Gang: true, Pods: 3, GPUsPerPod: 8, Duration: 90 * time.Second, Priority: 5,
		Topology: &scenario.Topology{Level: scenario.TierLeaf, Required: true}}

	t.Run("gpu-gang", func(t *testing.T) {
		b := &Builder{Namespace: "sim", Flavor: GangPlugin, SchedulerName: "gpu-gang", TierKeys: tierKeys}
		o, err := b.Build(&job)
		require.NoError(t, err)
		require.Nil(t, o.NativeGroup)
		require.Equal(t, int32(3), o.GangGroup.Spec.MinMember)
		require.Equal(t, "network.topology.nvidia.com/leaf", o.GangGroup.Annotations[scheduling.AnnotationTopologyRequired])
		require.Len(t, o.Pods, 3)
		for _, p := range o.Pods {
			require.Equal(t, "j", p.Labels[v1alpha1.PodGroupLabel])
			require.Equal(t, "gpu-gang", p.Spec.SchedulerName)
			require.Equal(t, "1m30s", p.Annotations[lifecycle.RunForAnnotation])
			require.Equal(t, "sim-priority-5", p.Spec.PriorityClassName)
			require.Equal(t, int64(8), p.Spec.Containers[0].Resources.Limits.Name(fabric.GPU, "").Value())
			require.Nil(t, p.Spec.SchedulingGroup)
		}
	})
	t.Run("default", func(t *testing.T) {
		b := &Builder{Namespace: "sim", Flavor: Plain, SchedulerName: "default-scheduler", TierKeys: tierKeys}
		o, err := b.Build(&job)
		require.NoError(t, err)
		require.Nil(t, o.GangGroup)
		require.Nil(t, o.NativeGroup)
		for _, p := range o.Pods {
			require.NotContains(t, p.Labels, v1alpha1.PodGroupLabel)
			require.Equal(t, "j", p.Labels[JobLabel])
		}
	})
	t.Run("in-tree", func(t *testing.T) {
		b := &Builder{Namespace: "sim", Flavor: Native, SchedulerName: "default-scheduler", TierKeys: tierKeys}
		o, err := b.Build(&job)
		require.NoError(t, err)
		require.Equal(t, int32(3), o.NativeGroup.Spec.SchedulingPolicy.Gang.MinCount)
		require.Equal(t, "network.topology.nvidia.com/leaf", o.NativeGroup.Spec.SchedulingConstraints.Topology[0].Key)
		require.Equal(t, "sim-priority-5", o.NativeGroup.Spec.PriorityClassName)
		require.NotNil(t, o.NativeGroup.Spec.DisruptionMode.All, "preemption evicts a gang whole or not at all, as gpu-gang does")
		for _, p := range o.Pods {
			require.Equal(t, ptr.To("j"), p.Spec.SchedulingGroup.PodGroupName)
		}

		preferred := job
		preferred.Topology = &scenario.Topology{Level: scenario.TierLeaf}
		o, err = b.Build(&preferred)
		require.NoError(t, err)
		require.Nil(t, o.NativeGroup.Spec.SchedulingConstraints, "in-tree constraints are hard only; a preferred level maps to none")
	})
}

func TestPlainPodHasNoGroupInAnyFlavor(t *testing.T) {
	job := scenario.Job{Name: "p", Pods: 1, GPUsPerPod: 1}
	for _, f := range []Flavor{GangPlugin, Plain, Native} {
		o, err := (&Builder{Namespace: "sim", Flavor: f, TierKeys: tierKeys}).Build(&job)
		require.NoError(t, err)
		require.Nil(t, o.GangGroup)
		require.Nil(t, o.NativeGroup)
		require.Len(t, o.Pods, 1)
		require.Equal(t, "p", o.Pods[0].Name)
		require.Empty(t, o.Pods[0].Annotations, "no duration: runs until the end")
	}
}

func TestPriorityClasses(t *testing.T) {
	pcs := PriorityClasses([]scenario.Job{{Priority: 0}, {Priority: 10}, {Priority: 10}, {Priority: -3}})
	require.Len(t, pcs, 2)
	require.Equal(t, "sim-priority-10", pcs[0].Name)
	require.Equal(t, int32(-3), pcs[1].Value)
}

func TestBuildGPURequirements(t *testing.T) {
	job := scenario.Job{Name: "j", Gang: true, Pods: 2, GPUsPerPod: 8, Topology: &scenario.Topology{Level: scenario.TierLeaf},
		GPU: &scenario.GPURequirements{MinCUDA: "12.4", CapacityType: "spot", AllowSharedGPUs: true}}

	b := &Builder{Namespace: "sim", Flavor: GangPlugin, SchedulerName: "gpu-gang", TierKeys: tierKeys}
	o, err := b.Build(&job)
	require.NoError(t, err)
	require.Equal(t, map[string]string{
		scheduling.AnnotationTopologyPreferred: "network.topology.nvidia.com/leaf",
		scheduling.AnnotationMinCUDA:           "12.4",
		scheduling.AnnotationCapacityType:      "spot",
		scheduling.AnnotationAllowSharedGPUs:   "true",
	}, o.GangGroup.Annotations)

	job.Topology = nil
	o, err = b.Build(&job)
	require.NoError(t, err)
	require.Len(t, o.GangGroup.Annotations, 3, "GPU annotations without a topology level")

	for _, flavor := range []Flavor{Plain, Native} {
		b := &Builder{Namespace: "sim", Flavor: flavor, SchedulerName: "default-scheduler", TierKeys: tierKeys}
		o, err := b.Build(&job)
		require.NoError(t, err)
		for i, p := range o.Pods {
			require.NotContains(t, p.Annotations, scheduling.AnnotationMinCUDA, "baselines cannot express a GPU policy")
			require.Equal(t, strconv.Itoa(i), p.Labels[scheduling.KubeflowReplicaIndexLabel], "members carry a training operator's replica index in every flavor")
		}
		if flavor == Native {
			require.Equal(t, "12.4", o.NativeGroup.Annotations[scheduling.AnnotationMinCUDA],
				"gpu-gang reads the policy from a native PodGroup's annotations too")
		}
	}
}
