package snapshot

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// draObjects are what NVIDIA's chart and driver, and a job of claims,
// create on a cluster: the GPU DeviceClass with the extended-resource
// mapping, one node's slice, a template and the claim made from it.
func draObjects() *DRA {
	spec := resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
		Name:    "gpus",
		Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: scheduling.DeviceClassGPU, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 8},
	}}}}
	return &DRA{
		Classes: []*resourceapi.DeviceClass{{
			ObjectMeta: metav1.ObjectMeta{Name: scheduling.DeviceClassGPU},
			Spec: resourceapi.DeviceClassSpec{
				Selectors:            []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: scheduling.DeviceClassGPUSelector}}},
				ExtendedResourceName: ptr.To("nvidia.com/gpu"),
			},
		}},
		Slices: []*resourceapi.ResourceSlice{{
			ObjectMeta: metav1.ObjectMeta{Name: "gpu-0-" + scheduling.DRADriverGPU},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:   scheduling.DRADriverGPU,
				Pool:     resourceapi.ResourcePool{Name: "gpu-0", Generation: 1, ResourceSliceCount: 1},
				NodeName: ptr.To("gpu-0"),
				Devices: []resourceapi.Device{{Name: "gpu-0", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
					scheduling.DeviceAttributeProductName: {StringValue: ptr.To("H100")},
				}}},
			},
		}},
		Templates: []*resourceapi.ResourceClaimTemplate{{
			ObjectMeta: metav1.ObjectMeta{Namespace: "train", Name: "gpus"},
			Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: spec},
		}},
		Claims: []*resourceapi.ResourceClaim{{
			ObjectMeta: metav1.ObjectMeta{Namespace: "train", Name: "w-gpus"},
			Spec:       spec,
			Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
				Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpus", Driver: scheduling.DRADriverGPU, Pool: "gpu-0", Device: "gpu-0"}},
			}}},
		}},
	}
}

// TestFetchListKeepsDRAObjects round-trips DRA objects: FetchList takes
// them from a cluster, Parse reads them back unchanged, and says they are
// not simulated.
func TestFetchListKeepsDRAObjects(t *testing.T) {
	want := draObjects()
	objs := []runtime.Object{gpuNode("gpu-0", "s", "l", "", 8), gpuPod("train", "w", 1, 0)}
	for _, o := range want.Classes {
		objs = append(objs, o)
	}
	for _, o := range want.Slices {
		objs = append(objs, o)
	}
	for _, o := range want.Templates {
		objs = append(objs, o)
	}
	for _, o := range want.Claims {
		objs = append(objs, o)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{podGroups: "PodGroupList"})
	data, err := FetchList(t.Context(), fake.NewClientset(objs...), dyn)
	require.NoError(t, err)
	s, err := Parse(data)
	require.NoError(t, err)

	// The fake clientset stamps resource versions; the List carries the
	// kinds. Neither is what round-trips.
	clear := func(d *DRA) {
		for _, o := range d.Slices {
			o.TypeMeta, o.ResourceVersion = metav1.TypeMeta{}, ""
		}
		for _, o := range d.Classes {
			o.TypeMeta, o.ResourceVersion = metav1.TypeMeta{}, ""
		}
		for _, o := range d.Claims {
			o.TypeMeta, o.ResourceVersion = metav1.TypeMeta{}, ""
		}
		for _, o := range d.Templates {
			o.TypeMeta, o.ResourceVersion = metav1.TypeMeta{}, ""
		}
	}
	clear(&s.DRA)
	if diff := cmp.Diff(want, &s.DRA); diff != "" {
		t.Errorf("DRA objects after the round trip (-want,+got):\n%s", diff)
	}
	require.Len(t, s.Nodes, 1)
	require.False(t, s.Nodes[0].DRA, "a node that advertises nvidia.com/gpu stays a device-plugin node")
}
