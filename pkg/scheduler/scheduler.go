// Package scheduler assembles gpu-gang: kube-scheduler with gpu-gang's
// plugins registered. cmd/scheduler, the integration tests and the simulator
// all start the scheduler through this package, so they run the same code.
package scheduler

import (
	"context"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/pkg/features"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gpufleet"
)

// RegistryOptions registers gpu-gang's out-of-tree plugins with kube-scheduler.
// The plugins of the scheduler these options build, of every profile, read
// gangs from one gang.Sources, so that each gang API has one informer: the
// first plugin built starts it. They read the devices ResourceSlices
// publish from one capacity.Inventories per DRA manager (one per
// scheduler, capacity.ForDRAManager), so that the device model is built
// once for all of them.
// Call it once per scheduler.
func RegistryOptions() []app.Option {
	shared := &gang.SharedSources{}
	return []app.Option{
		app.WithPlugin(coscheduling.Name, withSources(shared, coscheduling.New)),
		app.WithPlugin(coscheduling.RailFenceName, coscheduling.NewRailFence),
		app.WithPlugin(gpufleet.Name, withSources(shared, func(ctx context.Context, obj runtime.Object, handle fwk.Handle, sources *gang.Sources) (fwk.Plugin, error) {
			return gpufleet.New(ctx, obj, handle, sources, gpufleet.WithDevices(capacity.ForDRAManager(ctx, handle.SharedDRAManager())))
		})),
	}
}

// withSources is the registry factory of a plugin that reads gangs: it hands
// the plugin the scheduler's shared gang sources. It reads the
// GenericWorkload gate when the plugin is built, once the command has
// parsed its flags.
func withSources(shared *gang.SharedSources,
	newPlugin func(context.Context, runtime.Object, fwk.Handle, *gang.Sources) (fwk.Plugin, error)) frameworkruntime.PluginFactory {
	return func(ctx context.Context, obj runtime.Object, handle fwk.Handle) (fwk.Plugin, error) {
		sources, err := shared.Get(ctx, handle, utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload))
		if err != nil {
			return nil, err
		}
		return newPlugin(ctx, obj, handle, sources)
	}
}

// NewCommand returns the kube-scheduler command with gpu-gang's plugins
// registered. It takes the same flags as kube-scheduler, --config among them,
// and tells the plugins when the scheduling loop starts (command.go).
func NewCommand() *cobra.Command {
	cmd := newSchedulerCommand(RegistryOptions()...)
	cmd.Use = "gpu-gang-scheduler"
	cmd.Short = "kube-scheduler with gang admission and interconnect-aware placement for GPU training"
	return cmd
}
