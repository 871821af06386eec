package capacity

import (
	"context"

	fwk "k8s.io/kube-scheduler/framework"
)

// shared hands out the Inventories of every scheduler of the process, one
// per DRA manager.
var shared SharedInventories

// ForDRAManager returns the Inventories of a scheduler's DRA manager, the
// same to every plugin that asks, Coscheduling and GPUFleet of every
// profile alike, so that the scheduler keeps one device model of its
// slices; nil when DRA is off (a nil manager). They are forgotten when ctx
// ends.
func ForDRAManager(ctx context.Context, dra fwk.SharedDRAManager) *Inventories {
	return shared.ForDRAManager(ctx, dra)
}

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
