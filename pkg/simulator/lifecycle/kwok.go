// Package lifecycle moves bound pods through Running to Succeeded with kwok,
// run as a separate process against the control plane, runs the
// resourceclaim controller that creates pods' ResourceClaims and frees
// their devices when the pods are done, and cleans up workloads between
// benchmark iterations.
package lifecycle

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/gpu-gang/gpu-gang/pkg/childproc"
)

// RunForAnnotation holds how long a pod runs once Running, as a Go duration
// string; kwok's stage reads it. Pods without it run until the end.
const RunForAnnotation = "simulator.gpu-gang.x-k8s.io/run-for"

// kwokReadyTimeout bounds the wait for kwok to answer its health check.
const kwokReadyTimeout = time.Minute

// kwokStopTimeout is how long kwok may take to exit after SIGTERM.
const kwokStopTimeout = 10 * time.Second

//go:embed stages.yaml
var stages []byte

// Kwok is a running kwok process.
type Kwok struct {
	child *childproc.Child
	dir   string
}

// KwokOptions configures StartKwok.
type KwokOptions struct {
	// Binary is the kwok executable (bin/kwok, built by hack/lib/tools.sh).
	Binary string
	// Kubeconfig is the control plane's kubeconfig file.
	Kubeconfig string
	// Log receives kwok's output; nil discards it.
	Log io.Writer
}

// StartKwok starts kwok with the simulator's stages and waits until it
// answers its health check.
func StartKwok(ctx context.Context, opts KwokOptions) (_ *Kwok, err error) {
	if _, err := os.Stat(opts.Binary); err != nil {
		return nil, fmt.Errorf("kwok binary: %w (build it with: source hack/lib/tools.sh && tools::ensure kwok)", err)
	}
	dir, err := os.MkdirTemp("", "gpu-gang-kwok-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	config := filepath.Join(dir, "kwok.yaml")
	if err := os.WriteFile(config, stages, 0o600); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command(opts.Binary,
		"--kubeconfig="+opts.Kubeconfig,
		"--config="+config,
		"--server-address="+addr,
	)
	log := opts.Log
	if log == nil {
		log = io.Discard
	}
	cmd.Stdout, cmd.Stderr = log, log
	// kwok must not outlive the simulator, even when the simulator is
	// killed: it is a child that ends with its parent.
	child, err := childproc.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("starting kwok: %w", err)
	}
	k := &Kwok{child: child, dir: dir}

	url := "http://" + addr + "/healthz"
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, kwokReadyTimeout, true, func(ctx context.Context) (bool, error) {
		if exited, err := child.Exited(); exited {
			return false, fmt.Errorf("kwok exited while starting: %v", err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("waiting for kwok: %w", err), k.Stop())
	}
	klog.FromContext(ctx).V(1).Info("kwok is running", "pid", child.Pid(), "address", addr)
	return k, nil
}

// Stop ends kwok: SIGTERM, then SIGKILL after a grace period.
func (k *Kwok) Stop() error {
	defer func() { _ = os.RemoveAll(k.dir) }()
	k.child.Stop(kwokStopTimeout)
	return nil
}

// FreePort returns a TCP port on the loopback address that was free a moment
// ago, for a process started next to the control plane to listen on.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("listener has no TCP address")
	}
	return addr.Port, nil
}
