package gpufleet

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// The GPUs of the DRA tests, as NVIDIA's DRA driver names them (productName
// as NVML reports it, where GPU feature discovery writes dashes).
const (
	h100DRA = "NVIDIA H100 80GB HBM3"
	a100DRA = "NVIDIA A100-SXM4-80GB"
)

// draNode is a node whose GPUs reach pods through DRA only: no GPU feature
// discovery labels, no nvidia.com/gpu.
func draNode(name string, labels ...map[string]string) *v1.Node {
	w := st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "64", v1.ResourceMemory: "512Gi", v1.ResourcePods: "110"})
	for _, l := range labels {
		for k, v := range l {
			w.Label(k, v)
		}
	}
	return w.Obj()
}

// gpuModel is what the driver reads from NVML about a GPU, versions as
// semantic versions (the API's form).
type gpuModel struct {
	typ, product, driver, cuda, compute string
}

var (
	h100At124 = gpuModel{scheduling.DeviceTypeGPU, h100DRA, "550.54.15", "12.4.0", "9.0.0"}
	h100At122 = gpuModel{scheduling.DeviceTypeGPU, h100DRA, "535.104.5", "12.2.0", "9.0.0"}
	h100At129 = gpuModel{scheduling.DeviceTypeGPU, h100DRA, "575.57.8", "12.9.0", "9.0.0"}
	h100At121 = gpuModel{scheduling.DeviceTypeGPU, h100DRA, "580.65.6", "12.10.0", "9.0.0"}
	a100At124 = gpuModel{scheduling.DeviceTypeGPU, a100DRA, "550.54.15", "12.4.0", "8.0.0"}
)

// attributes are the driver's attributes of a device of the model, named
// without the driver's domain as the driver writes them.
func (m gpuModel) attributes() map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	return map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		scheduling.DeviceAttributeType:                  {StringValue: ptr.To(m.typ)},
		scheduling.DeviceAttributeProductName:           {StringValue: ptr.To(m.product)},
		scheduling.DeviceAttributeDriverVersion:         {VersionValue: ptr.To(m.driver)},
		scheduling.DeviceAttributeCUDADriverVersion:     {VersionValue: ptr.To(m.cuda)},
		scheduling.DeviceAttributeCUDAComputeCapability: {VersionValue: ptr.To(m.compute)},
	}
}

// gpuSlice is the one slice of the driver's pool for a node: one device
// per model given, gpu-0, gpu-1, ...
func gpuSlice(node string, models ...gpuModel) *resourceapi.ResourceSlice {
	w := st.MakeResourceSlice(node, scheduling.DRADriverGPU)
	w.Spec.Pool.Generation = 1
	for i, m := range models {
		w.Device(fmt.Sprint("gpu-", i), m.attributes())
	}
	return w.Obj()
}

func eight(m gpuModel) []gpuModel {
	return []gpuModel{m, m, m, m, m, m, m, m}
}

// chartClass is the DeviceClass NVIDIA's chart installs for whole GPUs,
// mapping nvidia.com/gpu.
func chartClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: scheduling.DeviceClassGPU},
		Spec: resourceapi.DeviceClassSpec{
			Selectors:            []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: scheduling.DeviceClassGPUSelector}}},
			ExtendedResourceName: ptr.To(scheduling.ResourceGPU),
		},
	}
}

// nicClass is a NIC driver's class.
func nicClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "nic.example.com"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: `device.driver == "nic.example.com"`}}}},
	}
}

// claimOf is a claim in the test namespace for count devices of class.
func claimOf(name, class string, count int64) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: types.UID("claim-" + name)},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name:    "devices",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count},
		}}}},
	}
}

// claimPod is a pod outside any gang that uses the named claims.
func claimPod(name string, claims ...string) *st.PodWrapper {
	w := pod(name, map[v1.ResourceName]string{v1.ResourceCPU: "1"})
	for _, c := range claims {
		w.PodResourceClaims(v1.PodResourceClaim{Name: c, ResourceClaimName: ptr.To(c)})
	}
	return w
}

// draFleet is a fleet of DRA nodes, and a device-plugin node and a bare
// node beside them, with the objects NVIDIA's driver and chart create.
func draFleet() ([]*v1.Node, []runtime.Object) {
	nodes := []*v1.Node{
		draNode("dra-122"), draNode("dra-124"), draNode("dra-129"), draNode("dra-1210"),
		draNode("dra-mixed"),
		draNode("dra-labelled", gfd(h100, "535.104.05", "12.2", "9.0")),
		draNode("dra-upgrading", label(scheduling.LabelGPUDriverUpgradeState, "upgrade-required")),
		draNode("dra-a100"),
		node("gfd-124", gfd(h100, "550.54.15", "12.4", "9.0")),
		node("bare"),
	}
	objs := []runtime.Object{
		chartClass(), nicClass(),
		claimOf("gpus", scheduling.DeviceClassGPU, 8), claimOf("nic", "nic.example.com", 1),
		gpuSlice("dra-122", eight(h100At122)...),
		gpuSlice("dra-124", eight(h100At124)...),
		gpuSlice("dra-129", eight(h100At129)...),
		gpuSlice("dra-1210", eight(h100At121)...),
		gpuSlice("dra-mixed", h100At124, h100At124, h100At122, h100At124),
		// The labels say 12.2, the devices 12.4: the labels win.
		gpuSlice("dra-labelled", eight(h100At124)...),
		gpuSlice("dra-upgrading", eight(h100At124)...),
		gpuSlice("dra-a100", eight(a100At124)...),
	}
	return nodes, objs
}

func TestFilterOnDRANodes(t *testing.T) {
	every := []string{"bare", "dra-1210", "dra-122", "dra-124", "dra-129", "dra-a100", "dra-labelled", "dra-mixed", "dra-upgrading", "gfd-124"}
	tests := []struct {
		name     string
		pod      *v1.Pod
		want     []string
		wantWhy  map[string]string
		wantSkip bool
	}{
		{
			name: "a claim of the chart's class is a GPU pod: CUDA read from the devices where no label says",
			pod:  claimPod("p", "gpus").Annotation(scheduling.AnnotationMinCUDA, "12.4").Obj(),
			want: []string{"dra-1210", "dra-124", "dra-129", "dra-a100", "gfd-124"},
			wantWhy: map[string]string{
				"dra-122": "the node's driver supports CUDA 12.2.0 (device attribute gpu.nvidia.com/cudaDriverVersion), below the 12.4 the member needs",
				"dra-mixed": "the node's driver supports CUDA 12.2.0 (device attribute gpu.nvidia.com/cudaDriverVersion, the lowest of the node's GPUs), " +
					"below the 12.4 the member needs",
				"dra-labelled":  "the node's driver supports CUDA 12.2 (nvidia.com/cuda.runtime-version.full), below the 12.4 the member needs",
				"dra-upgrading": "the GPU Operator is upgrading the node's driver (nvidia.com/gpu-driver-upgrade-state=upgrade-required)",
				"bare": "the member needs CUDA >= 12.4 and the node says no CUDA version: no label (nvidia.com/cuda.runtime-version.full, " +
					"nvidia.com/cuda.runtime-version.{major,minor}, nvidia.com/cuda.runtime.{major,minor}), no device attribute gpu.nvidia.com/cudaDriverVersion (unlabelledNodes: Skip)",
			},
		},
		{
			name: "nvidia.com/gpu served by the mapping: versions compare as versions",
			pod:  pod("p", gpus("8")).Annotation(scheduling.AnnotationMinCUDA, "12.10").Obj(),
			want: []string{"dra-1210"},
			wantWhy: map[string]string{
				"dra-129": "the node's driver supports CUDA 12.9.0 (device attribute gpu.nvidia.com/cudaDriverVersion), below the 12.10 the member needs",
			},
		},
		{
			name: "compute capability from the devices",
			pod:  claimPod("p", "gpus").Annotation(scheduling.AnnotationMinComputeCapability, "9.0").Obj(),
			want: []string{"dra-1210", "dra-122", "dra-124", "dra-129", "dra-labelled", "dra-mixed", "gfd-124"},
			wantWhy: map[string]string{
				"dra-a100": "the node's GPUs have compute capability 8.0.0 (device attribute gpu.nvidia.com/cudaComputeCapability), below the 9.0 the member needs",
			},
		},
		{
			name: "no annotations: only the driver upgrade keeps a claim off a node",
			pod:  claimPod("p", "gpus").Obj(),
			want: []string{"bare", "dra-1210", "dra-122", "dra-124", "dra-129", "dra-a100", "dra-labelled", "dra-mixed", "gfd-124"},
		},
		{
			name:     "a NIC claim is no GPU pod",
			pod:      claimPod("p", "nic").Annotation(scheduling.AnnotationMinCUDA, "99.0").Obj(),
			want:     every,
			wantSkip: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes, objs := draFleet()
			env := newTestEnv(t, nodes, nil, nil, nil, withDRA(objs...))
			state, status := env.preFilter(tt.pod)
			require.True(t, status.IsSuccess(), "PreFilter: %v", status)
			require.Equal(t, tt.wantSkip, state.GetSkipFilterPlugins().Has(Name), "whether the plugin skips the pod")
			if tt.wantSkip {
				return
			}
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

// When no node admits a pod, PreFilter's sentence names the device
// attribute the best version was read from.
func TestPreFilterOnDRANodesNamesTheAttribute(t *testing.T) {
	nodes, objs := draFleet()
	env := newTestEnv(t, nodes, nil, nil, nil, withDRA(objs...))
	_, status := env.preFilter(claimPod("p", "gpus").Annotation(scheduling.AnnotationMinCUDA, "13.0").Obj())
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	require.Equal(t, "none of 10 nodes admits the member's GPU requirements: 1 node is in a GPU driver upgrade "+
		"(nvidia.com/gpu-driver-upgrade-state is not upgrade-done); needs CUDA >= 13.0; the best in the cluster is 12.10.0 "+
		"(device attribute gpu.nvidia.com/cudaDriverVersion) on 1 of 9 GPU nodes; 1 node has no CUDA label or device attribute (unlabelledNodes: Skip)",
		status.Message())
}

// A pod whose claim does not exist yet waits: whether it takes GPUs is not
// known. Without a DRA manager only requests are read.
func TestPreFilterWaitsForUnknownClaims(t *testing.T) {
	nodes, objs := draFleet()
	env := newTestEnv(t, nodes, nil, nil, nil, withDRA(objs...))
	_, status := env.preFilter(claimPod("p", "later").Obj())
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	require.Equal(t, "cannot tell whether the pod takes NVIDIA GPUs: pod team-a/p: its ResourceClaim later does not exist yet", status.Message())

	env = newTestEnv(t, nodes, nil, nil, nil)
	state, status := env.preFilter(claimPod("p", "later").Annotation(scheduling.AnnotationMinCUDA, "99.0").Obj())
	require.True(t, status.IsSuccess(), "PreFilter: %v", status)
	require.True(t, state.GetSkipFilterPlugins().Has(Name), "without DRA, claims are not read")
}

// An attribute the plugin cannot read gets one Event on the node, naming
// the slice, the device and the fix, and is ignored as if it were missing.
func TestUnreadableDeviceAttribute(t *testing.T) {
	rc := h100At124
	rc.cuda = "12.4.0-rc.1"
	nodes := []*v1.Node{draNode("dra-rc"), draNode("dra-124")}
	env := newTestEnv(t, nodes, nil, nil, nil, withDRA(chartClass(), gpuSlice("dra-rc", h100At124, rc), gpuSlice("dra-124", h100At124)))
	p := pod("p", gpus("8")).Annotation(scheduling.AnnotationMinCUDA, "12.4").Obj()
	ok, why, status := env.feasible(p)
	require.Nil(t, status)
	require.Equal(t, []string{"dra-124"}, ok)
	require.Contains(t, why["dra-rc"], "the node says no CUDA version")
	env.Events.Await(t, `Warning InvalidGPUDeviceAttribute node dra-rc: ResourceSlice dra-rc-gpu.nvidia.com, device gpu-1: `+
		`attribute gpu.nvidia.com/cudaDriverVersion="12.4.0-rc.1" is a pre-release version, which ranks below its release and which gpu-gang does not compare; `+
		`want a version such as "12.4.0": the highest CUDA version the driver supports. gpu-gang ignores the attribute until it is fixed; `+
		`the DRA driver gpu.nvidia.com publishes it for the node, so the fix is in the driver or its configuration`)
	env.feasible(p)
	env.Events.None(t) // read once while the slice stays the same
}

// The plugin judges nodes by the slices as they are when PreFilter runs: a
// node whose driver the DRA driver reports upgraded admits the pod at once.
func TestDevicesFollowSlices(t *testing.T) {
	nodes := []*v1.Node{draNode("dra-0")}
	env := newTestEnv(t, nodes, nil, nil, nil, withDRA(chartClass(), gpuSlice("dra-0", eight(h100At122)...)))
	p := pod("p", gpus("8")).Annotation(scheduling.AnnotationMinCUDA, "12.4").Obj()
	_, status := env.preFilter(p)
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())

	env.PublishSlice(gpuSlice("dra-0", eight(h100At124)...))
	ok, _, status := env.feasible(p)
	require.Nil(t, status)
	require.Equal(t, []string{"dra-0"}, ok)

	env.WithdrawSlice("dra-0-" + scheduling.DRADriverGPU)
	_, status = env.preFilter(p)
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "a node without devices or labels says no CUDA version")
}

// Uniform groups on DRA nodes come from the devices' productName and
// driverVersion, and say so.
func TestNodeGroupsOnDRANodes(t *testing.T) {
	nodes := []*v1.Node{draNode("dra-h100-a"), draNode("dra-a100"), draNode("dra-h100-b"), draNode("dra-mixed"), node("gfd-h100", gfd(h100, "550.54.15", "12.4", "9.0"))}
	env := newTestEnv(t, nodes, nil, nil, nil, withDRA(chartClass(), claimOf("gpus", scheduling.DeviceClassGPU, 8),
		gpuSlice("dra-h100-a", eight(h100At124)...), gpuSlice("dra-a100", eight(a100At124)...),
		gpuSlice("dra-h100-b", eight(h100At124)...), gpuSlice("dra-mixed", h100At124, a100At124)))
	got := env.grouper(claimPod("p", "gpus").Obj()).NodeGroups(placementNodes(nodes), 0)
	require.NotNil(t, got)
	want := []string{
		"nvidia.com/gpu.product=" + h100 + ", driver 550.54, on-demand capacity",
		"gpu.nvidia.com/productName=" + a100DRA + " | " + h100DRA + " (mixed), driver 550.54 (gpu.nvidia.com/driverVersion), on-demand capacity",
		"gpu.nvidia.com/productName=" + a100DRA + ", driver 550.54 (gpu.nvidia.com/driverVersion), on-demand capacity",
		"gpu.nvidia.com/productName=" + h100DRA + ", driver 550.54 (gpu.nvidia.com/driverVersion), on-demand capacity",
	}
	if diff := cmp.Diff(want, got.Names); diff != "" {
		t.Errorf("group names (-want,+got):\n%s", diff)
	}
	require.Equal(t, []int{3, 2, 3, 1, 0}, got.Of)
	require.Equal(t, "one nvidia.com/gpu.product (or device attribute gpu.nvidia.com/productName), "+
		"driver major.minor (or device attribute gpu.nvidia.com/driverVersion) and capacity type "+
		"(gpu-gang.x-k8s.io/uniform, gpu-gang.x-k8s.io/capacity-type)", got.Rule)
}
