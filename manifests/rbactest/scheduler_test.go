package rbactest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/yaml"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling/v1alpha1"
	"github.com/gpu-gang/gpu-gang/pkg/controlplane"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling"
	"github.com/gpu-gang/gpu-gang/pkg/scheduler"
)

const (
	schedulerSA = "gpu-gang-scheduler"
	configFile  = "../scheduler-config.yaml"
	gpu         = corev1.ResourceName("nvidia.com/gpu")

	bindTimeout = 60 * time.Second
)

// impersonatingKubeconfig copies the control plane's kubeconfig with every
// user impersonating the service account.
func impersonatingKubeconfig(t *testing.T, cp *controlplane.ControlPlane, sa string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(cp.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate = saUser(sa)
		auth.ImpersonateGroups = saGroups()
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// The scheduler, run as its own service account with only the install's
// RBAC, schedules a gang: it reads the PodGroup, binds both members and
// records its Event; and that service account cannot write PodGroup status,
// the controller's job.
func TestSchedulerRunsOnItsOwnRBAC(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	p := startRBACPlane(ctx, t, schedulerSA, access{"create", "", "pods", "binding"})
	cp, adminClient, kube := p.cp, p.adminClient, p.kube
	if ok, err := allowed(ctx, kube, schedulerSA, access{"patch", "scheduling.x-k8s.io", "podgroups", "status"}, "team"); err != nil || ok {
		t.Errorf("the scheduler's service account may patch PodGroup status (%v); only the controller may", err)
	}

	// The shipped configuration, without leader election: in-process,
	// kube-scheduler cannot lead (see controlplane.StartScheduler).
	data, err := os.ReadFile(configFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["leaderElection"] = map[string]any{"leaderElect": false}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(t.TempDir(), "scheduler-config.yaml")
	if err := os.WriteFile(config, out, 0o600); err != nil {
		t.Fatal(err)
	}
	sched, err := controlplane.StartScheduler(ctx, controlplane.SchedulerOptions{
		ConfigFile: config,
		Kubeconfig: impersonatingKubeconfig(t, cp, schedulerSA),
		Registry:   scheduler.RegistryOptions(),
	})
	if err != nil {
		t.Fatalf("starting the scheduler as %s: %v", schedulerSA, err)
	}
	t.Cleanup(func() {
		if err := sched.Stop(); err != nil {
			t.Error(err)
		}
	})

	capacity := corev1.ResourceList{
		gpu:                   resource.MustParse("8"),
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-0", Labels: map[string]string{scheduling.HostnameKey: "gpu-0"}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity, Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now()},
		}},
	}
	if err := adminClient.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
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
			Spec: corev1.PodSpec{SchedulerName: "gpu-gang", Containers: []corev1.Container{{
				Name: "c", Image: "registry.invalid/train",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{gpu: resource.MustParse("4")}, Limits: corev1.ResourceList{gpu: resource.MustParse("4")}},
			}}},
		}
		if err := adminClient.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}

	var last string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, bindTimeout, true, func(ctx context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods("team").List(ctx, metav1.ListOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" {
				last = fmt.Sprintf("pod %s is not bound", p.Name)
				return false, nil
			}
		}
		events, err := kube.EventsV1().Events("team").List(ctx, metav1.ListOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, e := range events.Items {
			if e.Regarding.Kind == "PodGroup" && e.Reason == coscheduling.ReasonGangScheduled {
				return true, nil
			}
		}
		last = fmt.Sprintf("no %s Event among %d", coscheduling.ReasonGangScheduled, len(events.Items))
		return false, nil
	})
	if err != nil {
		t.Fatalf("the scheduler, as its own service account, did not schedule the gang within %s: %s", bindTimeout, last)
	}
}
