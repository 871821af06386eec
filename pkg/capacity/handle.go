package capacity

import (
	"context"

	fwk "k8s.io/kube-scheduler/framework"
)

// ForDRAManager returns the Inventories of a scheduler's DRA manager (a
// plugin handle's SharedDRAManager), which lists slices with device taint
// rules applied, as DynamicResources sees them; nil when DRA is off (a nil
// manager). Every plugin of a scheduler that asks with the same manager
// gets the same Inventories.
func (s *SharedInventories) ForDRAManager(ctx context.Context, dra fwk.SharedDRAManager) *Inventories {
	if dra == nil {
		return nil
	}
	return s.Get(ctx, dra, dra.ResourceSlices().ListWithDeviceTaintRules)
}
