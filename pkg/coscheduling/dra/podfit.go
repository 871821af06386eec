package dra

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
)

// PodFit is what a pod that takes devices asks for, read once in PreFilter
// for Filter to check against held capacity on every node.
type PodFit struct {
	// request is the pod's demand in device dimensions.
	request capacity.Amounts
	// columns resolves every dimension of the pod's plain and device
	// demand.
	columns map[v1.ResourceName]capacity.Column
}

// PodFit reads what pod takes of devices, for Filter to keep it out of
// held devices; nil when it takes none. A claim the pod cannot read yet is
// DynamicResources' to report: the pod is then checked on its plain
// requests alone.
func (s *DeviceSource) PodFit(ctx context.Context, pod *v1.Pod, plain capacity.Amounts) *PodFit {
	if s == nil {
		return nil
	}
	pd, err := s.reader.Pod(pod)
	if err != nil || !pd.Any() {
		return nil
	}
	devices, err := s.Pass(ctx)
	if err != nil {
		return nil
	}
	g := devices.GangDemand(ctx, []*capacity.PodDevices{pd}, 0)
	out := &PodFit{request: g.Extra[0], columns: map[v1.ResourceName]capacity.Column{}}
	for _, a := range []capacity.Amounts{plain, out.request} {
		for name := range a {
			out.columns[name] = devices.Column(name, g.Unions)
		}
	}
	return out
}

// Fits reports whether the pod fits on the node once held is set aside: a
// dimension served by the node's allocatable as FitsWithHeld checks it,
// one served by devices against the devices free less those held.
func (d *PodFit) Fits(ctx context.Context, ni fwk.NodeInfo, plain, held capacity.Amounts) bool {
	n := NodeCapacity{ni}
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
	ok, _ := FitsWithHeld(ni, onAllocatable, held)
	return ok
}
