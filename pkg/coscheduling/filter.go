package coscheduling

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
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
		if ok, _ := fitsWithHeld(ni, s.request, held); !ok {
			return fwk.NewStatus(fwk.Unschedulable, ErrReasonHeld)
		}
		return nil
	}
	if !s.devices.fits(ctx, ni, s.request, held) {
		return fwk.NewStatus(fwk.Unschedulable, ErrReasonHeld)
	}
	return nil
}

// podDevices is what a pod that takes devices asks for, read once in
// PreFilter for Filter to check against held capacity on every node.
type podDevices struct {
	// request is the pod's demand in device dimensions.
	request capacity.Amounts
	// columns resolves every dimension of the pod's plain and device
	// demand.
	columns map[v1.ResourceName]capacity.Column
}

// fits reports whether the pod fits on the node once held is set aside: a
// dimension served by the node's allocatable as fitsWithHeld checks it,
// one served by devices against the devices free less those held.
func (d *podDevices) fits(ctx context.Context, ni fwk.NodeInfo, plain, held capacity.Amounts) bool {
	n := nodeCapacity{ni}
	check := func(name v1.ResourceName, want int64) bool {
		c := d.columns[name]
		if want == 0 || !c.ServedByDevices(ctx, n) {
			return true
		}
		return want <= c.Free(ctx, n, held)
	}
	onAllocatable := capacity.Amounts{}
	for _, name := range plain.Names() {
		if !check(name, plain[name]) {
			return false
		}
		if c := d.columns[name]; !c.ServedByDevices(ctx, n) {
			onAllocatable[name] = plain[name]
		}
	}
	for _, name := range d.request.Names() {
		if !check(name, d.request[name]) {
			return false
		}
	}
	ok, _ := fitsWithHeld(ni, onAllocatable, held)
	return ok
}
