package capacity

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// A CEL selector that fails leaves the devices it fails on out of its kind,
// as the allocator refuses them, and the matcher says why: the class, the
// expression, the device and the error, for the Event that tells the user.
// Runtime errors happen device by device, so a kind may match some devices
// and fail on others.
func TestMatcherReportsSelectorErrors(t *testing.T) {
	ctx := context.Background()
	// Node "a" has GPUs without a memory attribute; node "b" has one GPU
	// with it.
	withMemory := gpuDevice("gpu-0", "H100")
	withMemory.Attributes["memory"] = resourceapi.DeviceAttribute{IntValue: ptr.To[int64](80)}
	inv := BuildInventory([]*resourceapi.ResourceSlice{sliceOf("a", gpus(2, "H100")...), sliceOf("b", withMemory)})
	classWith := func(expr string) *resourceapi.DeviceClass {
		return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "big.example.com"},
			Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}}}
	}
	const missing = `device.attributes["gpu.nvidia.com"].memory > 40`
	tests := []struct {
		name string
		kind *Kind
		// wantMatches are the devices of each node that match.
		wantMatches map[string]int
		// wantErr is the error's text, "" for none.
		wantErr     string
		wantOfClass bool
	}{{
		name:        "an attribute some devices lack, read without has()",
		kind:        NewKind(classWith(missing), nil, nil),
		wantMatches: map[string]int{"a": 0, "b": 1},
		wantErr: `DeviceClass big.example.com's CEL selector ` + "`" + missing + "`" + ` fails on device gpu.nvidia.com/a/gpu-0: ` +
			`no such key: memory. consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() for optional fields`,
		wantOfClass: true,
	}, {
		name:        "guarded with has()",
		kind:        NewKind(classWith(`has(device.attributes["gpu.nvidia.com"].memory) && `+missing), nil, nil),
		wantMatches: map[string]int{"a": 0, "b": 1},
	}, {
		name: "values of different types compared",
		kind: NewKind(gpuClass(false), []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: `device.attributes["gpu.nvidia.com"].productName > 1`}}}, nil),
		wantMatches: map[string]int{"a": 0, "b": 0},
		wantErr: `the CEL selector ` + "`" + `device.attributes["gpu.nvidia.com"].productName > 1` + "`" + ` of a request for DeviceClass gpu.nvidia.com ` +
			`fails on device gpu.nvidia.com/a/gpu-0: no such overload`,
	}, {
		name:        "an expression that does not compile",
		kind:        NewKind(classWith(`device.attributes["gpu.nvidia.com"].memory >`), nil, nil),
		wantMatches: map[string]int{"a": 0, "b": 0},
		wantErr:     `DeviceClass big.example.com's CEL selector ` + "`" + `device.attributes["gpu.nvidia.com"].memory >` + "`" + ` does not compile: `,
		wantOfClass: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMatcher(inv, testCEL)
			// Node b is read first: the error told is node a's all the
			// same, the first node by name.
			for _, node := range []string{"b", "a"} {
				require.Equal(t, tt.wantMatches[node], m.On(ctx, tt.kind, node).Count(), "devices of node %s that match", node)
			}
			err := m.Err(tt.kind)
			if tt.wantErr == "" {
				require.Nil(t, err)
				return
			}
			require.NotNil(t, err)
			require.Contains(t, err.Error(), tt.wantErr)
			require.Equal(t, tt.wantOfClass, err.OfClass)
			require.Equal(t, "a", err.Node)
		})
	}
}

// Devices.SelectorError finds the error among the kinds a gang's members
// ask for, once a pass has read them.
func TestDevicesFindMembersSelectorError(t *testing.T) {
	ctx := context.Background()
	inv := BuildInventory([]*resourceapi.ResourceSlice{sliceOf("a", gpus(2, "H100")...)})
	bad := []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["gpu.nvidia.com"].memory > 40`}}}
	objs := newObjects([]*resourceapi.DeviceClass{gpuClass(false)}, claim("ns", "good", gpuDriver, 1), claim("ns", "bad", gpuDriver, 1, bad...))
	d := NewDevices(NewMatcher(inv, testCEL), NewRegistry(), objs, sets.New[structured.DeviceID]())
	var members []*PodDevices
	for _, name := range []string{"good", "bad"} {
		pd, err := objs.reader().Pod(podWithClaims("ns", name, name))
		require.NoError(t, err)
		members = append(members, pd)
	}
	// The pass reads the kinds on the nodes.
	demand := d.GangDemand(ctx, members, 0)
	for dim := range demand.Extra[1] {
		d.Allocatable(ctx, node{name: "a"}, dim, demand.Unions)
	}
	err := d.SelectorError(members)
	require.NotNil(t, err)
	require.Equal(t, bad[0].CEL.Expression, err.Expression)
	require.Nil(t, d.SelectorError(members[:1]), "the good member's kind matches")
}
