package capacity

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// Inventories rebuild only when the list of slices changes, whatever its
// order.
func TestInventoriesRebuildOnlyOnChange(t *testing.T) {
	a, b := sliceOf("a", gpus(8, "H100")...), sliceOf("b", gpus(4, "H100")...)
	a.ResourceVersion, b.ResourceVersion = "1", "1"
	list := []*resourceapi.ResourceSlice{a, b}
	var shared SharedInventories
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inv := shared.Get(ctx, "dra", func() ([]*resourceapi.ResourceSlice, error) { return list, nil })
	if again := shared.Get(ctx, "dra", nil); again != inv {
		t.Fatal("a second plugin of the same scheduler must share the inventories")
	}
	first, err := inv.Current()
	if err != nil {
		t.Fatal(err)
	}
	list = []*resourceapi.ResourceSlice{b, a}
	if m, _ := inv.Current(); m != first {
		t.Error("the same slices in another order rebuilt the inventory")
	}
	updated := a.DeepCopy()
	updated.ResourceVersion = "2"
	updated.Spec.Devices = gpus(2, "H100")
	list = []*resourceapi.ResourceSlice{updated, b}
	m, _ := inv.Current()
	if m == first {
		t.Fatal("an updated slice did not rebuild the inventory")
	}
	if got := len(m.Inventory().Node("a").Devices); got != 2 {
		t.Errorf("node a has %d devices after the update, want 2", got)
	}
}
