package integration

// A CompositePodGroup deleted while the members of its hierarchy wait in
// Permit. Composites need the control plane of native_test.go, whose
// feature gates the scheduler must not share, so the scheduler runs as a
// process; and a member must be kept from its scheduling cycle while its
// siblings wait, which HoldForTest (holdplugin_test.go) does. The process is
// this test binary, run as kube-scheduler with gpu-gang's plugins and
// HoldForTest (holdSchedulerArg).

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/gpu-gang/gpu-gang/pkg/controlplane"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
	"github.com/gpu-gang/gpu-gang/pkg/scheduler"
)

// holdSchedulerArg, as the test binary's first argument, runs it as the
// scheduler command with HoldForTest registered, and the rest of the
// arguments as its flags.
const holdSchedulerArg = "run-scheduler-with-hold-plugin"

// compositeReleaseBound is how soon after a level of a hierarchy is deleted
// the members waiting in Permit must be released: the one second.
const compositeReleaseBound = time.Second

// init runs the scheduler command instead of the tests when the binary is
// started as startHoldSchedulerProcess starts it.
func init() {
	if len(os.Args) < 2 || os.Args[1] != holdSchedulerArg {
		return
	}
	registry := append(scheduler.RegistryOptions(), app.WithPlugin(holdPluginName,
		func(_ context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			holdHandle = h
			return holdPlugin{}, nil
		}))
	cmd := app.NewSchedulerCommand(registry...)
	cmd.SetArgs(os.Args[2:])
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// startHoldSchedulerProcess runs this binary as a scheduler process with
// the shipped configuration plus HoldForTest, the Deployment's feature
// gates, and the log at --v=4 (where a member waiting in Permit is logged),
// until t ends, and returns its log.
func startHoldSchedulerProcess(t *testing.T) *processLog {
	t.Helper()
	config := holdPluginConfig(t)
	log := newProcessLog(t, "hold-scheduler")
	sched, err := controlplane.StartSchedulerProcess(t.Context(), controlplane.SchedulerProcessOptions{
		Command:    []string{os.Args[0], holdSchedulerArg},
		ConfigFile: config,
		Kubeconfig: controlPlane.KubeconfigPath(),
		Flags:      []string{schedulerGateFlag, "--v=4"},
		Output:     log,
	})
	if err != nil {
		t.Fatalf("starting the scheduler process: %v", err)
	}
	t.Cleanup(func() {
		if err := sched.Stop(); err != nil {
			t.Errorf("stopping the scheduler process: %v", err)
		}
	})
	return log
}

// waitForLog waits up to timeout until the process log has every substr
// on one line, and returns how long that took.
func waitForLog(t *testing.T, log *processLog, timeout time.Duration, substrs ...string) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	err := waitFor(t.Context(), timeout, func(context.Context) (bool, error) {
		return log.hasLine(substrs...), nil
	})
	return time.Since(start), err
}

// hasLine reports whether the process has written a line with every substr.
func (l *processLog) hasLine(substrs ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	data, err := os.ReadFile(l.file.Name())
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		all := true
		for _, sub := range substrs {
			all = all && strings.Contains(line, sub)
		}
		if all {
			return true
		}
	}
	return false
}

// The middle level of a three-level hierarchy is deleted while its
// members wait in Permit: job (gang, minGroupCount 2) > mid (gang) > a (2
// members, reserved and waiting); job > b (1 member, kept from its cycle,
// its node held by the plan). The root's attempt ends at once: a's members
// are rejected and the plan's place for b ends, so three plain pods that
// need the three nodes bind; a's members then wait for their missing
// parent and nothing of the hierarchy binds.
func TestFaultCompositeLevelDeleted(t *testing.T) {
	useNativeControlPlane(t)
	log := startHoldSchedulerProcess(t)
	env := newTestEnv(t)
	env.gpuNodes(3, 8)

	env.createComposite(gangtest.MakeCompositePodGroup("job", env.ns).MinGroupCount(2).Workload("job", "job").Obj())
	env.createComposite(gangtest.MakeCompositePodGroup("mid", env.ns).MinGroupCount(1).Parent("job").Workload("job", "mid").Obj())
	env.createNativePodGroup(gangtest.MakeNativePodGroup("a", env.ns).MinCount(2).Parent("mid").Workload("job", "a").Obj())
	env.createNativePodGroup(gangtest.MakeNativePodGroup("b", env.ns).MinCount(1).Parent("job").Workload("job", "b").Obj())
	a, b := env.nativePods("a", 2, 8), env.nativePods("b", 1, 8)
	b[0].Labels = map[string]string{holdLabel: "true"} // native members carry no labels of their own
	members := append(a, b...)
	env.createPods(members...)
	for _, p := range a {
		if _, err := waitForLog(t, log, bindTimeout, `"Member waits for its gang"`, fmt.Sprintf(`pod="%s/%s"`, env.ns, p.Name)); err != nil {
			t.Fatalf("%s never waited in Permit: %v", p.Name, err)
		}
	}
	// The two reserved nodes and the plan's place for b-0 keep plain pods
	// off all three nodes.
	var plain []*v1.Pod
	for i := range 3 {
		plain = append(plain, env.pod(fmt.Sprintf("plain-%d", i)).Res(gpuRequest(8)).Obj())
	}
	env.createPods(plain...)
	env.expectStaysUnbound(time.Second, plain...)

	start := time.Now()
	if err := kubeClient.SchedulingV1alpha3().CompositePodGroups(env.ns).Delete(t.Context(), "mid", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting CompositePodGroup mid: %v", err)
	}
	released, err := waitForLog(t, log, bindTimeout, `"Gang gave back its reservations"`, env.ns+"/job", "rejected=2", env.ns+"/mid")
	if err != nil {
		t.Fatalf("the root's attempt never ended after its middle level was deleted: %v", err)
	}
	env.waitForBound(bindTimeout, plain...)
	free := time.Since(start)
	if ev := env.waitForEvent("CompositePodGroup", "job", coscheduling.ReasonGangRejected); !strings.Contains(ev.Note, env.ns+"/mid") {
		t.Errorf("the GangRejected Event on the root does not name the deleted level: %q", ev.Note)
	}
	t.Logf("waiting members released %s after the middle level was deleted (deadline 60 s); the plain pods bound on all three nodes %s after it",
		released.Round(time.Millisecond), free.Round(time.Millisecond))
	if released > compositeReleaseBound {
		t.Errorf("the waiting members were released %s after the deletion; the bound is %s", released, compositeReleaseBound)
	}
	env.expectStaysUnbound(staysUnboundWindow, members...)
}
