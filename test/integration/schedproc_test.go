package integration

// The real scheduler binary, run as a process of its own, for the faults
// that need one: killed with SIGKILL, and two replicas that elect a leader.

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/gpu-gang/gpu-gang/pkg/childproc"
	"github.com/gpu-gang/gpu-gang/pkg/controlplane"
)

// schedulerBinary is built by `make test-binaries`.
const schedulerBinary = "../../bin/gpu-gang-scheduler"

// Leader election timings for the replicas: short, so that a standby takes
// over a killed leader's lease within seconds rather than kube-scheduler's
// default 15 s.
const (
	testLeaseDuration = 4 * time.Second
	testRenewDeadline = 3 * time.Second
	testRetryPeriod   = time.Second
)

// schedulerProcess is a gpu-gang-scheduler process.
type schedulerProcess struct {
	name  string
	child *childproc.Child
	log   *processLog
}

// pauseInProcessScheduler stops the shared in-process scheduler for the rest
// of the test, so that processes of the real binary schedule alone, and
// starts it again when the test ends.
func pauseInProcessScheduler(t *testing.T) {
	t.Helper()
	if err := gangScheduler.Stop(); err != nil {
		t.Fatalf("stopping the in-process scheduler: %v", err)
	}
	gangScheduler = nil
	t.Cleanup(func() {
		// t.Context() has ended by the time cleanups run.
		sched, err := startScheduler(context.Background())
		if err != nil {
			t.Fatalf("restarting the in-process scheduler: %v", err)
		}
		gangScheduler = sched
	})
}

// replaceInProcessScheduler runs, for the rest of the test, an in-process
// scheduler whose Coscheduling args are the shipped ones with
// coschedulingArgs set over them in every profile, in place of the shared
// one, which starts again when the test ends.
func replaceInProcessScheduler(t *testing.T, coschedulingArgs map[string]any) {
	t.Helper()
	config, err := controlplane.WriteSchedulerConfig(*schedulerConfig, t.TempDir(), func(cfg map[string]any) {
		setPluginArgs(cfg, "Coscheduling", coschedulingArgs)
	})
	if err != nil {
		t.Fatalf("writing the scheduler configuration: %v", err)
	}
	pauseInProcessScheduler(t)
	sched, err := startSchedulerFrom(t.Context(), config)
	if err != nil {
		t.Fatalf("starting the scheduler with %v: %v", coschedulingArgs, err)
	}
	// Cleanups run last first: this one stops it before the shared
	// scheduler starts again.
	t.Cleanup(func() {
		if err := sched.Stop(); err != nil {
			t.Errorf("stopping the scheduler: %v", err)
		}
	})
}

// startSchedulerProcess runs the scheduler binary with the shipped
// configuration, its kubeconfig pointed at the control plane, and flags
// added to the command line. With leaderElect it runs as one replica of a
// deployment: leader election on the shipped Lease, with short timings.
func startSchedulerProcess(t *testing.T, name string, leaderElect bool, flags ...string) *schedulerProcess {
	t.Helper()
	return startSchedulerProcessWith(t, name, processOptions{leaderElect: leaderElect, flags: flags})
}

// processOptions says how startSchedulerProcessWith runs the binary.
type processOptions struct {
	// leaderElect runs the process as one replica of a deployment (see
	// startSchedulerProcess).
	leaderElect bool
	// clientQPS, if not 0, replaces the shipped client limit with this
	// many API calls per second and a burst of 1. Every bind is one call,
	// so a gang's binds are spread over len(gang)/clientQPS seconds: the
	// kill tests use it so that a kill triggered by the first binds
	// lands while the rest still wait for their turn.
	clientQPS float64
	// coschedulingArgs are set in the Coscheduling plugin's args of every
	// profile, over the shipped ones.
	coschedulingArgs map[string]any
	flags            []string
}

// startSchedulerProcessWith is startSchedulerProcess with every option.
func startSchedulerProcessWith(t *testing.T, name string, opts processOptions) *schedulerProcess {
	t.Helper()
	binary := requireBinary(t, schedulerBinary, "the scheduler (make test-binaries)")
	ensureNamespace(t, systemNamespace)
	config, err := controlplane.WriteSchedulerConfig(*schedulerConfig, t.TempDir(), func(cfg map[string]any) {
		conn, _ := cfg["clientConnection"].(map[string]any)
		if conn == nil {
			conn = map[string]any{}
		}
		conn["kubeconfig"] = controlPlane.KubeconfigPath()
		if opts.clientQPS != 0 {
			conn["qps"] = opts.clientQPS
			conn["burst"] = 1
		}
		cfg["clientConnection"] = conn
		le, _ := cfg["leaderElection"].(map[string]any)
		if le == nil {
			le = map[string]any{}
		}
		le["leaderElect"] = opts.leaderElect
		le["leaseDuration"] = testLeaseDuration.String()
		le["renewDeadline"] = testRenewDeadline.String()
		le["retryPeriod"] = testRetryPeriod.String()
		cfg["leaderElection"] = le
		setPluginArgs(cfg, "Coscheduling", opts.coschedulingArgs)
	})
	if err != nil {
		t.Fatalf("writing the scheduler configuration: %v", err)
	}
	p := &schedulerProcess{name: name, log: newProcessLog(t, name)}
	// No serving: replicas on one host would fight over the port, and
	// nothing here reads their health or metrics endpoints.
	cmd := exec.Command(binary, append([]string{"--config=" + config, "--secure-port=0", "--v=2"}, opts.flags...)...)
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if p.child, err = childproc.Start(cmd); err != nil {
		t.Fatalf("starting %s: %v", binary, err)
	}
	t.Cleanup(p.stop)
	return p
}

// kill ends the process with SIGKILL, as the OOM killer or a node failure
// would, and waits for it.
func (p *schedulerProcess) kill() { p.child.Kill() }

// stop ends the process with SIGTERM, then SIGKILL after processStopTimeout.
func (p *schedulerProcess) stop() { p.child.Stop(processStopTimeout) }

// waitForLog waits until the process has logged substr.
func (p *schedulerProcess) waitForLog(t *testing.T, substr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if p.log.contains(substr) {
			return
		}
		select {
		case <-p.child.Done():
			t.Fatalf("scheduler %s exited before it logged %q", p.name, substr)
		case <-time.After(pollInterval):
		}
	}
	t.Fatalf("scheduler %s did not log %q within %s", p.name, substr, timeout)
}

// leads reports whether the process has logged that it holds the lease.
func (p *schedulerProcess) leads() bool {
	return p.log.contains("Successfully acquired lease")
}

func (p *schedulerProcess) String() string { return fmt.Sprintf("scheduler %s", p.name) }

// setPluginArgs sets args in the pluginConfig of plugin in every profile of
// the configuration cfg, over what is there.
func setPluginArgs(cfg map[string]any, plugin string, args map[string]any) {
	if len(args) == 0 {
		return
	}
	profiles, _ := cfg["profiles"].([]any)
	for _, p := range profiles {
		profile, _ := p.(map[string]any)
		entries, _ := profile["pluginConfig"].([]any)
		for _, e := range entries {
			entry, _ := e.(map[string]any)
			if entry["name"] != plugin {
				continue
			}
			have, _ := entry["args"].(map[string]any)
			if have == nil {
				have = map[string]any{}
			}
			for k, v := range args {
				have[k] = v
			}
			entry["args"] = have
		}
	}
}
