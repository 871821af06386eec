// Package scheduler assembles gpu-gang: kube-scheduler with gpu-gang's
// plugins registered. cmd/scheduler, the integration tests and the simulator
// all start the scheduler through this package, so they run the same code.
package scheduler

import (
	"github.com/spf13/cobra"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/gpu-gang/gpu-gang/pkg/coscheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gpufleet"
)

// RegistryOptions registers gpu-gang's out-of-tree plugins with kube-scheduler.
func RegistryOptions() []app.Option {
	return []app.Option{
		app.WithPlugin(coscheduling.Name, coscheduling.New),
		app.WithPlugin(gpufleet.Name, gpufleet.New),
	}
}

// NewCommand returns the kube-scheduler command with gpu-gang's plugins
// registered. It takes the same flags as kube-scheduler, --config among them.
func NewCommand() *cobra.Command {
	cmd := app.NewSchedulerCommand(RegistryOptions()...)
	cmd.Use = "gpu-gang-scheduler"
	cmd.Short = "kube-scheduler with gang admission and interconnect-aware placement for GPU training"
	return cmd
}
