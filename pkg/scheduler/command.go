package scheduler

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/tools/cache"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/term"
	"k8s.io/component-base/version/verflag"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"

	"github.com/gpu-gang/gpu-gang/pkg/leading"
)

// newSchedulerCommand is app.NewSchedulerCommand, the same flags and
// start-up, with one step added between app.Setup and app.Run:
// leading.Notify, which tells the plugins that write on their own when the
// scheduling loop starts (only in the replica that holds the lease).
// kube-scheduler's command offers no hook there, so its two functions are
// repeated here as they are at v1.37.2.
func newSchedulerCommand(registryOptions ...app.Option) *cobra.Command {
	opts := options.NewOptions()
	cmd := &cobra.Command{
		Use: "kube-scheduler",
		PersistentPreRunE: func(*cobra.Command, []string) error {
			// Feature gates are set before RunE.
			return opts.ComponentGlobalsRegistry.Set()
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCommand(cmd, opts, registryOptions...)
		},
		Args: func(cmd *cobra.Command, args []string) error {
			for _, arg := range args {
				if len(arg) > 0 {
					return fmt.Errorf("%q does not take any arguments, got %q", cmd.CommandPath(), args)
				}
			}
			return nil
		},
	}
	nfs := opts.Flags
	verflag.AddFlags(nfs.FlagSet("global"))
	globalflag.AddGlobalFlags(nfs.FlagSet("global"), cmd.Name(), logs.SkipLoggingConfigurationFlags())
	fs := cmd.Flags()
	for _, f := range nfs.FlagSets {
		fs.AddFlagSet(f)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, *nfs, cols)
	if err := cmd.MarkFlagFilename("config", "yaml", "yml", "json"); err != nil {
		klog.Background().Error(err, "Failed to mark flag filename")
	}
	return cmd
}

// runCommand is kube-scheduler's runCommand with leading.Notify.
func runCommand(cmd *cobra.Command, opts *options.Options, registryOptions ...app.Option) error {
	verflag.PrintAndExitIfRequested()
	fg := opts.ComponentGlobalsRegistry.FeatureGateFor(basecompatibility.DefaultKubeComponent)
	// Logging is activated as soon as possible, and the flags shown with
	// the final logging configuration.
	if err := logsapi.ValidateAndApply(opts.Logs, fg); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
	cliflag.PrintFlags(cmd.Flags())
	if opts.InformerName == nil {
		informerName, err := cache.NewInformerName("kube-scheduler")
		if err != nil {
			return err
		}
		opts.InformerName = informerName
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		stopCh := server.SetupSignalHandler()
		<-stopCh
		cancel()
	}()
	cc, sched, err := app.Setup(ctx, opts, registryOptions...)
	if err != nil {
		return err
	}
	leading.Notify(sched)
	fg.(featuregate.MutableFeatureGate).AddMetrics()
	opts.ComponentGlobalsRegistry.AddMetrics()
	return app.Run(ctx, cc, sched)
}
