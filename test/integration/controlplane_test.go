package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpu-gang/gpu-gang/pkg/controlplane"
)

// The kubeconfig file the control plane writes reaches its API server.
func TestKubeconfigReachesAPIServer(t *testing.T) {
	cfg, err := clientcmd.BuildConfigFromFlags("", controlPlane.KubeconfigPath())
	if err != nil {
		t.Fatalf("loading %s: %v", controlPlane.KubeconfigPath(), err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Namespaces().Get(t.Context(), metav1.NamespaceDefault, metav1.GetOptions{}); err != nil {
		t.Errorf("reading the default namespace through the kubeconfig: %v", err)
	}
}

const widgetCRD = `# a leading comment and an empty document, as generators write
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.integration.gpu-gang.x-k8s.io
spec:
  group: integration.gpu-gang.x-k8s.io
  names:
    kind: Widget
    listKind: WidgetList
    plural: widgets
    singular: widget
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size:
                type: integer
`

// InstallCRDs returns only once the new resource is served, and installing
// the same file again updates it in place.
func TestInstallCRDs(t *testing.T) {
	file := filepath.Join(t.TempDir(), "widgets.yaml")
	if err := os.WriteFile(file, []byte(widgetCRD), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := controlPlane.InstallCRDs(t.Context(), file); err != nil {
			t.Fatalf("InstallCRDs: %v", err)
		}
	}

	env := newTestEnv(t)
	dyn, err := dynamic.NewForConfig(controlplane.JSONConfig(controlPlane.RESTConfig()))
	if err != nil {
		t.Fatal(err)
	}
	widgets := dyn.Resource(schema.GroupVersionResource{Group: "integration.gpu-gang.x-k8s.io", Version: "v1", Resource: "widgets"}).Namespace(env.ns)
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "integration.gpu-gang.x-k8s.io/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"name": "w"},
		"spec":       map[string]any{"size": int64(3)},
	}}
	if _, err := widgets.Create(t.Context(), w, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a Widget right after InstallCRDs returned: %v", err)
	}
}

// A file without a CRD in it is an error, not a silent no-op.
func TestInstallCRDsRejectsOtherKinds(t *testing.T) {
	file := filepath.Join(t.TempDir(), "configmap.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := controlPlane.InstallCRDs(t.Context(), file); err == nil {
		t.Error("InstallCRDs accepted a file holding a ConfigMap")
	}
}

// The scheduler stops cleanly and a new one starts in the same process, as
// the simulator does between runs.
func TestSchedulerRestarts(t *testing.T) {
	if err := gangScheduler.Stop(); err != nil {
		t.Fatalf("stopping the scheduler: %v", err)
	}
	gangScheduler = nil
	sched, err := startScheduler(t.Context())
	if err != nil {
		t.Fatalf("starting a second scheduler in the process: %v", err)
	}
	gangScheduler = sched

	env := newTestEnv(t)
	env.gpuNodes(1, 8)
	pod := env.pod("after-restart").Res(gpuRequest(1)).Obj()
	env.createPods(pod)
	env.waitForBound(bindTimeout, pod)
}

// A mistyped kube-apiserver flag is an error from Start, not a panic, and
// leaves the running control plane alone.
func TestStartRejectsBadFlag(t *testing.T) {
	cp, err := controlplane.Start(t.Context(), controlplane.Options{APIServerFlags: []string{"--no-such-flag=1"}})
	if err == nil {
		_ = cp.Stop()
		t.Fatal("Start accepted an unknown kube-apiserver flag")
	}
	if !strings.Contains(err.Error(), "no-such-flag") {
		t.Errorf("Start's error does not name the bad flag: %v", err)
	}
	if _, err := kubeClient.CoreV1().Namespaces().Get(t.Context(), metav1.NamespaceDefault, metav1.GetOptions{}); err != nil {
		t.Errorf("the shared control plane stopped answering: %v", err)
	}
}
