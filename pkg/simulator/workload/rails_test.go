package workload

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

// A job that claims NICs too gets one template of GPU and NIC pairs, each
// pair under one PCIe root, as users write it; the pods use it as they use
// a GPU claim.
func TestClaimTemplateWithNICs(t *testing.T) {
	job := scenario.Job{Name: "j", Gang: true, Pods: 2, GPUsPerPod: 2, GPURequest: scenario.GPURequestClaimWithNICs}
	o, err := (&Builder{Namespace: "sim", Flavor: Plain, TierKeys: tierKeys}).Build(&job)
	require.NoError(t, err)
	gpu := func(name string) resourceapi.DeviceRequest {
		return resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: scheduling.DeviceClassGPU, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
		}}
	}
	nic := func(name string) resourceapi.DeviceRequest {
		return resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: "dra.net",
			Selectors:       []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["dra.net"].rdma == true`}}},
			AllocationMode:  resourceapi.DeviceAllocationModeExactCount, Count: 1,
		}}
	}
	root := ptr.To(resourceapi.FullyQualifiedName("resource.kubernetes.io/pcieRoot"))
	want := resourceapi.DeviceClaim{
		Requests: []resourceapi.DeviceRequest{gpu("gpu-0"), nic("nic-0"), gpu("gpu-1"), nic("nic-1")},
		Constraints: []resourceapi.DeviceConstraint{
			{Requests: []string{"gpu-0", "nic-0"}, MatchAttribute: root},
			{Requests: []string{"gpu-1", "nic-1"}, MatchAttribute: root},
		},
	}
	if diff := cmp.Diff(want, o.ClaimTemplate.Spec.Spec.Devices); diff != "" {
		t.Errorf("template's devices (-want,+got):\n%s", diff)
	}
	for _, p := range o.Pods {
		require.Equal(t, []v1.PodResourceClaim{{Name: GPUClaim, ResourceClaimTemplateName: ptr.To("j")}}, p.Spec.ResourceClaims)
		require.NotContains(t, p.Spec.Containers[0].Resources.Requests, fabric.GPU)
	}
}

// The rail alignment reaches gpu-gang's PodGroup of either API as an
// annotation, beside the fleet policy; unset, none is written.
func TestRailAlignmentAnnotation(t *testing.T) {
	job := scenario.Job{Name: "j", Gang: true, Pods: 2, GPUsPerPod: 4, GPURequest: scenario.GPURequestClaimWithNICs,
		RailAlignment: scenario.RailAlignmentRequired, GPU: &scenario.GPURequirements{MinCUDA: "12.4"}}
	want := map[string]string{"gpu-gang.x-k8s.io/rail-alignment": "required", scheduling.AnnotationMinCUDA: "12.4"}
	o, err := (&Builder{Namespace: "sim", Flavor: GangPlugin, TierKeys: tierKeys}).Build(&job)
	require.NoError(t, err)
	require.Equal(t, want, o.GangGroup.Annotations)
	o, err = (&Builder{Namespace: "sim", Flavor: Native, TierKeys: tierKeys}).Build(&job)
	require.NoError(t, err)
	require.Equal(t, want, o.NativeGroup.Annotations)

	job.RailAlignment, job.GPU = "", nil
	o, err = (&Builder{Namespace: "sim", Flavor: GangPlugin, TierKeys: tierKeys}).Build(&job)
	require.NoError(t, err)
	require.Empty(t, o.GangGroup.Annotations, "gpu-gang's default: no annotation")
}
