// Command gpu-gang-scheduler runs kube-scheduler with gpu-gang's plugins.
// Pods opt in with spec.schedulerName: gpu-gang; see manifests/scheduler-config.yaml.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"

	"github.com/gpu-gang/gpu-gang/pkg/scheduler"
	"github.com/gpu-gang/gpu-gang/pkg/version"
)

func main() {
	os.Exit(cli.Run(newCommand()))
}

// newCommand is kube-scheduler's command with gpu-gang's plugins, whose
// --version reports gpu-gang's build. kube-scheduler's own --version flag
// (k8s.io/component-base/version/verflag) prints the Kubernetes version
// stamped at link time, which a build outside Kubernetes' release tooling
// leaves as v0.0.0-master; the flag is kept, with its values, and answered
// here before kube-scheduler's run starts.
func newCommand() *cobra.Command {
	cmd := scheduler.NewCommand()
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if f := c.Flags().Lookup("version"); f != nil {
			switch f.Value.String() {
			case "true":
				_, err := fmt.Fprintln(c.OutOrStdout(), c.Name()+" "+version.Get().String())
				return err
			case "raw":
				_, err := fmt.Fprintln(c.OutOrStdout(), version.Get().JSON())
				return err
			}
		}
		return run(c, args)
	}
	return cmd
}
