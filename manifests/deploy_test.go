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
	"github.com/gpu-gang/gpu-gang/pkg/controlplane"
)

const (
	namespace  = "gpu-gang-system"
	crdFile    = "crds/scheduling.x-k8s.io_podgroups.yaml"
	configFile = "scheduler-config.yaml"

	// The two Deployments, each under a service account of the same name.
	scheduler  = "gpu-gang-scheduler"
	controller = "gpu-gang-podgroup-controller"

	// image is what the kustomization's images: entry points the
	// Deployments at: what `make image` builds by default.
	image = "ghcr.io/gpu-gang/gpu-gang:v0.1.0"
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
		"*v1.ClusterRole /gpu-gang-podgroup-controller",
		"*v1.ClusterRole /gpu-gang-scheduler",
		"*v1.ClusterRoleBinding /gpu-gang-podgroup-controller",
		"*v1.ClusterRoleBinding /gpu-gang-scheduler",
		"*v1.ConfigMap gpu-gang-system/gpu-gang-scheduler-config-<hash>",
		"*v1.CustomResourceDefinition /podgroups.scheduling.x-k8s.io",
		"*v1.Deployment gpu-gang-system/gpu-gang-podgroup-controller",
		"*v1.Deployment gpu-gang-system/gpu-gang-scheduler",
		"*v1.Namespace /gpu-gang-system",
		"*v1.Role gpu-gang-system/gpu-gang-podgroup-controller-leader-election",
		"*v1.Role gpu-gang-system/gpu-gang-scheduler-leader-election",
		"*v1.RoleBinding gpu-gang-system/gpu-gang-podgroup-controller-leader-election",
		"*v1.RoleBinding gpu-gang-system/gpu-gang-scheduler-leader-election",
		"*v1.RoleBinding kube-system/gpu-gang-scheduler-extension-apiserver-authentication-reader",
		"*v1.Service gpu-gang-system/gpu-gang-podgroup-controller-metrics",
		"*v1.Service gpu-gang-system/gpu-gang-scheduler-metrics",
		"*v1.ServiceAccount gpu-gang-system/gpu-gang-podgroup-controller",
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

// The scheduler's ClusterRole grants what kube-scheduler's built-in roles
// grant, verb by verb, with the documented exceptions, plus reading
// PodGroups for gpu-gang's plugin; nothing more. Writing PodGroup status is
// the controller's alone.
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
	// Both PodGroup APIs alike, and CompositePodGroups: the plugin reads
	// them. It writes no PodGroup, status or finalizer, and reads no
	// Workload.
	for _, group := range []string{"scheduling.x-k8s.io", "scheduling.k8s.io"} {
		for _, verb := range []string{"get", "list", "watch"} {
			want = append(want, grant{group, "podgroups", "", verb})
		}
	}
	for _, verb := range []string{"get", "list", "watch"} {
		want = append(want, grant{"scheduling.k8s.io", "compositepodgroups", "", verb})
	}

	got := grants(one[*rbacv1.ClusterRole](t, in, scheduler).Rules)
	if diff := cmp.Diff(normalize(want), got); diff != "" {
		t.Errorf("ClusterRole %s grants (-want,+got):\n%s", scheduler, diff)
	}
}

// The scheduler runs with the GenericWorkload feature gate off, so that
// kube-scheduler's own PodGroup cycle never takes native gangs from the
// plugin, and the controller reports on the native PodGroups of exactly the
// profiles the scheduler runs.
func TestNativePodGroupSettings(t *testing.T) {
	in := build(t)
	d := one[*appsv1.Deployment](t, in, scheduler)
	gates := "--feature-gates=" + flagValue(t, container(t, d, "scheduler"), "--feature-gates")
	if gates != controlplane.SchedulerGatesFlag {
		t.Errorf("scheduler %s; want %s, as the simulator and the integration tests run it", gates, controlplane.SchedulerGatesFlag)
	}
	var profiles []string
	for _, p := range schedulerConfig(t).Profiles {
		profiles = append(profiles, p.SchedulerName)
	}
	ctrl := container(t, one[*appsv1.Deployment](t, in, controller), "podgroup-controller")
	names := strings.Split(flagValue(t, ctrl, "--scheduler-names"), ",")
	if diff := cmp.Diff(profiles, names); diff != "" {
		t.Errorf("podgroup-controller --scheduler-names against the configuration's profiles (-profiles,+flag):\n%s", diff)
	}
}

// Gang preemption, which replaces DefaultPreemption in the configuration,
// can do what it needs: evict victims, mark them first, and read the
// disruption budgets it respects.
func TestClusterRoleGrantsPreemption(t *testing.T) {
	got := map[grant]bool{}
	for _, g := range grants(one[*rbacv1.ClusterRole](t, build(t), scheduler).Rules) {
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

// The status controller's ClusterRole grants what pkg/controller/podgroup
// uses, verb by verb, and nothing more: none of the scheduler's rights to
// bind pods, write pod status or allocate ResourceClaims.
func TestControllerClusterRoleGrantsExactlyWhatIsNeeded(t *testing.T) {
	in := build(t)
	var want []grant
	for _, verb := range []string{"get", "list", "watch"} {
		// The controller's cache watches PodGroups of both APIs,
		// CompositePodGroups and the pods of gangs.
		want = append(want, grant{"scheduling.x-k8s.io", "podgroups", "", verb}, grant{"scheduling.k8s.io", "podgroups", "", verb},
			grant{"scheduling.k8s.io", "compositepodgroups", "", verb}, grant{"", "pods", "", verb})
	}
	// Node labels, through a metadata-only watch: spot reclaims.
	want = append(want, grant{"", "nodes", "", "list"}, grant{"", "nodes", "", "watch"})
	want = append(want,
		// Status().Patch, with the status subresource only, on both APIs
		// and on composites;
		// nothing touches a native PodGroup's finalizers, and nothing
		// reads Workloads.
		grant{"scheduling.x-k8s.io", "podgroups/status", "", "patch"},
		grant{"scheduling.k8s.io", "podgroups/status", "", "patch"},
		grant{"scheduling.k8s.io", "compositepodgroups/status", "", "patch"},
		// Events: events.k8s.io from the reconciler's recorder, core from
		// leader election's; each creates, then patches a repeat.
		grant{"", "events", "", "create"}, grant{"", "events", "", "patch"},
		grant{"events.k8s.io", "events", "", "create"}, grant{"events.k8s.io", "events", "", "patch"},
		// The metrics endpoint's delegated authentication and authorization.
		grant{"authentication.k8s.io", "tokenreviews", "", "create"},
		grant{"authorization.k8s.io", "subjectaccessreviews", "", "create"},
	)
	got := grants(one[*rbacv1.ClusterRole](t, in, controller).Rules)
	if diff := cmp.Diff(normalize(want), got); diff != "" {
		t.Errorf("ClusterRole %s grants (-want,+got):\n%s", controller, diff)
	}
}

// Each component's leader election reaches only its own Lease, the one the
// scheduler configuration or the controller's flags name, in the namespace
// both are told to elect in.
func TestLeaderElectionRoles(t *testing.T) {
	in := build(t)
	cfg := schedulerConfig(t)
	if !cfg.LeaderElection.LeaderElect || cfg.LeaderElection.ResourceNamespace != namespace {
		t.Errorf("scheduler leader election = %+v; want it on, in %s", cfg.LeaderElection, namespace)
	}
	ctrl := container(t, one[*appsv1.Deployment](t, in, controller), "podgroup-controller")
	if got := flagValue(t, ctrl, "--leader-elect"); got != "true" {
		t.Errorf("podgroup-controller --leader-elect=%s, want true", got)
	}
	leases := map[string]string{
		scheduler:  cfg.LeaderElection.ResourceName,
		controller: flagValue(t, ctrl, "--leader-elect-resource-name"),
	}
	for component, lease := range leases {
		want := []grant{{Group: "coordination.k8s.io", Resource: "leases", Verb: "create"}}
		for _, verb := range []string{"get", "update"} {
			want = append(want, grant{"coordination.k8s.io", "leases", lease, verb})
		}
		role := one[*rbacv1.Role](t, in, component+"-leader-election")
		if role.Namespace != namespace {
			t.Errorf("Role %s is in %q, want %s", role.Name, role.Namespace, namespace)
		}
		if diff := cmp.Diff(normalize(want), grants(role.Rules)); diff != "" {
			t.Errorf("Role %s grants (-want,+got):\n%s", role.Name, diff)
		}
	}
}

// roleBindings maps every binding of the install to the role it grants and
// the service account it grants it to; nothing else may be bound.
var roleBindings = map[string]struct{ role, serviceAccount string }{
	"ClusterRoleBinding " + scheduler:                                         {"ClusterRole " + scheduler, scheduler},
	"ClusterRoleBinding " + controller:                                        {"ClusterRole " + controller, controller},
	"RoleBinding " + scheduler + "-leader-election":                           {"Role " + scheduler + "-leader-election", scheduler},
	"RoleBinding " + controller + "-leader-election":                          {"Role " + controller + "-leader-election", controller},
	"RoleBinding " + scheduler + "-extension-apiserver-authentication-reader": {"Role extension-apiserver-authentication-reader", scheduler},
}

// No role reads secrets or uses wildcards; every binding grants its role to
// the one service account that needs it, so the controller holds none of
// the scheduler's rights and the other way round; each Deployment runs as
// its own service account.
func TestRBACHasNoSecretsOrWildcards(t *testing.T) {
	in := build(t)
	bound := map[string]bool{}
	for _, o := range in.objects {
		var rules []rbacv1.PolicyRule
		var subjects []rbacv1.Subject
		var ref rbacv1.RoleRef
		kind := fmt.Sprintf("%T", o)[len("*v1."):]
		switch r := o.(type) {
		case *rbacv1.ClusterRole:
			rules = r.Rules
		case *rbacv1.Role:
			rules = r.Rules
		case *rbacv1.ClusterRoleBinding:
			subjects, ref = r.Subjects, r.RoleRef
		case *rbacv1.RoleBinding:
			subjects, ref = r.Subjects, r.RoleRef
		}
		for _, g := range grants(rules) {
			if g.Resource == "secrets" || strings.Contains(g.Group+g.Resource+g.Verb, "*") {
				t.Errorf("%s %s grants %s", kind, objectName(o), g)
			}
		}
		if subjects == nil {
			continue
		}
		key := kind + " " + objectName(o)
		want, ok := roleBindings[key]
		if !ok {
			t.Errorf("unexpected %s", key)
			continue
		}
		bound[key] = true
		if got := ref.Kind + " " + ref.Name; got != want.role {
			t.Errorf("%s grants %s, want %s", key, got, want.role)
		}
		wantSubjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: want.serviceAccount, Namespace: namespace}}
		if diff := cmp.Diff(wantSubjects, subjects); diff != "" {
			t.Errorf("%s subjects (-want,+got):\n%s", key, diff)
		}
	}
	for key := range roleBindings {
		if !bound[key] {
			t.Errorf("no %s", key)
		}
	}
	for _, name := range []string{scheduler, controller} {
		if sa := one[*appsv1.Deployment](t, in, name).Spec.Template.Spec.ServiceAccountName; sa != name {
			t.Errorf("Deployment %s runs as %q, want %s", name, sa, name)
		}
	}
}

// Both Deployments: two replicas, the same image, the one the
// kustomization's images: entry names, containers with probes and resource
// requests and the log level set; the scheduler reads the generated
// ConfigMap, which holds manifests/scheduler-config.yaml as it is.
func TestDeployment(t *testing.T) {
	in := build(t)
	for _, name := range []string{scheduler, controller} {
		d := one[*appsv1.Deployment](t, in, name)
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
			t.Errorf("Deployment %s: replicas = %v, want 2", name, d.Spec.Replicas)
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Image != image {
				t.Errorf("container %s runs image %q, want %s", c.Name, c.Image, image)
			}
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
			if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
				t.Errorf("container %s has a writable root filesystem", c.Name)
			}
			flagValue(t, c, "--v")
		}
		if sc := d.Spec.Template.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Errorf("Deployment %s may run as root", name)
		}
	}
	d := one[*appsv1.Deployment](t, in, scheduler)

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

// Each Deployment's metrics Service selects its pods and no other's, and
// reaches a declared port through the one port name a ServiceMonitor
// scrapes.
func TestMetricsServices(t *testing.T) {
	in := build(t)
	deployments := map[string]*appsv1.Deployment{}
	for _, name := range []string{scheduler, controller} {
		deployments[name] = one[*appsv1.Deployment](t, in, name)
	}
	for _, name := range []string{scheduler, controller} {
		svc := one[*corev1.Service](t, in, name+"-metrics")
		for other, d := range deployments {
			selects := len(svc.Spec.Selector) > 0
			for k, v := range svc.Spec.Selector {
				selects = selects && d.Spec.Template.Labels[k] == v
			}
			if selects != (other == name) {
				t.Errorf("Service %s selects the pods of %s: %v, want %v", svc.Name, other, selects, other == name)
			}
		}
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "https-metrics" {
			t.Fatalf("Service %s ports = %+v, want one named https-metrics", svc.Name, svc.Spec.Ports)
		}
		if c := deployments[name].Spec.Template.Spec.Containers[0]; !hasPort(c, svc.Spec.Ports[0].TargetPort.String()) {
			t.Errorf("Service %s targets port %s, which container %s does not declare", svc.Name, svc.Spec.Ports[0].TargetPort.String(), c.Name)
		}
		if svc.Labels["app.kubernetes.io/component"] != "metrics" {
			t.Errorf("Service %s lacks the label app.kubernetes.io/component=metrics that a ServiceMonitor selects", svc.Name)
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
