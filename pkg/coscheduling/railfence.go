package coscheduling

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
	"github.com/gpu-gang/gpu-gang/pkg/contract"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
)

// RailFenceName is the name of the RailFence plugin.
const RailFenceName = config.RailFencePluginName

// RailFence raises, for a member of a rail-aligned plan that asks for its
// GPUs through an extended resource a DeviceClass serves, the fence that
// leaves DynamicResources only the devices the plan chose on the member's
// node (dra.Fences). Its PreFilter must run before DynamicResources': a
// profile enables it in multiPoint and names it first in preFilter, which
// puts it ahead of the default plugins. The gang plugin's PreFilter takes
// the fence down. Without RailFence such members are not rail-aligned,
// and their gang's Event says so.
type RailFence struct {
	handle  fwk.Handle
	fences  *dra.Fences
	profile string
	// misordered is reported once: the profile runs RailFence after
	// DynamicResources, so that its fences are raised too late to count.
	misordered sync.Once
}

var (
	_ fwk.PreFilterPlugin   = &RailFence{}
	_ fwk.EnqueueExtensions = &RailFence{}
)

// NewRailFence builds the plugin on its scheduler's fences; without DRA it
// does nothing.
func NewRailFence(ctx context.Context, _ runtime.Object, handle fwk.Handle) (fwk.Plugin, error) {
	f := &RailFence{handle: handle, fences: dra.FencesFor(ctx, handle.SharedDRAManager()), profile: profileName(handle)}
	if f.fences != nil {
		f.fences.Enable(f.profile)
	}
	return f, nil
}

// Name returns RailFenceName.
func (f *RailFence) Name() string { return RailFenceName }

// PreFilter raises pod's fence, if it has one, and brings back the members
// turned away earlier to raise theirs. It never rejects a pod.
func (f *RailFence) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if f.fences == nil || contract.Simulated(ctx) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if _, err := cs.Read(fwk.StateKey(names.DynamicResources)); err == nil {
		// DynamicResources read the devices already: a fence now would
		// only hide devices from the plugins after it.
		f.misordered.Do(func() {
			f.fences.Disable(f.profile)
			klog.FromContext(ctx).Error(nil, "RailFence runs after DynamicResources in this profile, so members that ask for GPUs through an extended resource are not rail-aligned; enable it in multiPoint and name it first in preFilter",
				"profile", f.profile)
		})
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if later := f.fences.Raise(ctx, pod); len(later) > 0 {
		f.handle.Activate(klog.FromContext(ctx), later)
	}
	return nil, fwk.NewStatus(fwk.Skip)
}

// PreFilterExtensions returns nil: a fence is not a verdict on a node.
func (f *RailFence) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// EventsToRegister returns none: RailFence rejects no pod, so no event
// needs to bring one back for it.
func (f *RailFence) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return nil, nil
}

// profileName is the name of the profile handle is the framework of ("" if
// it does not say).
func profileName(handle fwk.Handle) string {
	if p, ok := handle.(interface{ ProfileName() string }); ok {
		return p.ProfileName()
	}
	return ""
}
