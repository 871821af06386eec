// Command podgroup-controller keeps the status of scheduling.x-k8s.io
// PodGroups true to their pods, and records Events when a gang's phase
// changes or its members wait for others that are never going to be
// created. Where the API server serves Kubernetes' own PodGroups
// (scheduling.k8s.io/v1beta1), it keeps the conditions of those whose
// members gpu-gang schedules too (PodGroupInitiallyScheduled among them).
// It runs beside gpu-gang-scheduler, in the same Deployment, with leader
// election on a Lease of its own; see pkg/controller/podgroup.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/gpu-gang/gpu-gang/pkg/controller/podgroup"
	"github.com/gpu-gang/gpu-gang/pkg/version"
)

func main() {
	s, err := parseFlags(os.Args[0], os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if s.version {
		fmt.Println("podgroup-controller " + version.Get().String())
		os.Exit(0)
	}
	if err := run(s); err != nil {
		klog.ErrorS(err, "podgroup-controller failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
}

// settings are the command's flags.
type settings struct {
	kubeconfig string
	version    bool
	qps        float64
	burst      int
	opts       podgroup.Options
}

// parseFlags parses the command line into settings. It uses a flag set of
// its own: controller-runtime registers a --kubeconfig of its own on the
// global one.
func parseFlags(name string, args []string) (*settings, error) {
	s := &settings{}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	klog.InitFlags(fs)
	fs.BoolVar(&s.version, "version", false, "Print the version (module version, commit, Go and Kubernetes versions) and exit.")
	fs.StringVar(&s.kubeconfig, "kubeconfig", "", "Path to a kubeconfig file; empty means the in-cluster configuration.")
	fs.Float64Var(&s.qps, "kube-api-qps", 50, "Queries per second to the API server.")
	fs.IntVar(&s.burst, "kube-api-burst", 100, "Burst of queries to the API server.")
	fs.BoolVar(&s.opts.LeaderElection, "leader-elect", true, "Elect a leader before reconciling, so that only one replica writes status.")
	fs.StringVar(&s.opts.LeaderElectionNamespace, "leader-elect-resource-namespace", envOr("POD_NAMESPACE", "gpu-gang-system"), "Namespace of the leader election Lease.")
	fs.StringVar(&s.opts.LeaderElectionID, "leader-elect-resource-name", "gpu-gang-podgroup-controller", "Name of the leader election Lease.")
	fs.StringVar(&s.opts.MetricsBindAddress, "metrics-bind-address", ":8443", `Address to serve Prometheus metrics on, over HTTPS with delegated authentication and authorization; "0" turns them off.`)
	fs.StringVar(&s.opts.HealthProbeBindAddress, "health-probe-bind-address", ":8081", `Address to serve /healthz and /readyz on, over HTTP; "0" turns them off.`)
	fs.DurationVar(&s.opts.MissingMembersGrace, "missing-members-grace", podgroup.DefaultMissingMembersGrace,
		"How long a gang's members may wait with no new member created before the PodGroup reports the rest as missing.")
	fs.IntVar(&s.opts.Workers, "workers", 4, "PodGroups reconciled at once.")
	fs.Func("scheduler-names", "Comma-separated scheduler names of gpu-gang's profiles; the controller keeps the status of native PodGroups whose members name one of them. (default "+podgroup.DefaultSchedulerName+")",
		func(v string) error {
			s.opts.SchedulerNames = nil
			for _, name := range strings.Split(v, ",") {
				if name = strings.TrimSpace(name); name != "" {
					s.opts.SchedulerNames = append(s.opts.SchedulerNames, name)
				}
			}
			if len(s.opts.SchedulerNames) == 0 {
				return fmt.Errorf("no scheduler name in %q", v)
			}
			return nil
		})
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if s.opts.MissingMembersGrace <= 0 {
		return nil, fmt.Errorf("--missing-members-grace must be positive, not %s", s.opts.MissingMembersGrace)
	}
	return s, nil
}

func run(s *settings) error {
	ctrl.SetLogger(klog.NewKlogr())
	cfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the client configuration: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(s.qps), s.burst
	cfg.UserAgent = "gpu-gang-" + podgroup.Name

	ctx := ctrl.SetupSignalHandler()
	mgr, err := podgroup.NewManager(ctx, cfg, s.opts)
	if err != nil {
		return err
	}
	klog.InfoS("Starting", "leaderElection", s.opts.LeaderElection, "lease", s.opts.LeaderElectionNamespace+"/"+s.opts.LeaderElectionID)
	return mgr.Start(ctx)
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
