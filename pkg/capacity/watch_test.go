package capacity

import (
	"testing"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// The kept matcher follows the slice tracker whatever order its handler
// and ours run in: an event our handler saw first makes passes list until
// the tracker's list shows it; a change the tracker shows first is listed
// (the list differs from what the watch knows); a DeviceTaintRule keeps
// every pass listing while it exists, and after it goes, until the tracker
// has taken its taints off; and with neither in flight, passes do not
// list at all.
func TestInventoriesFollowTheTrackerInEitherOrder(t *testing.T) {
	a, b := sliceOf("a", gpus(8, "H100")...), sliceOf("b", gpus(4, "H100")...)
	// tracker is what the DRA manager lists: the tracker's store.
	tracker := map[string]*resourceapi.ResourceSlice{}
	lists := 0
	inv := NewInventories(func() ([]*resourceapi.ResourceSlice, error) {
		lists++
		out := make([]*resourceapi.ResourceSlice, 0, len(tracker))
		for _, s := range tracker {
			out = append(out, s)
		}
		return out, nil
	}, testCEL)
	w := newSliceWatch()
	inv.watch = w
	slices, rules := w.handlers()
	devicesOn := func(node string) int {
		t.Helper()
		m, err := inv.Current()
		require.NoError(t, err)
		return len(m.Inventory().Node(node).Devices)
	}
	step := func(name, node string, wantDevices, wantLists int) {
		t.Helper()
		before := lists
		require.Equal(t, wantDevices, devicesOn(node), "%s: devices on %s", name, node)
		require.Equal(t, wantLists, lists-before, "%s: lists", name)
	}

	tracker[a.Name], tracker[b.Name] = a, b
	slices.OnAdd(a, true)
	slices.OnAdd(b, true)
	step("first pass", "a", 8, 1)
	step("nothing changed", "a", 8, 0)

	// Our handler sees the update before the tracker stores it.
	a2 := a.DeepCopy()
	a2.Spec.Devices = gpus(2, "H100")
	slices.OnUpdate(a, a2)
	step("our handler first: the tracker still lists the old slice", "a", 8, 1)
	step("our handler first: not kept while the tracker is behind", "a", 8, 1)
	tracker[a.Name] = a2
	step("the tracker caught up", "a", 2, 1)
	step("caught up: kept", "a", 2, 0)

	// The tracker stores a change before our handler sees it.
	b2 := b.DeepCopy()
	b2.Spec.Devices = gpus(1, "H100")
	tracker[b.Name] = b2
	step("the tracker first: not seen until our handler runs", "b", 4, 0)
	slices.OnUpdate(b, b2)
	step("the tracker first: our handler ran", "b", 1, 1)
	step("the tracker first: kept", "b", 1, 0)

	// A DeviceTaintRule: our handler sees it before the tracker patches.
	rule := &resourceapi.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "drain-a"}}
	rules.OnAdd(rule, false)
	step("a rule before its patch", "a", 2, 1)
	patched := a2.DeepCopy()
	patched.Spec.Devices[0].Taints = []resourceapi.DeviceTaint{{Key: "drain", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	tracker[a.Name] = patched
	taintsOn := func(name string) int {
		t.Helper()
		m, err := inv.Current()
		require.NoError(t, err)
		return len(m.Inventory().Node("a").Devices[0].Taints)
	}
	require.Equal(t, 1, taintsOn("the tracker patched the slice without a slice event"))
	before := lists
	taintsOn("while a rule exists")
	require.Equal(t, 1, lists-before, "while a rule exists every pass lists")

	// The rule goes; the tracker takes the patch off after our handler ran.
	rules.OnDelete(cache.DeletedFinalStateUnknown{Key: rule.Name, Obj: rule})
	require.Equal(t, 1, taintsOn("rule deleted, the tracker still patched"))
	tracker[a.Name] = a2
	require.Equal(t, 0, taintsOn("the tracker took the patch off"))
	before = lists
	require.Equal(t, 0, taintsOn("no rule, nothing in flight"))
	require.Equal(t, 0, lists-before, "kept again once no rule patches a slice")

	// A withdrawn slice, seen by our handler through a tombstone.
	delete(tracker, b.Name)
	slices.OnDelete(cache.DeletedFinalStateUnknown{Key: b2.Name, Obj: b2})
	require.Nil(t, func() *NodeDevices { m, _ := inv.Current(); return m.Inventory().Node("b") }(), "a withdrawn slice's node still has devices")
	step("after the withdrawal: kept", "a", 2, 0)
}
