// Command gpu-gang-scheduler runs kube-scheduler with gpu-gang's plugins.
// Pods opt in with spec.schedulerName: gpu-gang; see manifests/scheduler-config.yaml.
package main

import (
	"os"

	"k8s.io/component-base/cli"

	"github.com/gpu-gang/gpu-gang/pkg/scheduler"
)

func main() {
	os.Exit(cli.Run(scheduler.NewCommand()))
}
