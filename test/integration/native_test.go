package integration

// Kubernetes' own gang API, scheduling.k8s.io/v1beta1 PodGroups and
// Workloads, scheduled by gpu-gang.
//
// The shared control plane does not serve that API; it stands for a
// cluster without it (TestNativePodGroupsNotServed). TestNativePodGroups
// starts a second control plane that serves it, with the GenericWorkload and
// TopologyAwareWorkloadScheduling gates on, as a 1.37 cluster that turned
// the API on would. Feature gates are process-wide, and gpu-gang's scheduler
// must run with GenericWorkload off (manifests/scheduler-config.yaml says
// why), so there the scheduler is the real binary, in a process of its own,
// with the Deployment's --feature-gates=GenericWorkload=false, and the
// in-process scheduler is stopped while the second control plane runs.

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"

	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/controller/podgroup"
	"github.com/gpu-gang/gpu-gang/pkg/controlplane"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// schedulerGateFlag is the scheduler flag of manifests/deploy/deployment.yaml
// (manifests/deploy_test.go checks it is there).
const schedulerGateFlag = controlplane.SchedulerGatesFlag

// Log lines the plugin writes once at start-up.
const (
	nativeIgnoredLog   = "Native PodGroups (scheduling.k8s.io/v1beta1) are ignored"
	nativeScheduledLog = "Native PodGroups (scheduling.k8s.io/v1beta1) are scheduled as gangs"
	// compositesReadLog is what the scheduler logs once at start-up when
	// the API server serves CompositePodGroups.
	compositesReadLog = "CompositePodGroups (scheduling.k8s.io/v1alpha3) are read"
)

// protectionFinalizer is the finalizer kube-apiserver adds to every native
// PodGroup; kube-controller-manager, which does not run here, removes it
// once no active pod names the PodGroup.
const protectionFinalizer = "scheduling.k8s.io/podgroup-protection"

// useNativeControlPlane starts a control plane that serves the native API,
// CompositePodGroups included, and points the package's clients and helpers at it until t ends; the
// in-process scheduler is stopped meanwhile and started again, on the shared
// control plane, after this one has stopped and given the process its
// feature gates back.
func useNativeControlPlane(t *testing.T) {
	t.Helper()
	useNativeControlPlaneWith(t, controlplane.CompositePodGroupAPIFlags())
}

// useNativeControlPlaneWith is useNativeControlPlane with the given API
// server flags, such as controlplane.NativePodGroupDRAAPIFlags.
func useNativeControlPlaneWith(t *testing.T, flags []string) {
	t.Helper()
	pauseInProcessScheduler(t)
	cp, err := controlplane.Start(t.Context(), controlplane.Options{
		APIServerFlags: flags,
		CRDFiles:       []string{podGroupCRD},
	})
	if err != nil {
		t.Fatalf("starting a control plane that serves native PodGroups: %v", err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stopping the native control plane: %v", err)
		}
	})
	kube, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	pgs, err := pgclientset.NewForConfig(cp.JSONConfig())
	if err != nil {
		t.Fatal(err)
	}
	shared, sharedKube, sharedPG := controlPlane, kubeClient, pgClient
	controlPlane, kubeClient, pgClient = cp, kube, pgs
	t.Cleanup(func() { controlPlane, kubeClient, pgClient = shared, sharedKube, sharedPG })
}

// nativePods builds count members of the native PodGroup group, named
// <group>-0, <group>-1, ..., each requesting gpus GPUs and one CPU. They
// carry no gang label.
func (env *testEnv) nativePods(group string, count, gpus int) []*v1.Pod {
	pods := make([]*v1.Pod, count)
	for i := range pods {
		pods[i] = gangtest.InNativeGroup(env.pod(fmt.Sprintf("%s-%d", group, i)).Res(gpuRequest(gpus)).Obj(), group)
	}
	return pods
}

func (env *testEnv) createNativePodGroup(pg *schedulingv1beta1.PodGroup) *schedulingv1beta1.PodGroup {
	env.t.Helper()
	pg = pg.DeepCopy()
	pg.UID = ""
	pg.CreationTimestamp = metav1.Time{}
	created, err := kubeClient.SchedulingV1beta1().PodGroups(env.ns).Create(env.t.Context(), pg, metav1.CreateOptions{})
	if err != nil {
		env.t.Fatalf("creating native PodGroup %s: %v", pg.Name, err)
	}
	if !slices.Contains(created.Finalizers, protectionFinalizer) {
		env.t.Fatalf("PodGroup %s has finalizers %v; the API server adds %s", pg.Name, created.Finalizers, protectionFinalizer)
	}
	return created
}

// waitForNativeStatus waits until native PodGroup name's status satisfies
// ok, and returns the PodGroup.
func (env *testEnv) waitForNativeStatus(name, what string, ok func(*schedulingv1beta1.PodGroup) bool) *schedulingv1beta1.PodGroup {
	env.t.Helper()
	var pg *schedulingv1beta1.PodGroup
	err := waitFor(env.t.Context(), statusTimeout, func(ctx context.Context) (bool, error) {
		got, err := kubeClient.SchedulingV1beta1().PodGroups(env.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pg = got
		return ok(pg), nil
	})
	if err != nil {
		env.t.Fatalf("waiting %s for PodGroup %s: %s: %v; status: %+v", statusTimeout, name, what, err, pg)
	}
	return pg
}

func nativeCondition(pg *schedulingv1beta1.PodGroup, condType string, status metav1.ConditionStatus, reason string) bool {
	c := meta.FindStatusCondition(pg.Status.Conditions, condType)
	return c != nil && c.Status == status && (reason == "" || c.Reason == reason)
}

// count is how many times the process has written substr so far.
func (l *processLog) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	data, err := os.ReadFile(l.file.Name())
	if err != nil {
		return 0
	}
	return strings.Count(string(data), substr)
}

// Where the API server does not serve native PodGroups, the scheduler
// starts, says once that it ignores them, and schedules scheduler-plugins
// gangs. The API server drops spec.schedulingGroup from a pod that sets it,
// so that pod is a plain pod.
func TestNativePodGroupsNotServed(t *testing.T) {
	pauseInProcessScheduler(t)
	env := newTestEnv(t)
	p := startSchedulerProcess(t, "not-served", false, schedulerGateFlag)
	env.gpuNodes(3, 8)
	env.waitForCanary(p)
	if n := p.log.count(nativeIgnoredLog); n != 1 {
		t.Errorf("the scheduler logged %q %d times, want once", nativeIgnoredLog, n)
	}
	if !p.log.contains("does not serve scheduling.k8s.io/v1beta1 podgroups") {
		t.Errorf("the scheduler did not say why it ignores native PodGroups")
	}

	watch := env.watchGangs(map[string]int{"train": 2})
	env.createPodGroup(gangtest.MakePodGroup("train", env.ns).MinMember(2).Obj())
	gangPods := env.gangPods("train", 2, 8)
	env.createPods(gangPods...)
	env.waitForBound(bindTimeout, gangPods...)
	watch.expectNeverPartial()

	native := gangtest.InNativeGroup(env.pod("native").Res(gpuRequest(8)).Obj(), "absent")
	env.createPods(native)
	if got := env.getPod("native"); got.Spec.SchedulingGroup != nil {
		t.Fatalf("the API server kept spec.schedulingGroup without the API: %+v", got.Spec.SchedulingGroup)
	}
	env.waitForBound(bindTimeout, native)
	if n := p.log.count(nativeIgnoredLog); n != 1 {
		t.Errorf("after scheduling, the scheduler logged %q %d times, want once", nativeIgnoredLog, n)
	}
}

// Native PodGroups against a control plane that serves them, scheduled by
// the scheduler binary with the Deployment's flags, their status kept by
// the PodGroup controller.
func TestNativePodGroups(t *testing.T) {
	useNativeControlPlane(t)
	startPodGroupController(t, podgroup.DefaultMissingMembersGrace)
	log := startNativeScheduler(t)
	if !t.Run("the scheduler starts and schedules native PodGroups", func(t *testing.T) {
		if n := log.count(nativeScheduledLog); n != 1 {
			t.Errorf("the scheduler logged %q %d times, want once", nativeScheduledLog, n)
		}
		if n := log.count(compositesReadLog); n != 1 {
			t.Errorf("the scheduler logged %q %d times, want once: the native control plane serves CompositePodGroups", compositesReadLog, n)
		}
		env := newTestEnv(t)
		env.gpuNodes(1, 8)
		canary := env.pod("canary").Res(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj()
		env.createPods(canary)
		env.waitForBound(bindTimeout, canary)
	}) {
		t.FailNow()
	}

	t.Run("a native gang binds together", func(t *testing.T) {
		env := newTestEnv(t)
		env.gpuNodes(4, 8)
		watch := env.watchGangs(map[string]int{"train": 4})
		env.createNativePodGroup(gangtest.MakeNativePodGroup("train", env.ns).MinCount(4).Obj())
		pods := env.nativePods("train", 4, 8)
		env.createPods(pods...)

		nodes := env.waitForBound(bindTimeout, pods...)
		if used := sets.New(mapValues(nodes)...); used.Len() != 4 {
			t.Errorf("members share nodes: %v", nodes)
		}
		env.waitForEvent("PodGroup", "train", coscheduling.ReasonGangScheduled)
		watch.expectNeverPartial()
		pg := env.waitForNativeStatus("train", "initially scheduled", func(pg *schedulingv1beta1.PodGroup) bool {
			return nativeCondition(pg, podgroup.ConditionInitiallyScheduled, metav1.ConditionTrue, podgroup.ReasonScheduled)
		})
		if !nativeCondition(pg, podgroup.ConditionMembersCreated, metav1.ConditionTrue, podgroup.ReasonEnoughMembers) {
			t.Errorf("MembersCreated: %+v", pg.Status.Conditions)
		}
	})

	t.Run("a native PodGroup's GPU annotations apply to its members", func(t *testing.T) {
		env := newTestEnv(t)
		// The nodes that come first have a driver too old for the gang.
		env.createNodes(
			fleetNode("a-old-0", gfd(h100, "535.104.05", "12.2", "9.0")),
			fleetNode("a-old-1", gfd(h100, "535.104.05", "12.2", "9.0")),
			h100Node("b-new-0"), h100Node("b-new-1"),
		)
		watch := env.watchGangs(map[string]int{"cuda": 2})
		env.createNativePodGroup(gangtest.MakeNativePodGroup("cuda", env.ns).MinCount(2).Annotation(scheduling.AnnotationMinCUDA, "12.4").Obj())
		pods := env.nativePods("cuda", 2, 8)
		env.createPods(pods...)
		env.expectOn(env.waitForBound(bindTimeout, pods...), "b-new-0", "b-new-1")
		watch.expectNeverPartial()
	})

	t.Run("a native gang with a topology key lands inside one domain", func(t *testing.T) {
		env := newTestEnv(t)
		f := env.createFabric(2, 2, 2, 2)
		// One node of every leaf is busy until the test frees a leaf: four
		// nodes are free, but no leaf has two.
		busy := env.occupy("s0-l0-n0", "s0-l1-n0", "s1-l0-n0", "s1-l1-n0")
		watch := env.watchGangs(map[string]int{"pair": 2})
		env.createNativePodGroup(gangtest.MakeNativePodGroup("pair", env.ns).MinCount(2).Topology(leafLabel).Obj())
		pods := env.nativePods("pair", 2, 8)
		env.createPods(pods...)

		env.waitForEvent("PodGroup", "pair", coscheduling.ReasonTopologyUnsatisfied)
		env.expectStaysUnbound(staysUnboundWindow, pods...)
		env.deleteAndWait(busy[3]) // s1-l1 is whole again
		nodes := env.waitForBound(retryBindTimeout, pods...)
		if n := spans(nodes, f.leafOf); n != 1 {
			t.Errorf("the gang spans %d leaves: %v", n, nodes)
		}
		for _, node := range nodes {
			if f.leafOf[node] != "s1-l1" {
				t.Errorf("a member is on %s, outside the only leaf with room", node)
			}
		}
		watch.expectNeverPartial()
	})

	t.Run("a pod in both kinds of gang belongs to the native one", func(t *testing.T) {
		env := newTestEnv(t)
		env.gpuNodes(4, 8)
		watch := env.watchGangs(map[string]int{"labelled": 2, "native": 2})
		env.createPodGroup(gangtest.MakePodGroup("labelled", env.ns).MinMember(2).Obj())
		env.createNativePodGroup(gangtest.MakeNativePodGroup("native", env.ns).MinCount(2).Obj())
		both := gangtest.InNativeGroup(env.gangPod("both", "labelled").Res(gpuRequest(8)).Obj(), "native")
		nativeOnly := gangtest.InNativeGroup(env.pod("native-only").Res(gpuRequest(8)).Obj(), "native")
		labelled := env.gangPod("labelled-0", "labelled").Res(gpuRequest(8)).Obj()
		env.createPods(both, nativeOnly, labelled)

		env.waitForBound(bindTimeout, both, nativeOnly)
		env.waitForEvent("Pod", "both", coscheduling.ReasonTwoPodGroups)
		// The labelled gang has one member of its two: "both" does not
		// count for it.
		env.expectStaysUnbound(staysUnboundWindow, labelled)
		second := env.gangPod("labelled-1", "labelled").Res(gpuRequest(8)).Obj()
		env.createPods(second)
		env.waitForBound(bindTimeout, labelled, second)
		watch.expectNeverPartial()
	})

	t.Run("the PodGroup deleted mid-flight", func(t *testing.T) {
		env := newTestEnv(t)
		env.gpuNodes(3, 8)
		// A job's pod that finishes on its own takes the third node, so
		// the gang of three holds the two free nodes while it waits.
		job := env.pod("job").Res(gpuRequest(8)).Obj()
		job.Spec.RestartPolicy = v1.RestartPolicyNever
		env.createPods(job)
		env.waitForBound(bindTimeout, job)
		env.createNativePodGroup(gangtest.MakeNativePodGroup("train", env.ns).MinCount(3).Obj())
		pods := env.nativePods("train", 3, 8)
		env.createPods(pods...)
		env.waitForEvent("PodGroup", "train", coscheduling.ReasonGangHolding)

		// Deleting the PodGroup leaves it terminating while its pods are
		// active: it still defines their gang, and says so.
		groups := kubeClient.SchedulingV1beta1().PodGroups(env.ns)
		if err := groups.Delete(t.Context(), "train", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		env.waitForEvent("PodGroup", "train", coscheduling.ReasonPodGroupDeleting)

		// Gone for good (as when its finalizer is lifted): its members are
		// told why they wait, and the capacity it held is free for others
		// at once, long before the hold would have run out.
		removeFinalizers(t, groups, "train")
		for _, p := range pods {
			env.waitForEvent("Pod", p.Name, coscheduling.ReasonPodGroupNotFound)
		}
		probe := env.pod("probe").Res(gpuRequest(8)).Obj()
		env.createPods(probe)
		env.waitForBound(bindTimeout, probe)
		env.deleteAndWait(probe, job)
		env.expectStaysUnbound(staysUnboundWindow, pods...)

		// Recreated, it gathers its members again and they bind together.
		watch := env.watchGangs(map[string]int{"train": 3})
		env.createNativePodGroup(gangtest.MakeNativePodGroup("train", env.ns).MinCount(3).Obj())
		env.waitForBound(bindTimeout, pods...)
		watch.expectNeverPartial()
	})

	t.Run("the Workload deleted after binding", func(t *testing.T) {
		env := newTestEnv(t)
		env.gpuNodes(3, 8)
		workloads := kubeClient.SchedulingV1beta1().Workloads(env.ns)
		workload := &schedulingv1beta1.Workload{
			ObjectMeta: metav1.ObjectMeta{Name: "train"},
			Spec: schedulingv1beta1.WorkloadSpec{PodGroupTemplates: []schedulingv1beta1.PodGroupTemplate{{
				Name:             "workers",
				SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 2}},
			}}},
		}
		if _, err := workloads.Create(t.Context(), workload, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating Workload: %v", err)
		}
		env.createNativePodGroup(gangtest.MakeNativePodGroup("train-workers", env.ns).MinCount(2).Workload("train", "workers").Obj())
		pods := env.nativePods("train-workers", 2, 8)
		env.createPods(pods...)
		env.waitForBound(bindTimeout, pods...)
		env.waitForNativeStatus("train-workers", "initially scheduled", func(pg *schedulingv1beta1.PodGroup) bool {
			return nativeCondition(pg, podgroup.ConditionInitiallyScheduled, metav1.ConditionTrue, "")
		})

		if err := workloads.Delete(t.Context(), "train", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := waitFor(t.Context(), bindTimeout, func(ctx context.Context) (bool, error) {
			_, err := workloads.Get(ctx, "train", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}); err != nil {
			t.Fatalf("the Workload was not deleted: %v", err)
		}
		// The running gang is untouched, and heals: a lost member's
		// replacement binds next to it.
		env.deleteAndWait(pods[1])
		env.waitForNativeStatus("train-workers", "below minCount", func(pg *schedulingv1beta1.PodGroup) bool {
			return nativeCondition(pg, podgroup.ConditionBelowMinMember, metav1.ConditionTrue, "")
		})
		r := replacement(pods[1])
		env.createPods(r)
		env.waitForBound(repairTimeout, r)
		pg := env.waitForNativeStatus("train-workers", "back at minCount", func(pg *schedulingv1beta1.PodGroup) bool {
			return nativeCondition(pg, podgroup.ConditionBelowMinMember, metav1.ConditionFalse, podgroup.ReasonAtLeastMinMember)
		})
		if !nativeCondition(pg, podgroup.ConditionInitiallyScheduled, metav1.ConditionTrue, "") {
			t.Errorf("PodGroupInitiallyScheduled went back: %+v", pg.Status.Conditions)
		}
		if got := env.getPod(pods[0].Name); got.Spec.NodeName == "" || got.DeletionTimestamp != nil {
			t.Errorf("the member that stayed is not running: node %q, deleting %v", got.Spec.NodeName, got.DeletionTimestamp)
		}
		env.waitForEvent("PodGroup", "train-workers", podgroup.EventMinMemberRestored)
	})
}

// startNativeScheduler runs the scheduler binary with the Deployment's
// flags against the control plane until t ends, and returns its log. The
// simulator's runner (controlplane.StartSchedulerProcess) starts it: it
// returns once the scheduler leads, after its informers synced.
func startNativeScheduler(t *testing.T) *processLog {
	t.Helper()
	binary := requireBinary(t, schedulerBinary, "the scheduler (make test-binaries)")
	log := newProcessLog(t, "native")
	sched, err := controlplane.StartSchedulerProcess(t.Context(), controlplane.SchedulerProcessOptions{
		Command:    []string{binary},
		ConfigFile: *schedulerConfig,
		Kubeconfig: controlPlane.KubeconfigPath(),
		Flags:      []string{schedulerGateFlag, "--v=2"},
		Output:     log,
	})
	if err != nil {
		t.Fatalf("starting the scheduler: %v", err)
	}
	t.Cleanup(func() {
		if err := sched.Stop(); err != nil {
			t.Errorf("stopping the scheduler: %v", err)
		}
	})
	return log
}

// removeFinalizers removes a native PodGroup's finalizers and waits until
// it is gone, as when kube-controller-manager lifts the protection
// finalizer.
func removeFinalizers(t *testing.T, groups interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*schedulingv1beta1.PodGroup, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*schedulingv1beta1.PodGroup, error)
}, name string) {
	t.Helper()
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := groups.Patch(t.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("removing the finalizers of PodGroup %s: %v", name, err)
	}
	if err := waitFor(t.Context(), bindTimeout, func(ctx context.Context) (bool, error) {
		_, err := groups.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("PodGroup %s is still there: %v", name, err)
	}
}
