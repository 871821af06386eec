package coscheduling

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// Filter keeps a pod out of capacity that other gangs' plans hold.
func (pl *Plugin) Filter(_ context.Context, cs fwk.CycleState, _ *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	s, err := readState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	held := s.held[ni.Node().Name]
	if held == nil {
		return nil
	}
	if ok, _ := fitsWithHeld(ni, s.request, held); !ok {
		return fwk.NewStatus(fwk.Unschedulable, ErrReasonHeld)
	}
	return nil
}
