package rbactest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	upstream "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling/v1alpha1"
	"github.com/gpu-gang/gpu-gang/pkg/controller/podgroup"
	"github.com/gpu-gang/gpu-gang/pkg/controlplane"
)

const (
	installNamespace = "gpu-gang-system"
	controllerSA     = "gpu-gang-podgroup-controller"
	controllerLease  = "gpu-gang-podgroup-controller"
	crdFile          = "../crds/scheduling.x-k8s.io_podgroups.yaml"

	// Named timeouts of the waits below.
	rbacTimeout   = 30 * time.Second
	statusTimeout = 60 * time.Second
)

// installRBAC creates the install's namespace, service accounts, roles and
// bindings, as the kustomization builds them, and nothing else: no
// component runs in a pod here.
func installRBAC(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), "..")
	if err != nil {
		t.Fatalf("kustomize build manifests/: %v", err)
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	decoder := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	created := 0
	for _, res := range resMap.Resources() {
		data, err := res.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		obj, _, err := decoder.Decode(data, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		switch obj.(type) {
		case *corev1.Namespace, *corev1.ServiceAccount, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *rbacv1.Role, *rbacv1.RoleBinding:
			if err := c.Create(ctx, obj.(client.Object)); err != nil {
				t.Fatalf("creating %s: %v", res.CurId(), err)
			}
			created++
		}
	}
	if created == 0 {
		t.Fatal("the kustomization holds no RBAC objects")
	}
}

// saUser is the user name the API server gives a service account of the
// install, and saGroups the groups.
func saUser(name string) string {
	return fmt.Sprintf("system:serviceaccount:%s:%s", installNamespace, name)
}

func saGroups() []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + installNamespace, "system:authenticated"}
}

// serviceAccount impersonates a service account of the install, with the
// groups the API server gives service account tokens.
func serviceAccount(cfg *rest.Config, name string) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: saUser(name), Groups: saGroups()}
	return cfg
}

// access is what a request does: a verb on a resource of a group, with an
// optional subresource.
type access struct{ verb, group, resource, subresource string }

func (a access) String() string {
	return fmt.Sprintf("%s %s/%s %s", a.verb, a.group, a.resource, a.subresource)
}

// allowed asks the API server whether the service account may do a in
// namespace.
func allowed(ctx context.Context, kube kubernetes.Interface, sa string, a access, namespace string) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   saUser(sa),
		Groups: saGroups(),
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource,
		},
	}}
	res, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return res.Status.Allowed, nil
}

// rbacPlane is a control plane that authorizes with RBAC and holds the
// install's RBAC objects, with an admin's clients.
type rbacPlane struct {
	cp          *controlplane.ControlPlane
	admin       *rest.Config
	adminClient client.Client
	kube        kubernetes.Interface
}

// startRBACPlane starts a control plane that authorizes with RBAC, creates
// the install's RBAC objects, and waits until they let the service account
// sa do what its role exists for in namespace team: the RBAC authorizer
// reads roles through informers, so they take effect a moment after they
// are created.
func startRBACPlane(ctx context.Context, t *testing.T, sa string, its access) *rbacPlane {
	t.Helper()
	cp, err := controlplane.Start(ctx, controlplane.Options{
		APIServerFlags: []string{"--authorization-mode=RBAC"},
		CRDFiles:       []string{crdFile},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	p := &rbacPlane{cp: cp, admin: controlplane.JSONConfig(cp.RESTConfig())}
	if p.adminClient, err = client.New(p.admin, client.Options{Scheme: podgroup.Scheme()}); err != nil {
		t.Fatal(err)
	}
	if p.kube, err = kubernetes.NewForConfig(p.admin); err != nil {
		t.Fatal(err)
	}
	installRBAC(ctx, t, p.adminClient)
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, rbacTimeout, true, func(ctx context.Context) (bool, error) {
		return allowed(ctx, p.kube, sa, its, "team")
	})
	if err != nil {
		t.Fatalf("the ClusterRole of %s never let it %s: %v", sa, its, err)
	}
	return p
}

// The PodGroup status controller, run as its own service account with only
// the install's RBAC, elects a leader, writes PodGroup status and records
// Events; and that service account holds none of the scheduler's rights.
func TestControllerRunsOnItsOwnRBAC(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := startRBACPlane(ctx, t, controllerSA, access{"patch", "scheduling.x-k8s.io", "podgroups", "status"})
	admin, adminClient, kube := p.admin, p.adminClient, p.kube
	for _, denied := range []access{
		{"create", "", "pods", "binding"},
		{"patch", "", "pods", "status"},
		{"update", "scheduling.x-k8s.io", "podgroups", ""},
		{"create", "resource.k8s.io", "resourceclaims", ""},
		{"get", "", "secrets", ""},
	} {
		ok, err := allowed(ctx, kube, controllerSA, denied, "team")
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			t.Errorf("the controller's service account may %s; it must not", denied)
		}
	}

	mgr, err := podgroup.NewManager(ctx, serviceAccount(admin, controllerSA), podgroup.Options{
		LeaderElection:          true,
		LeaderElectionNamespace: installNamespace,
		LeaderElectionID:        controllerLease,
		MetricsBindAddress:      "0",
		HealthProbeBindAddress:  "0",
		MissingMembersGrace:     podgroup.DefaultMissingMembersGrace,
		Workers:                 2,
		SkipNameValidation:      true,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("the controller stopped with %v", err)
		}
	})

	// A gang of two: both members exist, so the controller moves it from
	// Pending to Scheduling and records a GangScheduling Event.
	if err := adminClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}); err != nil {
		t.Fatal(err)
	}
	pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: "team"}}
	pg.Spec.MinMember = 2
	if err := adminClient.Create(ctx, pg); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("g-", i), Namespace: "team", Labels: map[string]string{scheduling.PodGroupLabel: "g"}},
			Spec:       corev1.PodSpec{SchedulerName: "gpu-gang", Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/train"}}},
		}
		if err := adminClient.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}

	var lastErr error
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, statusTimeout, true, func(ctx context.Context) (bool, error) {
		got := &v1alpha1.PodGroup{}
		if err := adminClient.Get(ctx, client.ObjectKeyFromObject(pg), got); err != nil {
			lastErr = err
			return false, nil
		}
		if got.Status.Phase != upstream.PodGroupScheduling {
			lastErr = fmt.Errorf("PodGroup phase %q, want %s", got.Status.Phase, upstream.PodGroupScheduling)
			return false, nil
		}
		events, err := kube.EventsV1().Events("team").List(ctx, metav1.ListOptions{})
		if err != nil {
			lastErr = err
			return false, nil
		}
		found := false
		for _, e := range events.Items {
			found = found || (e.Regarding.Name == "g" && e.Reason == podgroup.EventGangScheduling)
		}
		if !found {
			lastErr = fmt.Errorf("no %s Event on PodGroup team/g among %d Events", podgroup.EventGangScheduling, len(events.Items))
			return false, nil
		}
		lease := &coordinationv1.Lease{}
		if err := adminClient.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: controllerLease}, lease); err != nil {
			lastErr = fmt.Errorf("the controller's Lease: %w", err)
			return false, nil
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			lastErr = errors.New("the controller's Lease has no holder")
			return false, nil
		}
		// Leader election records its own Event on the Lease, in the core
		// group.
		core, err := kube.CoreV1().Events(installNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			lastErr = err
			return false, nil
		}
		for _, e := range core.Items {
			if e.InvolvedObject.Kind == "Lease" && e.InvolvedObject.Name == controllerLease && e.Reason == "LeaderElection" {
				return true, nil
			}
		}
		lastErr = fmt.Errorf("no LeaderElection Event on the Lease among %d core Events", len(core.Items))
		return false, nil
	})
	if err != nil {
		t.Fatalf("the controller, as its own service account, did not do its job within %s: %v", statusTimeout, lastErr)
	}
}
