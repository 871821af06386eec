package capacity

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// draManager is a DRA manager that lists slices, and serves nothing else.
type draManager struct {
	fwk.SharedDRAManager
	slices []*resourceapi.ResourceSlice
}

func (m *draManager) ResourceSlices() fwk.ResourceSliceLister { return m }

func (m *draManager) ListWithDeviceTaintRules() ([]*resourceapi.ResourceSlice, error) {
	return m.slices, nil
}

// The plugins of one scheduler share its DRA manager's Inventories, which
// list that manager's slices; without DRA there are none.
func TestForDRAManager(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var shared SharedInventories
	if inv := shared.ForDRAManager(ctx, nil); inv != nil {
		t.Fatalf("without a DRA manager: %v, want nil", inv)
	}
	a := &draManager{slices: []*resourceapi.ResourceSlice{sliceOf("n0", gpus(8, "H100")...)}}
	b := &draManager{}
	inv := shared.ForDRAManager(ctx, a)
	if shared.ForDRAManager(ctx, a) != inv {
		t.Fatal("two plugins of one scheduler got different inventories")
	}
	if shared.ForDRAManager(ctx, b) == inv {
		t.Fatal("two schedulers share inventories")
	}
	m, err := inv.Current()
	if err != nil {
		t.Fatal(err)
	}
	if got := len(m.Inventory().Node("n0").Devices); got != 8 {
		t.Errorf("node n0 has %d devices, want the manager's 8", got)
	}
}
