package integration

import (
	"context"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/controlplane"
	"github.com/gpu-gang/gpu-gang/pkg/scheduler"
)

// A member that is slow to reach its scheduling cycle, while its siblings
// already reserved their nodes and wait in Permit, is what the faults
// "a waiting member is deleted" and "a node is deleted under a waiting gang"
// need. Nothing in the shipped profile delays one member of a gang on
// purpose, so these tests run the scheduler with one more PreEnqueue plugin:
// HoldForTest keeps a pod labelled holdLabel=true out of the active queue
// until the label goes. Everything else (the gang plugin, the in-tree
// plugins, the API server, binding) is what the shipped configuration runs.

const (
	holdPluginName = "HoldForTest"
	holdLabel      = "integration.gpu-gang.x-k8s.io/hold"
)

type holdPlugin struct{}

// holdHandle is the framework handle of the running HoldForTest, through
// which release activates a released pod at once.
var holdHandle fwk.Handle

var (
	_ fwk.PreEnqueuePlugin  = holdPlugin{}
	_ fwk.EnqueueExtensions = holdPlugin{}
)

func (holdPlugin) Name() string { return holdPluginName }

// PreEnqueue holds a labelled pod back.
func (holdPlugin) PreEnqueue(_ context.Context, pod *v1.Pod) *fwk.Status {
	if pod.Labels[holdLabel] == "true" {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "held by the test")
	}
	return nil
}

// EventsToRegister asks for the pod's own label changes: removing the label
// releases it. The queue files an update of the pod itself under TargetPod;
// UnscheduledPod is another pending pod's update, and with it the release
// rested on release's Activate alone, which fails when it runs before the
// queue holds the new labels (the test then timed out about one run in six).
func (holdPlugin) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{{
		Event: fwk.ClusterEvent{Resource: fwk.TargetPod, ActionType: fwk.UpdatePodLabel},
		QueueingHintFn: func(_ klog.Logger, pod *v1.Pod, _, newObj interface{}) (fwk.QueueingHint, error) {
			if p, ok := newObj.(*v1.Pod); ok && p.UID == pod.UID && p.Labels[holdLabel] != "true" {
				return fwk.Queue, nil
			}
			return fwk.QueueSkip, nil
		},
	}}, nil
}

// withHoldPlugin runs the in-process scheduler, for the rest of the test,
// with HoldForTest added to the shipped configuration, and returns it.
func withHoldPlugin(t *testing.T) *controlplane.Scheduler {
	t.Helper()
	pauseInProcessScheduler(t)
	config := holdPluginConfig(t)
	registry := append(scheduler.RegistryOptions(), app.WithPlugin(holdPluginName,
		func(_ context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			holdHandle = h
			return holdPlugin{}, nil
		}))
	sched, err := controlplane.StartScheduler(t.Context(), controlplane.SchedulerOptions{
		ConfigFile: config,
		Kubeconfig: controlPlane.KubeconfigPath(),
		Registry:   registry,
	})
	if err != nil {
		t.Fatalf("starting the scheduler with %s: %v", holdPluginName, err)
	}
	// The cleanup of pauseInProcessScheduler, registered first, runs last
	// and starts the shipped scheduler again.
	t.Cleanup(func() {
		if err := sched.Stop(); err != nil {
			t.Errorf("stopping the scheduler with %s: %v", holdPluginName, err)
		}
	})
	return sched
}

// release removes the hold label from a pod and moves it to the active
// queue, as a gating controller's update would.
func (env *testEnv) release(name string) {
	env.t.Helper()
	patch := []byte(`{"metadata":{"labels":{"` + holdLabel + `":null}}}`)
	pod, err := kubeClient.CoreV1().Pods(env.ns).Patch(env.t.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		env.t.Fatalf("releasing pod %s: %v", name, err)
	}
	// The scheduler's informer must have the new labels before the pod is
	// looked at again.
	lister := holdHandle.SharedInformerFactory().Core().V1().Pods().Lister()
	err = waitFor(env.t.Context(), bindTimeout, func(context.Context) (bool, error) {
		p, err := lister.Pods(env.ns).Get(name)
		return err == nil && p.Labels[holdLabel] == "", nil
	})
	if err != nil {
		env.t.Fatalf("the scheduler never saw pod %s released: %v", name, err)
	}
	holdHandle.Activate(klog.Background(), map[string]*v1.Pod{env.ns + "/" + name: pod})
}

// What the simulator reads to count a scheduler's holds as idle-held: the
// members that reserved their nodes and wait in Permit, through the
// scheduler's frameworks, and the capacity the gang's plan keeps for the
// member still to come, through gpu_gang_held_capacity.
func TestSchedulerHoldsAreReadable(t *testing.T) {
	sched := withHoldPlugin(t)
	env := newTestEnv(t)
	env.gpuNodes(3, 8)
	members := env.holdInPermit("job")
	var waiting []string
	sched.WaitingPods(func(p *v1.Pod) {
		if p.Namespace == env.ns && p.Spec.NodeName != "" {
			waiting = append(waiting, p.Name)
		}
	})
	slices.Sort(waiting)
	if want := []string{members[0].Name, members[1].Name}; !slices.Equal(want, waiting) {
		t.Errorf("waiting in Permit: %v, want %v", waiting, want)
	}
	if got := labelledSum(t, scheduling.HeldCapacityMetric, "resource", "nvidia.com/gpu"); got != 8 {
		t.Errorf("%s{resource=nvidia.com/gpu} = %v, want 8: the plan's place for the member still held back", scheduling.HeldCapacityMetric, got)
	}
	env.release(members[2].Name)
	env.waitForBound(bindTimeout, members...)
}

// labelledSum adds up the in-process scheduler's gauges or counters name
// whose label is set to value; 0 when there is none.
func labelledSum(t *testing.T, name, label, value string) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// holdPluginConfig writes the shipped scheduler configuration with
// HoldForTest enabled at PreEnqueue in every profile, and returns its path.
func holdPluginConfig(t *testing.T) string {
	t.Helper()
	config, err := controlplane.WriteSchedulerConfig(*schedulerConfig, t.TempDir(), func(cfg map[string]any) {
		profiles, _ := cfg["profiles"].([]any)
		for _, p := range profiles {
			profile, _ := p.(map[string]any)
			plugins, _ := profile["plugins"].(map[string]any)
			pre, _ := plugins["preEnqueue"].(map[string]any)
			if pre == nil {
				pre = map[string]any{}
			}
			enabled, _ := pre["enabled"].([]any)
			pre["enabled"] = append(enabled, map[string]any{"name": holdPluginName})
			plugins["preEnqueue"] = pre
		}
	})
	if err != nil {
		t.Fatalf("writing the scheduler configuration: %v", err)
	}
	return config
}
