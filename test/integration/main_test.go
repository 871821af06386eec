// Package integration runs gpu-gang's scheduler against a real kube-apiserver
// and etcd in this process, started once for the whole package by TestMain:
// start-up takes seconds, but linking kube-apiserver into a test binary takes
// minutes, so this is the only package that does.
//
// Tests run one at a time (none calls t.Parallel). Each gets its own
// namespace, and nodes named after it; nodes are cluster-scoped, so each test
// deletes its nodes and pods when it ends and the next test starts from an
// empty cluster. Serial tests with that cleanup are deterministic, and the
// scheduler sees only the nodes of the test in progress, so capacity in a
// test is exactly what the test created.
//
// Run with a generous timeout:
//
//	go test ./test/integration/... -timeout 45m -count=1
package integration

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/gpu-gang/gpu-gang/pkg/controlplane"
	"github.com/gpu-gang/gpu-gang/pkg/scheduler"
)

// podGroupCRD is relative to this package's directory, where go test runs it.
const podGroupCRD = "../../manifests/crds/scheduling.x-k8s.io_podgroups.yaml"

// schedulerConfig is the deployment's configuration file, the one
// cmd/scheduler runs with. The flag is for trying a variant by hand:
//
//	go test ./test/integration -args -scheduler-config=/tmp/variant.yaml
var schedulerConfig = flag.String("scheduler-config", "../../manifests/scheduler-config.yaml",
	"KubeSchedulerConfiguration file to run the scheduler with")

// schedulerName is the profile name in manifests/scheduler-config.yaml.
const schedulerName = "gpu-gang"

// Shared by all tests; set by TestMain.
var (
	controlPlane *controlplane.ControlPlane
	kubeClient   kubernetes.Interface
	pgClient     pgclientset.Interface
	// gangScheduler is the running scheduler; a test may replace it.
	gangScheduler *controlplane.Scheduler
)

// startScheduler starts gpu-gang's scheduler with the same configuration
// file and plugin registry as cmd/scheduler.
func startScheduler(ctx context.Context) (*controlplane.Scheduler, error) {
	return startSchedulerFrom(ctx, *schedulerConfig)
}

// startSchedulerFrom starts gpu-gang's scheduler in this process with the
// plugin registry of cmd/scheduler and the configuration file config.
func startSchedulerFrom(ctx context.Context, config string) (*controlplane.Scheduler, error) {
	return controlplane.StartScheduler(ctx, controlplane.SchedulerOptions{
		ConfigFile: config,
		Kubeconfig: controlPlane.KubeconfigPath(),
		Registry:   scheduler.RegistryOptions(),
		Flags:      []string{controlplane.SchedulerGatesFlag},
	})
}

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping integration tests in -short mode")
		return 0
	}
	ctx := context.Background()
	logger := klog.Background()

	cp, err := controlplane.Start(ctx, controlplane.Options{CRDFiles: []string{podGroupCRD}})
	if err != nil {
		logger.Error(err, "Starting the control plane")
		return 1
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			logger.Error(err, "Stopping the control plane")
		}
	}()
	controlPlane = cp

	if kubeClient, err = kubernetes.NewForConfig(cp.RESTConfig()); err != nil {
		logger.Error(err, "Building the client")
		return 1
	}
	if pgClient, err = pgclientset.NewForConfig(cp.JSONConfig()); err != nil {
		logger.Error(err, "Building the PodGroup client")
		return 1
	}

	if gangScheduler, err = startScheduler(ctx); err != nil {
		logger.Error(err, "Starting the scheduler")
		return 1
	}
	// Deferred after the control plane's Stop, so it runs first: the
	// scheduler must let go of the API server before the server goes.
	defer func() {
		if gangScheduler == nil {
			return
		}
		if err := gangScheduler.Stop(); err != nil {
			logger.Error(err, "Stopping the scheduler")
		}
	}()

	return m.Run()
}
