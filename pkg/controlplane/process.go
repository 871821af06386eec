package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/gpu-gang/gpu-gang/pkg/childproc"
)

// processStopTimeout is how long a scheduler process may take to exit after
// SIGTERM before it is killed.
const processStopTimeout = 10 * time.Second

// processLeaseNamespace holds the Lease a scheduler process elects itself
// leader on; kube-apiserver creates it at start-up.
const processLeaseNamespace = "kube-system"

// SchedulerProcessOptions configures StartSchedulerProcess.
type SchedulerProcessOptions struct {
	// Command is the scheduler's executable and any arguments before its
	// flags: a gpu-gang-scheduler binary, or a program that runs the
	// scheduler's command when given these arguments.
	Command []string
	// ConfigFile is a KubeSchedulerConfiguration file. The process gets a
	// copy with clientConnection.kubeconfig set to Kubeconfig and leader
	// election on a Lease in kube-system, which tells when it is ready.
	ConfigFile string
	// Kubeconfig is the kubeconfig file of the cluster to schedule for.
	Kubeconfig string
	// Flags are more kube-scheduler flags, such as its --feature-gates.
	// Serving is off (--secure-port=0).
	Flags []string
	// Output receives the process's output; nil discards it.
	Output io.Writer
}

// SchedulerProcess is a kube-scheduler running in a process of its own,
// with feature gates of its own. Stop it with Stop.
type SchedulerProcess struct {
	child *childproc.Child
	dir   string
}

// StartSchedulerProcess runs a scheduler in a process of its own and
// returns once it leads, which it does only after its informers and event
// handlers have synced: from then on it schedules. A process's feature
// gates are its own, unlike those of StartScheduler's scheduler, which
// shares the process's with an in-process kube-apiserver.
//
// ctx bounds start-up only; the process runs until Stop, and is killed if
// this process dies.
func StartSchedulerProcess(ctx context.Context, opts SchedulerProcessOptions) (_ *SchedulerProcess, err error) {
	if len(opts.Command) == 0 {
		return nil, errors.New("no scheduler command")
	}
	dir, err := os.MkdirTemp("", "gpu-gang-scheduler-process-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	var lease string
	config, err := WriteSchedulerConfig(opts.ConfigFile, dir, func(cfg map[string]any) {
		conn, _ := cfg["clientConnection"].(map[string]any)
		if conn == nil {
			conn = map[string]any{}
		}
		conn["kubeconfig"] = opts.Kubeconfig
		cfg["clientConnection"] = conn
		le, _ := cfg["leaderElection"].(map[string]any)
		if le == nil {
			le = map[string]any{}
		}
		le["leaderElect"] = true
		le["resourceNamespace"] = processLeaseNamespace
		if name, _ := le["resourceName"].(string); name != "" {
			lease = name
		} else {
			lease = "kube-scheduler"
			le["resourceName"] = lease
		}
		cfg["leaderElection"] = le
	})
	if err != nil {
		return nil, fmt.Errorf("writing the scheduler configuration: %w", err)
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", opts.Kubeconfig)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, err
	}

	args := append(append(opts.Command[1:len(opts.Command):len(opts.Command)], "--config="+config, "--secure-port=0"), opts.Flags...)
	cmd := exec.Command(opts.Command[0], args...)
	out := opts.Output
	if out == nil {
		out = io.Discard
	}
	cmd.Stdout, cmd.Stderr = out, out
	child, err := childproc.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", opts.Command[0], err)
	}
	p := &SchedulerProcess{child: child, dir: dir}

	readyCtx, cancel := context.WithTimeout(ctx, schedulerReadyTimeout)
	defer cancel()
	err = wait.PollUntilContextCancel(readyCtx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if exited, err := child.Exited(); exited {
			return false, fmt.Errorf("the scheduler exited: %v", err)
		}
		l, err := kube.CoordinationV1().Leases(processLeaseNamespace).Get(ctx, lease, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, nil // retried until the deadline
		}
		return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", nil
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("waiting for the scheduler process to lead: %w", err), p.Stop())
	}
	klog.FromContext(ctx).Info("Scheduler process is running", "pid", child.Pid(), "config", opts.ConfigFile)
	return p, nil
}

// Done is closed when the process has exited.
func (p *SchedulerProcess) Done() <-chan struct{} { return p.child.Done() }

// PeakRSS is the most resident memory the scheduler process has used so
// far, in bytes (childproc.Child.PeakRSS).
func (p *SchedulerProcess) PeakRSS() (int64, error) { return p.child.PeakRSS() }

// Stop ends the process with SIGTERM, or SIGKILL if it takes longer than
// processStopTimeout, waits for it and removes its files. It returns the
// error the process ended with, if it did not end on the signal.
func (p *SchedulerProcess) Stop() error {
	if p.child.Stop(processStopTimeout) {
		return os.RemoveAll(p.dir)
	}
	_, err := p.child.Exited()
	return errors.Join(err, os.RemoveAll(p.dir))
}
