package workload

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

// Every profile gets the same template and the same claim on each pod; only
// the group around them differs.
func TestBuildClaimsInEveryFlavor(t *testing.T) {
	job := scenario.Job{Name: "j", Gang: true, Pods: 2, GPUsPerPod: 8, GPURequest: scenario.GPURequestClaim}
	var templates []*resourceapi.ResourceClaimTemplate
	for _, f := range []Flavor{GangPlugin, Plain, Native} {
		o, err := (&Builder{Namespace: "sim", Flavor: f, TierKeys: tierKeys}).Build(&job)
		require.NoError(t, err)
		tp := o.ClaimTemplate
		require.NotNil(t, tp)
		templates = append(templates, tp)
		require.Equal(t, "j", tp.Name)
		require.Equal(t, map[string]string{JobLabel: "j", RoleLabel: RoleWorkload}, tp.Spec.Labels, "claims made from it carry the job")
		require.Equal(t, []resourceapi.DeviceRequest{{
			Name: GPUClaim,
			Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: scheduling.DeviceClassGPU, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 8,
			},
		}}, tp.Spec.Spec.Devices.Requests)
		for _, p := range o.Pods {
			require.Equal(t, []v1.PodResourceClaim{{Name: GPUClaim, ResourceClaimTemplateName: ptr.To("j")}}, p.Spec.ResourceClaims)
			c := p.Spec.Containers[0].Resources
			require.NotContains(t, c.Requests, fabric.GPU, "the claim, not nvidia.com/gpu, brings the GPUs")
			require.NotContains(t, c.Limits, fabric.GPU)
			require.Contains(t, c.Requests, v1.ResourceCPU)
			require.Equal(t, []v1.ResourceClaim{{Name: GPUClaim}}, c.Claims)
		}
	}
	require.Equal(t, templates[0], templates[1])
	require.Equal(t, templates[0], templates[2])
}

func TestBuildExtendedResourceHasNoClaim(t *testing.T) {
	for _, req := range []string{"", scenario.GPURequestExtendedResource} {
		job := scenario.Job{Name: "j", Gang: true, Pods: 2, GPUsPerPod: 8, GPURequest: req}
		o, err := (&Builder{Namespace: "sim", Flavor: GangPlugin, TierKeys: tierKeys}).Build(&job)
		require.NoError(t, err)
		require.Nil(t, o.ClaimTemplate)
		for _, p := range o.Pods {
			require.Empty(t, p.Spec.ResourceClaims)
			require.Equal(t, int64(8), p.Spec.Containers[0].Resources.Requests.Name(fabric.GPU, "").Value())
		}
	}
}

func TestPrefillOnDRANode(t *testing.T) {
	pod := PrefillPod("sim", 3, "s0-l0-n1", 5, true)
	require.Equal(t, "s0-l0-n1", pod.Spec.NodeName)
	require.Equal(t, []v1.PodResourceClaim{{Name: GPUClaim, ResourceClaimName: ptr.To("prefill-3")}}, pod.Spec.ResourceClaims)
	require.NotContains(t, pod.Spec.Containers[0].Resources.Requests, fabric.GPU)

	claim := PrefillClaim("sim", 3, "s0-l0-n1", 5)
	require.Equal(t, "prefill-3", claim.Name)
	require.Equal(t, RolePrefill, claim.Labels[RoleLabel])
	require.Equal(t, int64(5), claim.Spec.Devices.Requests[0].Exactly.Count)
	a := claim.Status.Allocation
	require.Len(t, a.Devices.Results, 5)
	for i, r := range a.Devices.Results {
		require.Equal(t, resourceapi.DeviceRequestAllocationResult{
			Request: GPUClaim, Driver: scheduling.DRADriverGPU, Pool: "s0-l0-n1", Device: "gpu-" + string(rune('0'+i)),
		}, r)
	}
	require.Equal(t, []string{"s0-l0-n1"}, a.NodeSelector.NodeSelectorTerms[0].MatchFields[0].Values)

	plain := PrefillPod("sim", 4, "s0-l0-n2", 5, false)
	require.Empty(t, plain.Spec.ResourceClaims)
	require.Equal(t, int64(5), plain.Spec.Containers[0].Resources.Requests.Name(fabric.GPU, "").Value())
}
