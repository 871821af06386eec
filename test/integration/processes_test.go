package integration

// Helpers that run what the Kubeflow tests need beside the shared control
// plane and scheduler: gpu-gang's PodGroup status controller (in this
// process), kwok and the Kubeflow training-operator (as processes of their
// own). Each starts for one test and stops when the test ends.

import (
	"bytes"
	"context"
	"crypto/tls"
	"debug/buildinfo"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/gpu-gang/gpu-gang/pkg/childproc"
	"github.com/gpu-gang/gpu-gang/pkg/controller/podgroup"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/lifecycle"
)

// Binaries built by hack/lib/tools.sh (`make test-binaries`), relative to
// this package's directory.
const (
	kwokBinary             = "../../bin/kwok"
	trainingOperatorBinary = "../../bin/training-operator"
)

const (
	// systemNamespace is where the deployment runs, and where the
	// controller's leader election Lease lives.
	systemNamespace = "gpu-gang-system"
	// controllerStopTimeout bounds how long the controller may take to stop.
	controllerStopTimeout = 30 * time.Second
	// processStopTimeout is how long a process may take to exit after
	// SIGTERM before it is killed.
	processStopTimeout = 10 * time.Second
	// logTailBytes is how much of a process's log a failed test shows.
	logTailBytes = 8 << 10
)

// requireBinary returns the absolute path of a binary that hack/lib/tools.sh
// builds. Outside CI a missing binary skips the test, saying how to build
// it; in CI (CI=true) it fails the test, since the Makefile builds the
// binaries first.
func requireBinary(t *testing.T, rel, tool string) string {
	t.Helper()
	path, err := filepath.Abs(rel)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		msg := fmt.Sprintf("%s is missing; build it with `make test-binaries` (or: source hack/lib/tools.sh && tools::ensure %s)", rel, tool)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return path
}

// setControllerRuntimeLogger routes controller-runtime's logs to klog, once
// for the process: the logger is process-wide.
var setControllerRuntimeLogger sync.Once

// startPodGroupController runs gpu-gang's PodGroup status controller in this
// process, with leader election on, as cmd/podgroup-controller does, and
// stops it when the test ends. The Lease is released on stop, so the next
// test's controller takes over at once.
func startPodGroupController(t *testing.T, grace time.Duration) {
	t.Helper()
	ensureNamespace(t, systemNamespace)
	setControllerRuntimeLogger.Do(func() { ctrl.SetLogger(klog.Background()) })
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := podgroup.NewManager(ctx, controlPlane.JSONConfig(), podgroup.Options{
		LeaderElection:          true,
		LeaderElectionNamespace: systemNamespace,
		LeaderElectionID:        "gpu-gang-podgroup-controller",
		MetricsBindAddress:      "0",
		HealthProbeBindAddress:  "0",
		MissingMembersGrace:     grace,
		Workers:                 2,
		SkipNameValidation:      true,
	})
	if err != nil {
		cancel()
		t.Fatalf("building the PodGroup controller: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("PodGroup controller: %v", err)
			}
		case <-time.After(controllerStopTimeout):
			t.Errorf("the PodGroup controller did not stop within %s", controllerStopTimeout)
		}
	})
	syncCtx, syncCancel := context.WithTimeout(ctx, bindTimeout)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		t.Fatalf("the PodGroup controller's cache did not sync within %s", bindTimeout)
	}
}

func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := kubeClient.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
}

// startKwok runs kwok with the simulator's stages (pkg/simulator/lifecycle):
// pods bound to nodes annotated kwok.x-k8s.io/node=fake go Running at once,
// and Succeeded after their lifecycle.RunForAnnotation.
func startKwok(t *testing.T) {
	t.Helper()
	binary := requireBinary(t, kwokBinary, "kwok")
	log := newProcessLog(t, "kwok")
	k, err := lifecycle.StartKwok(t.Context(), lifecycle.KwokOptions{
		Binary:     binary,
		Kubeconfig: controlPlane.KubeconfigPath(),
		Log:        log,
	})
	if err != nil {
		t.Fatalf("starting kwok: %v", err)
	}
	t.Cleanup(func() {
		if err := k.Stop(); err != nil {
			t.Errorf("stopping kwok: %v", err)
		}
	})
}

// kwokNodes creates count kwok-managed nodes named n0, n1, ... with gpus
// GPUs each.
func (env *testEnv) kwokNodes(count, gpus int) []*v1.Node {
	env.t.Helper()
	nodes := make([]*v1.Node, count)
	for i := range nodes {
		n := gpuNode(fmt.Sprintf("n%d", i), gpus).Obj()
		n.Annotations = map[string]string{"kwok.x-k8s.io/node": "fake"}
		nodes[i] = n
	}
	return env.createNodes(nodes...)
}

// trainingOperator is a Kubeflow training-operator process.
type trainingOperator struct {
	child *childproc.Child
	log   *processLog
}

// Where training-operator v1.8 looks for its webhook serving certificate:
// its cert rotator waits for the file under a hard-coded /tmp path, and
// controller-runtime's webhook server reads it under os.TempDir(). They are
// the same directory unless TMPDIR is set; both are written.
var webhookCertDirs = []string{
	"/tmp/k8s-webhook-server/serving-certs",
	filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs"),
}

// startTrainingOperator runs the training-operator built into
// bin/training-operator against the control plane, with gang scheduling by
// gpu-gang and the PyTorchJob controller only, and stops it when the test
// ends. It installs the operator's CRDs (from its module, at the version
// the binary was built from), the namespace kubeflow with the empty Secret
// its cert rotator fills, and a self-signed serving certificate where the
// operator waits for one. Its webhook configurations are not installed, so
// nothing calls its webhooks.
func startTrainingOperator(t *testing.T) *trainingOperator {
	t.Helper()
	binary := requireBinary(t, trainingOperatorBinary, "training-operator")
	crds, err := trainingOperatorCRDs(binary)
	if err != nil {
		t.Fatalf("finding the training-operator's CRDs: %v", err)
	}
	if err := controlPlane.InstallCRDs(t.Context(), crds...); err != nil {
		t.Fatalf("installing the training-operator's CRDs: %v", err)
	}
	ensureNamespace(t, "kubeflow")
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "training-operator-webhook-cert", Namespace: "kubeflow"}}
	if _, err := kubeClient.CoreV1().Secrets("kubeflow").Create(t.Context(), secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating the webhook Secret: %v", err)
	}
	for _, dir := range webhookCertDirs {
		if err := ensureServingCert(dir); err != nil {
			t.Fatalf("writing the webhook serving certificate: %v", err)
		}
	}
	port, err := lifecycle.FreePort()
	if err != nil {
		t.Fatal(err)
	}

	op := &trainingOperator{log: newProcessLog(t, "training-operator")}
	cmd := exec.Command(binary,
		"--kubeconfig="+controlPlane.KubeconfigPath(),
		"--gang-scheduler-name="+schedulerName,
		"--enable-scheme=pytorchjob",
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		// Tests in other processes may run an operator too.
		"--webhook-server-port="+strconv.Itoa(port),
		"--zap-log-level=info",
	)
	cmd.Env = append(os.Environ(), "KUBEFLOW_NAMESPACE=")
	cmd.Stdout, cmd.Stderr = op.log, op.log
	// The operator must not outlive this test binary, even when it is
	// killed: it is a child process.
	if op.child, err = childproc.Start(cmd); err != nil {
		t.Fatalf("starting %s: %v", binary, err)
	}
	t.Cleanup(op.stop)
	return op
}

// stop ends the operator: SIGTERM, then SIGKILL after processStopTimeout.
func (op *trainingOperator) stop() { op.child.Stop(processStopTimeout) }

// exited reports whether the operator has exited, and how.
func (op *trainingOperator) exited() (bool, error) { return op.child.Exited() }

// trainingOperatorCRDs returns the CRD files in the training-operator module
// that binary was built from, in the module cache.
func trainingOperatorCRDs(binary string) ([]string, error) {
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	mod := info.Main
	if mod.Path != "github.com/kubeflow/training-operator" {
		return nil, fmt.Errorf("%s was built from module %s, not github.com/kubeflow/training-operator", binary, mod.Path)
	}
	modCache := os.Getenv("GOMODCACHE")
	if modCache == "" {
		out, err := exec.Command("go", "env", "GOMODCACHE").Output()
		if err != nil {
			return nil, fmt.Errorf("go env GOMODCACHE: %w", err)
		}
		modCache = strings.TrimSpace(string(out))
	}
	// The module path has no upper-case letters, so it needs no escaping.
	dir := filepath.Join(modCache, mod.Path+"@"+mod.Version, "manifests", "base", "crds")
	files, err := filepath.Glob(filepath.Join(dir, "kubeflow.org_*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no CRDs in %s; is the module in the cache? (source hack/lib/tools.sh && tools::ensure training-operator)", dir)
	}
	return files, nil
}

// ensureServingCert writes a self-signed tls.crt and tls.key into dir,
// unless a valid pair is there already: runs in other processes may share
// the directory, and rewriting it under a running operator could hand it a
// certificate and a key that do not match.
func ensureServingCert(dir string) error {
	crt, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if _, err := tls.LoadX509KeyPair(crt, key); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("training-operator.kubeflow.svc", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		path string
		data []byte
	}{{key, keyPEM}, {crt, certPEM}} {
		tmp := f.path + ".tmp-" + strconv.Itoa(os.Getpid())
		if err := os.WriteFile(tmp, f.data, 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, f.path); err != nil {
			return err
		}
	}
	return nil
}

// processLog keeps a process's output in a file in the test's temp dir and
// logs its tail if the test fails.
type processLog struct {
	mu   sync.Mutex
	file *os.File
}

func newProcessLog(t *testing.T, name string) *processLog {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	l := &processLog{file: f}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last %d bytes of %s's output (%s):\n%s", logTailBytes, name, f.Name(), l.tail())
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		_ = f.Close()
	})
	return l
}

func (l *processLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.file.Write(p)
}

// contains reports whether the process has written substr so far.
func (l *processLog) contains(substr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	data, err := os.ReadFile(l.file.Name())
	return err == nil && bytes.Contains(data, []byte(substr))
}

func (l *processLog) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	data, err := os.ReadFile(l.file.Name())
	if err != nil {
		return err.Error()
	}
	if len(data) > logTailBytes {
		data = data[len(data)-logTailBytes:]
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	return string(data)
}

var _ io.Writer = &processLog{}
