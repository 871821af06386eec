package capacity

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
)

// A matcher reuses where the allocated devices sit while the set is the
// same (a clone of it, in any order), and reads a changed set afresh: one
// more device, one fewer, or another device in place of one.
func TestAllocatedPositionsFollowTheSet(t *testing.T) {
	m := NewMatcher(BuildInventory([]*resourceapi.ResourceSlice{
		sliceOf("a", gpus(8, "H100")...), sliceOf("b", gpus(8, "H100")...),
	}), testCEL)
	id := func(node, dev string) structured.DeviceID { return structured.MakeDeviceID(gpuDriver, node, dev) }
	devices := func(ids sets.Set[structured.DeviceID]) *Devices { return NewDevices(m, NewRegistry(), nil, ids) }
	count := func(d *Devices) map[string]int {
		return map[string]int{"a": d.Allocated("a").Count(), "b": d.Allocated("b").Count()}
	}

	first := sets.New(id("a", "gpu-0"), id("a", "gpu-1"), id("b", "gpu-7"))
	d1 := devices(first)
	if diff := cmp.Diff(map[string]int{"a": 2, "b": 1}, count(d1)); diff != "" {
		t.Fatalf("allocated devices per node (-want,+got):\n%s", diff)
	}
	if d2 := devices(first.Clone()); reflect.ValueOf(d2.allocated).UnsafePointer() != reflect.ValueOf(d1.allocated).UnsafePointer() {
		t.Error("the same set was read again")
	}
	for _, tc := range []struct {
		name string
		ids  sets.Set[structured.DeviceID]
		want map[string]int
	}{
		{"one more", first.Clone().Insert(id("b", "gpu-0")), map[string]int{"a": 2, "b": 2}},
		{"one fewer", first.Clone().Delete(id("a", "gpu-0")), map[string]int{"a": 1, "b": 1}},
		{"another in place of one", first.Clone().Delete(id("a", "gpu-0")).Insert(id("b", "gpu-0")), map[string]int{"a": 1, "b": 2}},
		{"none", sets.New[structured.DeviceID](), map[string]int{"a": 0, "b": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, count(devices(tc.ids))); diff != "" {
				t.Errorf("allocated devices per node (-want,+got):\n%s", diff)
			}
		})
	}
}
