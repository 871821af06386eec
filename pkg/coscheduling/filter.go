package coscheduling

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
)

// Filter keeps a pod out of capacity that other gangs' plans hold.
func (pl *Plugin) Filter(ctx context.Context, cs fwk.CycleState, _ *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	s, err := readState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	held := s.held[ni.Node().Name]
	if held == nil {
		return nil
	}
	if s.devices == nil {
		if ok, _ := dra.FitsWithHeld(ni, s.request, held); !ok {
			return fwk.NewStatus(fwk.Unschedulable, ErrReasonHeld)
		}
		return nil
	}
	if !s.devices.Fits(ctx, ni, s.request, held) {
		return fwk.NewStatus(fwk.Unschedulable, ErrReasonHeld)
	}
	return nil
}
