package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/configz"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"sigs.k8s.io/yaml"

	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler"

	"github.com/gpu-gang/gpu-gang/pkg/leading"
)

// schedulerReadyTimeout bounds the wait for the scheduler's informers and
// event handlers to sync after it starts.
const schedulerReadyTimeout = time.Minute

// configzName is the name kube-scheduler's Run registers its configuration
// under; the registration is process-wide and refuses a second one.
const configzName = "componentconfig"

// SchedulerOptions configures StartScheduler.
type SchedulerOptions struct {
	// ConfigFile is a KubeSchedulerConfiguration file, such as
	// manifests/scheduler-config.yaml. StartScheduler uses a copy whose
	// clientConnection.kubeconfig is Kubeconfig; everything else is used as
	// written.
	ConfigFile string

	// Kubeconfig is the kubeconfig file of the cluster to schedule for, such
	// as ControlPlane.KubeconfigPath.
	Kubeconfig string

	// Registry registers out-of-tree plugins, as cmd/scheduler does with
	// scheduler.RegistryOptions().
	Registry []app.Option

	// Flags are extra kube-scheduler command-line flags, such as
	// "--feature-gates=...". They are parsed after the defaults
	// StartScheduler sets: --leader-elect=false and --secure-port=0.
	Flags []string
}

// Scheduler is a kube-scheduler running in this process. Stop it with Stop.
type Scheduler struct {
	// sched is read only through its frameworks' thread-safe methods.
	sched  *scheduler.Scheduler
	cancel context.CancelCauseFunc
	done   chan struct{}
	err    error
	dir    string
}

// errStopped is the cause the scheduler's context is canceled with by Stop.
var errStopped = errors.New("scheduler stopped")

// StartScheduler runs kube-scheduler in this process the way its command
// does: options.NewOptions, the command's flags, app.Setup with opts.Registry,
// and app.Run on a goroutine. It returns once the scheduler's informers and
// event handlers have synced.
//
// Leader election is off: kube-scheduler's Run ends the process when it stops
// leading, which in-process means on every Stop. Secure serving is off too;
// nothing here needs the scheduler's health or metrics endpoints. Unlike the
// command, StartScheduler does not apply the logging flags: klog's settings
// are process-wide and belong to the program.
//
// ctx bounds start-up only; the scheduler runs until Stop. Only one Scheduler
// may run in a process at a time.
func StartScheduler(ctx context.Context, opts SchedulerOptions) (_ *Scheduler, err error) {
	logger := klog.FromContext(ctx)
	dir, err := os.MkdirTemp("", "gpu-gang-scheduler-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	configFile, err := configWithKubeconfig(opts.ConfigFile, opts.Kubeconfig, dir)
	if err != nil {
		return nil, err
	}

	o := options.NewOptions()
	fs := pflag.NewFlagSet("gpu-gang-scheduler", pflag.ContinueOnError)
	for _, set := range o.Flags.FlagSets {
		fs.AddFlagSet(set)
	}
	args := append([]string{"--config=" + configFile, "--leader-elect=false", "--secure-port=0"}, opts.Flags...)
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("scheduler flags: %w", err)
	}
	// The command does this before it runs, so feature gates from the
	// flags are in effect during Setup.
	if err := o.ComponentGlobalsRegistry.Set(); err != nil {
		return nil, fmt.Errorf("scheduler feature gates: %w", err)
	}
	informerName, err := cache.NewInformerName("kube-scheduler")
	if err != nil {
		return nil, err
	}
	o.InformerName = informerName

	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	cc, sched, err := app.Setup(runCtx, o, opts.Registry...)
	if err != nil {
		cancel(err)
		informerName.Release()
		return nil, fmt.Errorf("setting up the scheduler: %w", err)
	}
	if cc.LeaderElection != nil {
		cancel(errStopped)
		informerName.Release()
		return nil, errors.New("leader election cannot run in-process: kube-scheduler exits the process when it stops leading")
	}

	// As the command does: plugins that write on their own learn when the
	// scheduling loop starts.
	leading.Notify(sched)
	s := &Scheduler{sched: sched, cancel: cancel, done: make(chan struct{}), dir: dir}
	go func() {
		defer close(s.done)
		defer informerName.Release()
		// Run registers the configuration with configz and refuses to
		// start if one is there already; remove it so that a later
		// Scheduler in this process can start.
		defer configz.Delete(configzName)
		runErr := app.Run(runCtx, cc, sched)
		if !errors.Is(context.Cause(runCtx), errStopped) {
			s.err = runErr
		}
	}()

	readyCtx, readyCancel := context.WithTimeout(ctx, schedulerReadyTimeout)
	defer readyCancel()
	go func() {
		select {
		case <-s.done:
			readyCancel()
		case <-readyCtx.Done():
		}
	}()
	if err := sched.WaitForHandlersSync(readyCtx); err != nil {
		stopErr := s.Stop()
		return nil, fmt.Errorf("waiting for the scheduler to sync: %w", errors.Join(err, stopErr))
	}
	logger.Info("Scheduler is running", "config", opts.ConfigFile)
	return s, nil
}

// Done is closed when the scheduler has stopped, after Stop or on its own.
func (s *Scheduler) Done() <-chan struct{} { return s.done }

// WaitingPods calls f with every pod that waits in Permit, in every profile
// in name order: reserved on the node its spec.nodeName names, not bound.
// Each framework's waiting pods are read under its own lock, so f must not
// call back into the scheduler.
func (s *Scheduler) WaitingPods(f func(*v1.Pod)) {
	names := make([]string, 0, len(s.sched.Profiles))
	for name := range s.sched.Profiles {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		s.sched.Profiles[name].IterateOverWaitingPods(func(wp fwk.WaitingPod) { f(wp.GetPod()) })
	}
}

// Stop stops the scheduler and waits until its Run has returned. It returns
// the error Run ended with, if it ended other than through Stop.
func (s *Scheduler) Stop() error {
	s.cancel(errStopped)
	<-s.done
	return errors.Join(s.err, os.RemoveAll(s.dir))
}

// configWithKubeconfig writes a copy of the scheduler configuration file into
// dir with clientConnection.kubeconfig set, and returns the copy's path. The
// copy loses the original's comments; its content is otherwise the same.
func configWithKubeconfig(configFile, kubeconfig, dir string) (string, error) {
	return WriteSchedulerConfig(configFile, dir, func(cfg map[string]any) {
		conn, _ := cfg["clientConnection"].(map[string]any)
		if conn == nil {
			conn = map[string]any{}
		}
		conn["kubeconfig"] = kubeconfig
		cfg["clientConnection"] = conn
	})
}

// WriteSchedulerConfig writes a copy of a KubeSchedulerConfiguration file
// into dir, changed by edits in order, and returns the copy's path. Tests
// use it to run the shipped configuration with a kubeconfig or shorter
// leader-election timings. The copy loses the original's comments.
func WriteSchedulerConfig(configFile, dir string, edits ...func(cfg map[string]any)) (string, error) {
	data, err := os.ReadFile(configFile)
	if err != nil {
		return "", err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return "", fmt.Errorf("parsing %s: %w", configFile, err)
	}
	for _, edit := range edits {
		edit(cfg)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, filepath.Base(configFile))
	if err := os.WriteFile(path, out, 0o600); err != nil {
		return "", err
	}
	return path, nil
}
