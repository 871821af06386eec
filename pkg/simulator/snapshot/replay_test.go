package snapshot

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

// draSlice is what NVIDIA's GPU DRA driver publishes for node: gpus whole
// H100s of driver 550.54.15 (CUDA 12.4), one pool.
func draSlice(node string, gpus int) *resourceapi.ResourceSlice {
	str := func(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: ptr.To(s)} }
	ver := func(s string) resourceapi.DeviceAttribute {
		return resourceapi.DeviceAttribute{VersionValue: ptr.To(s)}
	}
	sl := &resourceapi.ResourceSlice{
		TypeMeta:   metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceSlice"},
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + scheduling.DRADriverGPU},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   scheduling.DRADriverGPU,
			Pool:     resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(node),
		},
	}
	for i := range gpus {
		sl.Spec.Devices = append(sl.Spec.Devices, resourceapi.Device{Name: fmt.Sprint("gpu-", i), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			scheduling.DeviceAttributeType:                  str(scheduling.DeviceTypeGPU),
			scheduling.DeviceAttributeProductName:           str("NVIDIA H100 80GB HBM3"),
			scheduling.DeviceAttributeCUDAComputeCapability: ver("9.0.0"),
			scheduling.DeviceAttributeDriverVersion:         ver("550.54.15"),
			scheduling.DeviceAttributeCUDADriverVersion:     ver("12.4.0"),
		}})
	}
	return sl
}

func withClaimTemplate(p *v1.Pod, template string) *v1.Pod {
	p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: "gpus", ResourceClaimTemplateName: ptr.To(template)})
	return p
}

// A snapshot of a DRA cluster simulates on DRA nodes: nodes that publish
// GPUs and advertise none become DRA nodes of as many GPUs and the same
// hardware; a running pod holds the devices allocated to its claim; pending
// pods that claim GPUs through a template become jobs that claim as many.
func TestInputReplaysDRA(t *testing.T) {
	objs := draObjects()
	var all []runtime.Object
	for s := range 2 {
		for n := range 2 {
			name := fmt.Sprintf("dra-%d-%d", s, n)
			all = append(all, gpuNode(name, fmt.Sprint("spine-", s), fmt.Sprint("leaf-", s), "", 0), draSlice(name, 8))
		}
	}
	all = append(all, gpuNode("plugin-0", "spine-1", "leaf-1", "", 8))
	for _, c := range objs.Classes {
		c.TypeMeta = metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "DeviceClass"}
		all = append(all, c)
	}
	tmpl := objs.Templates[0]
	tmpl.TypeMeta = metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceClaimTemplate"}
	// A running pod whose claim holds two devices of dra-0-0.
	claim := &resourceapi.ResourceClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "serve", Name: "infer-gpus"},
		Spec:       objs.Claims[0].Spec,
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{
				{Request: "gpus", Driver: scheduling.DRADriverGPU, Pool: "dra-0-0", Device: "gpu-0"},
				{Request: "gpus", Driver: scheduling.DRADriverGPU, Pool: "dra-0-0", Device: "gpu-1"},
			},
		}}},
	}
	infer := on(gpuPod("serve", "infer", 0, 1), "dra-0-0")
	infer.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To(claim.Name)}}
	all = append(all, tmpl, claim, infer,
		podGroup("train", "big", 2, 10, map[string]string{scheduling.AnnotationTopologyRequired: leafKey}),
		withClaimTemplate(member(gpuPod("train", "big-0", 0, 10), "big"), tmpl.Name),
		withClaimTemplate(member(gpuPod("train", "big-1", 0, 10), "big"), tmpl.Name),
		gpuPod("serve", "mapped", 8, 11), // nvidia.com/gpu: the mapping or the device plugin serves it
	)
	s, err := Parse(list(t, all...))
	require.NoError(t, err)
	in, err := s.Input(nvidiaOptions(true))
	require.NoError(t, err)

	hw := fabric.Hardware{Product: "NVIDIA-H100-80GB-HBM3", Compute: "9.0", Driver: "550.54.15", CUDA: "12.4"}
	got := map[string]string{}
	for _, n := range in.Layout.Nodes {
		got[n.Name] = fmt.Sprintf("dra=%v gpus=%d %+v", n.DRA, n.GPUs, n.Hardware)
	}
	want := map[string]string{"plugin-0": fmt.Sprintf("dra=false gpus=8 %+v", fabric.Hardware{})}
	for _, name := range []string{"dra-0-0", "dra-0-1", "dra-1-0", "dra-1-1"} {
		want[name] = fmt.Sprintf("dra=true gpus=8 %+v", hw)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nodes (-want,+got):\n%s", diff)
	}
	require.Equal(t, []fabric.PrefillPod{{Node: in.Layout.Index()["dra-0-0"], GPUs: 2}}, in.Prefill)
	jobs := map[string]string{}
	for _, j := range in.Jobs {
		jobs[j.Name] = fmt.Sprintf("gang=%v pods=%d gpus=%d request=%q", j.Gang, j.Pods, j.GPUsPerPod, j.GPURequest)
	}
	require.Equal(t, map[string]string{
		"train.big":    fmt.Sprintf("gang=true pods=2 gpus=8 request=%q", scenario.GPURequestClaim),
		"serve.mapped": `gang=false pods=1 gpus=8 request=""`,
	}, jobs)
	require.Contains(t, in.Description, "32 of the GPUs on 4 nodes that publish them through DRA")
}
