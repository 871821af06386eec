// Package manifests_test checks the install kustomization in this
// directory: it builds as `kubectl apply -k manifests/` would, every object
// decodes strictly, and the RBAC grants exactly what gpu-gang needs. It also
// checks the examples.
package manifests_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy"

	pgv1alpha1 "github.com/gpu-gang/gpu-gang/pkg/apis/scheduling/v1alpha1"
)

const (
	namespace      = "gpu-gang-system"
	serviceAccount = "gpu-gang-scheduler"
	crdFile        = "crds/scheduling.x-k8s.io_podgroups.yaml"
	configFile     = "scheduler-config.yaml"
)

// installed is what the kustomization builds, decoded.
type installed struct {
	objects []runtime.Object
}

// build runs kustomize on this directory with kubectl's defaults, the load
// restrictor among them, and decodes every object strictly: an unknown or
// misspelt field fails the test.
func build(t *testing.T) installed {
	t.Helper()
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), ".")
	if err != nil {
		t.Fatalf("kustomize build manifests/: %v", err)
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	var out installed
	for _, res := range resMap.Resources() {
		data, err := res.AsYAML()
		if err != nil {
			t.Fatalf("%s: %v", res.CurId(), err)
		}
		obj, _, err := decoder.Decode(data, nil, nil)
		if err != nil {
			t.Errorf("%s does not decode strictly: %v", res.CurId(), err)
			continue
		}
		out.objects = append(out.objects, obj)
	}
	return out
}

// one returns the only object of type T named name, failing the test if
// there is not exactly one.
func one[T runtime.Object](t *testing.T, in installed, name string) T {
	t.Helper()
	var found []T
	for _, o := range in.objects {
		if typed, ok := o.(T); ok && objectName(o) == name {
			found = append(found, typed)
		}
	}
	if len(found) != 1 {
		var zero T
		t.Fatalf("want one %T named %s, found %d", zero, name, len(found))
	}
	return found[0]
}

func objectName(o runtime.Object) string {
	if m, ok := o.(interface{ GetName() string }); ok {
		return m.GetName()
	}
	return ""
}

// Every object of the install, by kind, namespace and name: nothing missing
// and nothing unexpected.
func TestInstallObjects(t *testing.T) {
	in := build(t)
	var got []string
	for _, o := range in.objects {
		m := o.(interface {
			GetName() string
			GetNamespace() string
		})
		name := m.GetName()
		if _, ok := o.(*corev1.ConfigMap); ok {
			// The generator appends a hash of the content.
			name = name[:strings.LastIndex(name, "-")] + "-<hash>"
		}
		got = append(got, fmt.Sprintf("%T %s/%s", o, m.GetNamespace(), name))
	}
	sort.Strings(got)
	want := []string{
		"*v1.ClusterRole /gpu-gang-metrics-reader",
		"*v1.ClusterRole /gpu-gang-scheduler",
		"*v1.ClusterRoleBinding /gpu-gang-scheduler",
		"*v1.ConfigMap gpu-gang-system/gpu-gang-scheduler-config-<hash>",
		"*v1.CustomResourceDefinition /podgroups.scheduling.x-k8s.io",
		"*v1.Deployment gpu-gang-system/gpu-gang-scheduler",
		"*v1.Namespace /gpu-gang-system",
		"*v1.Role gpu-gang-system/gpu-gang-leader-election",
		"*v1.RoleBinding gpu-gang-system/gpu-gang-leader-election",
		"*v1.RoleBinding kube-system/gpu-gang-scheduler-extension-apiserver-authentication-reader",
		"*v1.Service gpu-gang-system/gpu-gang-scheduler-metrics",
		"*v1.ServiceAccount gpu-gang-system/gpu-gang-scheduler",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("objects (-want,+got):\n%s", diff)
	}
}

// grant is one verb on one resource (or URL), optionally on one name.
type grant struct {
	Group, Resource, Name, Verb string
}

func (g grant) String() string {
	s := fmt.Sprintf("%s %s/%s", g.Verb, g.Group, g.Resource)
	if g.Name != "" {
		s += " " + g.Name
	}
	return s
}

func grants(rules []rbacv1.PolicyRule) []grant {
	var out []grant
	for _, r := range rules {
		for _, verb := range r.Verbs {
			for _, url := range r.NonResourceURLs {
				out = append(out, grant{Resource: url, Verb: verb})
			}
			for _, group := range r.APIGroups {
				for _, res := range r.Resources {
					if len(r.ResourceNames) == 0 {
						out = append(out, grant{group, res, "", verb})
					}
					for _, name := range r.ResourceNames {
						out = append(out, grant{group, res, name, verb})
					}
				}
			}
		}
	}
	return normalize(out)
}

func normalize(gs []grant) []grant {
	sort.Slice(gs, func(i, j int) bool { return gs[i].String() < gs[j].String() })
	return slices.Compact(gs)
}

// builtInSchedulerGrants are the grants of kube-scheduler's built-in
// ClusterRoles in the Kubernetes version gpu-gang is built with, under its
// default feature gates.
func builtInSchedulerGrants(t *testing.T) []grant {
	t.Helper()
	var out []grant
	found := 0
	for _, role := range bootstrappolicy.ClusterRoles() {
		if role.Name == "system:kube-scheduler" || role.Name == "system:volume-scheduler" {
			out = append(out, grants(role.Rules)...)
			found++
		}
	}
	if found != 2 {
		t.Fatalf("found %d of the built-in scheduler roles, want 2", found)
	}
	return normalize(out)
}

// The ClusterRole grants what kube-scheduler's built-in roles grant, verb by
// verb, with the documented exceptions, plus what gpu-gang's plugin and
// controller need on PodGroups; nothing more.
func TestClusterRoleGrantsExactlyWhatIsNeeded(t *testing.T) {
	in := build(t)
	var want []grant
	for _, g := range builtInSchedulerGrants(t) {
		switch {
		case g.Group == "coordination.k8s.io":
			// Leases are granted by name in the namespaced Role instead;
			// leasecandidates serve coordinated leader election, which is
			// off.
		default:
			want = append(want, g)
		}
	}
	// Both PodGroup APIs alike: the plugin and the controller read them,
	// the controller patches their status. Nothing writes a PodGroup or
	// its finalizers, and nothing reads Workloads.
	for _, group := range []string{"scheduling.x-k8s.io", "scheduling.k8s.io"} {
		for _, verb := range []string{"get", "list", "watch"} {
			want = append(want, grant{group, "podgroups", "", verb})
		}
		want = append(want, grant{group, "podgroups/status", "", "patch"})
	}

	got := grants(one[*rbacv1.ClusterRole](t, in, "gpu-gang-scheduler").Rules)
	if diff := cmp.Diff(normalize(want), got); diff != "" {
		t.Errorf("ClusterRole gpu-gang-scheduler grants (-want,+got):\n%s", diff)
	}
}

// The scheduler runs with the GenericWorkload feature gate off, so that
// kube-scheduler's own PodGroup cycle never takes native gangs from the
// plugin, and the controller reports on the native PodGroups of exactly the
// profiles the scheduler runs.
func TestNativePodGroupSettings(t *testing.T) {
	in := build(t)
	d := one[*appsv1.Deployment](t, in, "gpu-gang-scheduler")
	gates := flagValue(t, container(t, d, "scheduler"), "--feature-gates")
	if !slices.Contains(strings.Split(gates, ","), "GenericWorkload=false") {
		t.Errorf("scheduler --feature-gates=%s; want GenericWorkload=false among them", gates)
	}
	var profiles []string
	for _, p := range schedulerConfig(t).Profiles {
		profiles = append(profiles, p.SchedulerName)
	}
	names := strings.Split(flagValue(t, container(t, d, "podgroup-controller"), "--scheduler-names"), ",")
	if diff := cmp.Diff(profiles, names); diff != "" {
		t.Errorf("podgroup-controller --scheduler-names against the configuration's profiles (-profiles,+flag):\n%s", diff)
	}
}

// Gang preemption, which replaces DefaultPreemption in the configuration,
// can do what it needs: evict victims, mark them first, and read the
// disruption budgets it respects.
func TestClusterRoleGrantsPreemption(t *testing.T) {
	got := map[grant]bool{}
	for _, g := range grants(one[*rbacv1.ClusterRole](t, build(t), "gpu-gang-scheduler").Rules) {
		got[g] = true
	}
	for _, g := range []grant{
		{Group: "", Resource: "pods", Verb: "delete"},
		{Group: "", Resource: "pods/status", Verb: "patch"},
		{Group: "policy", Resource: "poddisruptionbudgets", Verb: "list"},
		{Group: "policy", Resource: "poddisruptionbudgets", Verb: "watch"},
	} {
		if !got[g] {
			t.Errorf("the scheduler's ClusterRole lacks %s, which gang preemption needs", g)
		}
	}
}

// Leader election reaches only the two Leases the containers elect on, and
// those are the Leases the scheduler configuration and the controller's
// flags name.
func TestLeaderElectionRole(t *testing.T) {
	in := build(t)
	cfg := schedulerConfig(t)
	if !cfg.LeaderElection.LeaderElect || cfg.LeaderElection.ResourceNamespace != namespace {
		t.Errorf("scheduler leader election = %+v; want it on, in %s", cfg.LeaderElection, namespace)
	}
	controllerLease := flagValue(t, container(t, one[*appsv1.Deployment](t, in, "gpu-gang-scheduler"), "podgroup-controller"), "--leader-elect-resource-name")
	want := []grant{{Group: "coordination.k8s.io", Resource: "leases", Verb: "create"}}
	for _, name := range []string{cfg.LeaderElection.ResourceName, controllerLease} {
		for _, verb := range []string{"get", "update"} {
			want = append(want, grant{"coordination.k8s.io", "leases", name, verb})
		}
	}
	role := one[*rbacv1.Role](t, in, "gpu-gang-leader-election")
	if role.Namespace != namespace {
		t.Errorf("Role %s is in %q, want %s", role.Name, role.Namespace, namespace)
	}
	if diff := cmp.Diff(normalize(want), grants(role.Rules)); diff != "" {
		t.Errorf("Role gpu-gang-leader-election grants (-want,+got):\n%s", diff)
	}
}

// No role reads secrets or uses wildcards, and every binding is to the
// service account the Deployment runs as.
func TestRBACHasNoSecretsOrWildcards(t *testing.T) {
	in := build(t)
	for _, o := range in.objects {
		var rules []rbacv1.PolicyRule
		var subjects []rbacv1.Subject
		switch r := o.(type) {
		case *rbacv1.ClusterRole:
			rules = r.Rules
		case *rbacv1.Role:
			rules = r.Rules
		case *rbacv1.ClusterRoleBinding:
			subjects = r.Subjects
		case *rbacv1.RoleBinding:
			subjects = r.Subjects
		}
		for _, g := range grants(rules) {
			if g.Resource == "secrets" || strings.Contains(g.Group+g.Resource+g.Verb, "*") {
				t.Errorf("%s %s grants %s", o.GetObjectKind().GroupVersionKind().Kind, objectName(o), g)
			}
		}
		for _, s := range subjects {
			if s.Kind != rbacv1.ServiceAccountKind || s.Name != serviceAccount || s.Namespace != namespace {
				t.Errorf("%s %s binds %+v; want only ServiceAccount %s/%s", o.GetObjectKind().GroupVersionKind().Kind, objectName(o), s, namespace, serviceAccount)
			}
		}
	}
	if sa := one[*appsv1.Deployment](t, in, "gpu-gang-scheduler").Spec.Template.Spec.ServiceAccountName; sa != serviceAccount {
		t.Errorf("the Deployment runs as %q, want %s", sa, serviceAccount)
	}
}

// Two replicas, each container with probes and resource requests, the
// scheduler reading the generated ConfigMap, which holds
// manifests/scheduler-config.yaml as it is.
func TestDeployment(t *testing.T) {
	in := build(t)
	d := one[*appsv1.Deployment](t, in, "gpu-gang-scheduler")
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %v, want 2", d.Spec.Replicas)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.LivenessProbe == nil || c.ReadinessProbe == nil {
			t.Errorf("container %s lacks a liveness or readiness probe", c.Name)
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if _, ok := c.Resources.Requests[r]; !ok {
				t.Errorf("container %s requests no %s", c.Name, r)
			}
		}
		for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
			if p != nil && p.HTTPGet != nil && !hasPort(c, p.HTTPGet.Port.String()) {
				t.Errorf("container %s probes port %s, which it does not declare", c.Name, p.HTTPGet.Port.String())
			}
		}
	}
	if got := flagValue(t, container(t, d, "podgroup-controller"), "--leader-elect"); got != "true" {
		t.Errorf("podgroup-controller --leader-elect=%s, want true", got)
	}

	var cm *corev1.ConfigMap
	for _, o := range in.objects {
		if c, ok := o.(*corev1.ConfigMap); ok {
			cm = c
		}
	}
	if cm == nil {
		t.Fatal("no ConfigMap")
	}
	want, err := os.ReadFile(configFile)
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Data[configFile]; got != string(want) {
		t.Errorf("ConfigMap %s holds a different %s", cm.Name, configFile)
	}
	var mounted bool
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == cm.Name {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("the Deployment does not mount ConfigMap %s", cm.Name)
	}
	sched := container(t, d, "scheduler")
	if got := flagValue(t, sched, "--config"); !strings.HasSuffix(got, "/"+configFile) {
		t.Errorf("scheduler --config=%s; want the mounted %s", got, configFile)
	}
}

// The metrics Service selects the Deployment's pods and reaches a declared
// port of each container.
func TestMetricsService(t *testing.T) {
	in := build(t)
	d := one[*appsv1.Deployment](t, in, "gpu-gang-scheduler")
	svc := one[*corev1.Service](t, in, "gpu-gang-scheduler-metrics")
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("the Service selects %s=%s, which the Deployment's pods do not have", k, v)
		}
	}
	for _, c := range []string{"scheduler", "podgroup-controller"} {
		reached := false
		for _, p := range svc.Spec.Ports {
			reached = reached || hasPort(container(t, d, c), p.TargetPort.String())
		}
		if !reached {
			t.Errorf("the Service reaches no port of container %s", c)
		}
	}
}

// The CRD installed is the generated one.
func TestCRDIsTheGeneratedOne(t *testing.T) {
	in := build(t)
	data, err := os.ReadFile(crdFile)
	if err != nil {
		t.Fatal(err)
	}
	want := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, want); err != nil {
		t.Fatal(err)
	}
	got := one[*apiextensionsv1.CustomResourceDefinition](t, in, want.Name)
	got.Labels = nil // the kustomization adds app.kubernetes.io/part-of
	got.TypeMeta = want.TypeMeta
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CRD (-generated,+installed):\n%s", diff)
	}
}

// operatorKinds are the kinds of the examples that need an operator's CRD,
// which this module does not have the Go types of.
var operatorKinds = map[string]bool{
	"kubeflow.org/v1 PyTorchJob":                           true,
	"kubeflow.org/v2beta1 MPIJob":                          true,
	"trainer.kubeflow.org/v1alpha1 ClusterTrainingRuntime": true,
	"trainer.kubeflow.org/v1alpha1 TrainJob":               true,
}

// Every example decodes: built-in kinds and PodGroups strictly, operator
// kinds by name. Every pod in them names gpu-gang as its scheduler, except
// in MPIJobs, whose operator sets it, and every PodGroup a pod joins is in
// the same file.
func TestExamples(t *testing.T) {
	files, err := filepath.Glob("examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(pgv1alpha1.AddToScheme(scheme))
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			podGroups := map[string]bool{}
			joined := map[string]bool{}
			reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
			for {
				doc, err := reader.Read()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				obj := map[string]any{}
				if err := yaml.Unmarshal(doc, &obj); err != nil {
					t.Fatal(err)
				}
				if len(obj) == 0 {
					continue
				}
				gvk := fmt.Sprintf("%v %v", obj["apiVersion"], obj["kind"])
				if !operatorKinds[gvk] {
					if _, _, err := decoder.Decode(doc, nil, nil); err != nil {
						t.Errorf("%s does not decode strictly: %v", gvk, err)
					}
				}
				if gvk == "scheduling.x-k8s.io/v1alpha1 PodGroup" {
					podGroups[obj["metadata"].(map[string]any)["name"].(string)] = true
				}
				for _, pod := range podSpecs(obj) {
					if name, _ := pod.spec["schedulerName"].(string); name != "gpu-gang" && obj["kind"] != "MPIJob" {
						t.Errorf("%s: a pod at %s has schedulerName %q, want gpu-gang", gvk, pod.path, name)
					}
					if group, ok := pod.labels["scheduling.x-k8s.io/pod-group"].(string); ok {
						joined[group] = true
					}
				}
			}
			for group := range joined {
				if !podGroups[group] {
					t.Errorf("pods join PodGroup %s, which the file does not create", group)
				}
			}
		})
	}
}

// podSpec is a pod template found in an object.
type podSpec struct {
	path   string
	spec   map[string]any
	labels map[string]any
}

// podSpecs finds the pod templates in an object: every "template" whose
// spec has containers.
func podSpecs(obj map[string]any) []podSpec {
	var out []podSpec
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if tmpl, ok := v["template"].(map[string]any); ok {
				if spec, ok := tmpl["spec"].(map[string]any); ok {
					if _, ok := spec["containers"]; ok {
						meta, _ := tmpl["metadata"].(map[string]any)
						labels, _ := meta["labels"].(map[string]any)
						out = append(out, podSpec{path: path + ".template", spec: spec, labels: labels})
					}
				}
			}
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(path+"."+k, v[k])
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		}
	}
	walk("", obj)
	return out
}

// schedulerConfig reads the parts of manifests/scheduler-config.yaml this
// test checks.
func schedulerConfig(t *testing.T) (cfg struct {
	LeaderElection struct {
		LeaderElect       bool   `json:"leaderElect"`
		ResourceNamespace string `json:"resourceNamespace"`
		ResourceName      string `json:"resourceName"`
	} `json:"leaderElection"`
	Profiles []struct {
		SchedulerName string `json:"schedulerName"`
	} `json:"profiles"`
}) {
	t.Helper()
	data, err := os.ReadFile(configFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func container(t *testing.T, d *appsv1.Deployment, name string) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("Deployment %s has no container %s", d.Name, name)
	return corev1.Container{}
}

// flagValue returns the value of --name=value in the container's command
// or args.
func flagValue(t *testing.T, c corev1.Container, name string) string {
	t.Helper()
	for _, a := range append(append([]string{}, c.Command...), c.Args...) {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	t.Fatalf("container %s has no %s flag", c.Name, name)
	return ""
}

func hasPort(c corev1.Container, port string) bool {
	for _, p := range c.Ports {
		if p.Name == port || fmt.Sprint(p.ContainerPort) == port {
			return true
		}
	}
	return false
}
