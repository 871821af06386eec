package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/retry"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// The GPU fleet policies, end to end: nodes labelled as GPU
// feature discovery, the GPU Operator and node provisioners label them,
// PodGroups and pods annotated as users write them, and the scheduler's
// shipped configuration.

// fleetWindow is how long a fleet test watches pods that must stay
// unbound: several scheduling attempts, kept short so the fleet cases add
// a few seconds each.
const fleetWindow = 3 * time.Second

const (
	h100 = "NVIDIA-H100-80GB-HBM3"
	a100 = "NVIDIA-A100-SXM4-80GB"
)

// gfd are the labels GPU feature discovery writes on a node: the product,
// the driver version, the highest CUDA version it supports (current keys)
// and the compute capability.
func gfd(product, driver, cuda, compute string) map[string]string {
	major, minor, _ := strings.Cut(compute, ".")
	return map[string]string{
		scheduling.LabelGPUPresent:             "true",
		scheduling.LabelGPUProduct:             product,
		scheduling.LabelCUDADriverVersionFull:  driver,
		scheduling.LabelCUDARuntimeVersionFull: cuda,
		scheduling.LabelGPUComputeMajor:        major,
		scheduling.LabelGPUComputeMinor:        minor,
	}
}

// fleetNode is an 8-GPU node with the given label sets.
func fleetNode(name string, labels ...map[string]string) *v1.Node {
	return withLabels(gpuNode(name, 8), labels...)
}

func withLabels(w *st.NodeWrapper, labels ...map[string]string) *v1.Node {
	for _, ls := range labels {
		for k, v := range ls {
			w.Label(k, v)
		}
	}
	return w.Obj()
}

// h100Node and a100Node are current nodes of each product on one driver.
func h100Node(name string, more ...map[string]string) *v1.Node {
	return fleetNode(name, append([]map[string]string{gfd(h100, "550.54.15", "12.4", "9.0")}, more...)...)
}

func a100Node(name string, more ...map[string]string) *v1.Node {
	return fleetNode(name, append([]map[string]string{gfd(a100, "550.54.15", "12.4", "8.0")}, more...)...)
}

// wholeNodePods builds count pods outside any gang, each asking for a whole
// 8-GPU node.
func (env *testEnv) wholeNodePods(prefix string, count int, annotations map[string]string) []*v1.Pod {
	pods := make([]*v1.Pod, count)
	for i := range pods {
		w := env.pod(fmt.Sprintf("%s-%d", prefix, i)).Res(gpuRequest(8))
		for k, v := range annotations {
			w.Annotation(k, v)
		}
		pods[i] = w.Obj()
	}
	return pods
}

// gang creates a PodGroup of count whole-node members with the given
// annotations, and the members, and returns them.
func (env *testEnv) gang(name string, count int, annotations map[string]string) []*v1.Pod {
	env.t.Helper()
	env.createGangPodGroup(name, count, annotations)
	pods := env.gangPods(name, count, 8)
	env.createPods(pods...)
	return pods
}

// createGangPodGroup creates PodGroup name with minMember count and the
// given annotations.
func (env *testEnv) createGangPodGroup(name string, count int, annotations map[string]string) {
	env.t.Helper()
	pg := gangtest.MakePodGroup(name, env.ns).MinMember(int32(count))
	for k, v := range annotations {
		pg.Annotation(k, v)
	}
	env.createPodGroup(pg.Obj())
}

// expectOn checks that every bound pod is on one of the named nodes (names
// as given to createNodes).
func (env *testEnv) expectOn(nodes map[string]string, allowed ...string) {
	env.t.Helper()
	ok := sets.New[string]()
	for _, n := range allowed {
		ok.Insert(env.nodeName(n))
	}
	for pod, node := range nodes {
		if !ok.Has(node) {
			env.t.Errorf("pod %s is on %s, want one of %v", pod, node, sets.List(ok))
		}
	}
}

// relabel sets (or, for an empty value, removes) labels of a node through
// the API, as GPU feature discovery or the GPU Operator would.
func (env *testEnv) relabel(name string, labels map[string]string) {
	env.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := kubeClient.CoreV1().Nodes().Get(env.t.Context(), env.nodeName(name), metav1.GetOptions{})
		if err != nil {
			return err
		}
		for k, v := range labels {
			if v == "" {
				delete(n.Labels, k)
			} else {
				n.Labels[k] = v
			}
		}
		_, err = kubeClient.CoreV1().Nodes().Update(env.t.Context(), n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		env.t.Fatalf("relabelling node %s: %v", name, err)
	}
}

// waitForDeleted waits until the pods are gone from the API.
func (env *testEnv) waitForDeleted(pods ...*v1.Pod) {
	env.t.Helper()
	err := waitFor(env.t.Context(), cleanupTimeout, func(ctx context.Context) (bool, error) {
		for _, p := range pods {
			_, err := kubeClient.CoreV1().Pods(env.ns).Get(ctx, p.Name, metav1.GetOptions{})
			if err == nil {
				return false, nil
			}
			if !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		return true, nil
	})
	if err != nil {
		env.t.Fatalf("waiting for pods %v to go: %v", podNames(pods), err)
	}
}

// waitForUnschedulable waits until the pod's PodScheduled condition says
// it cannot be scheduled with a message containing want, and returns the
// message.
func (env *testEnv) waitForUnschedulable(pod *v1.Pod, want string) string {
	env.t.Helper()
	var last string
	err := waitFor(env.t.Context(), eventTimeout, func(ctx context.Context) (bool, error) {
		p, err := kubeClient.CoreV1().Pods(env.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse {
				last = c.Message
				return strings.Contains(c.Message, want), nil
			}
		}
		return false, nil
	})
	if err != nil {
		env.t.Fatalf("waiting %s for pod %s to be unschedulable with %q: %v; last message: %q", eventTimeout, pod.Name, want, err, last)
	}
	return last
}

// A gang that needs CUDA 12.4 skips nodes whose driver supports 12.2 only,
// though they come first; versions compare as numbers (12.10 is above
// 12.9); a pod that no node can run waits, saying what the cluster has.
func TestFleetCUDAVersion(t *testing.T) {
	env := newTestEnv(t)
	env.createNodes(
		fleetNode("a-old-0", gfd(h100, "535.104.05", "12.2", "9.0")),
		fleetNode("a-old-1", gfd(h100, "535.104.05", "12.2", "9.0")),
		h100Node("b-new-0"), h100Node("b-new-1"),
		fleetNode("c-129", gfd(h100, "575.57.08", "12.9", "9.0")),
		fleetNode("d-1210", gfd(h100, "580.65.06", "12.10", "9.0")),
	)
	watch := env.watchGangs(map[string]int{"cuda": 2})
	cuda := env.gang("cuda", 2, map[string]string{scheduling.AnnotationMinCUDA: "12.4"})
	env.expectOn(env.waitForBound(bindTimeout, cuda...), "b-new-0", "b-new-1")
	watch.expectNeverPartial()

	newest := env.wholeNodePods("newest", 1, map[string]string{scheduling.AnnotationMinCUDA: "12.10"})
	env.createPods(newest...)
	env.expectOn(env.waitForBound(bindTimeout, newest...), "d-1210")

	future := env.wholeNodePods("future", 1, map[string]string{scheduling.AnnotationMinCUDA: "13.0"})
	env.createPods(future...)
	msg := env.waitForUnschedulable(future[0], "needs CUDA >= 13.0; the best in the cluster is 12.10 (nvidia.com/cuda.runtime-version.full)")
	t.Logf("unschedulable: %s", msg)
}

// A gang that needs compute capability 9.0 runs on Hopper only.
func TestFleetComputeCapability(t *testing.T) {
	env := newTestEnv(t)
	env.createNodes(a100Node("a-a100-0"), a100Node("a-a100-1"), h100Node("b-h100-0"), h100Node("b-h100-1"))
	hopper := env.gang("hopper", 2, map[string]string{scheduling.AnnotationMinComputeCapability: "9.0"})
	env.expectOn(env.waitForBound(bindTimeout, hopper...), "b-h100-0", "b-h100-1")
}

// Nodes in a driver upgrade get no new work; running pods stay; a pod
// waiting for such a node starts when the upgrade is done.
func TestFleetDriverUpgrade(t *testing.T) {
	env := newTestEnv(t)
	env.createNodes(
		h100Node("a-upgrading", map[string]string{scheduling.LabelGPUDriverUpgradeState: "upgrade-required"}),
		h100Node("b-done", map[string]string{scheduling.LabelGPUDriverUpgradeState: scheduling.UpgradeStateDone}),
		h100Node("c-never"),
	)
	pair := env.gang("pair", 2, nil)
	env.expectOn(env.waitForBound(bindTimeout, pair...), "b-done", "c-never")

	// The operator starts upgrading a node that runs a member: the member
	// stays, and the pod that waits for room does not take the upgrading
	// node.
	env.relabel("b-done", map[string]string{scheduling.LabelGPUDriverUpgradeState: "cordon-required"})
	late := env.wholeNodePods("late", 1, nil)
	env.createPods(late...)
	env.expectStaysUnbound(fleetWindow, late...)
	env.waitForBound(bindTimeout, pair...)

	env.relabel("a-upgrading", map[string]string{scheduling.LabelGPUDriverUpgradeState: scheduling.UpgradeStateDone})
	env.expectOn(env.waitForBound(bindTimeout, late...), "a-upgrading")
}

// A gang's members share one GPU product and driver: a gang goes to a group
// that holds it whole, even where topology alone (one leaf) would mix.
func TestFleetUniformGangs(t *testing.T) {
	env := newTestEnv(t)
	leaf := map[string]string{leafLabel: "l0"}
	env.createNodes(
		h100Node("a-h100-0", leaf), h100Node("a-h100-1", leaf),
		a100Node("b-a100-0", leaf), a100Node("b-a100-1", leaf), a100Node("b-a100-2", leaf),
		fleetNode("c-a100-old", gfd(a100, "535.104.05", "12.2", "8.0"), leaf),
	)
	watch := env.watchGangs(map[string]int{"three": 3, "two": 2})
	three := env.gang("three", 3, nil)
	env.expectOn(env.waitForBound(bindTimeout, three...), "b-a100-0", "b-a100-1", "b-a100-2")
	two := env.gang("two", 2, nil)
	env.expectOn(env.waitForBound(bindTimeout, two...), "a-h100-0", "a-h100-1")
	watch.expectNeverPartial()

	ev := env.waitForEvent("PodGroup", "three", coscheduling.ReasonGangScheduled)
	if !strings.Contains(ev.Note, "group nvidia.com/gpu.product="+a100+", driver 550.54, on-demand capacity") {
		t.Errorf("the placement Event does not name the group: %s", ev.Note)
	}
}

// Capacity type: a pod can force on-demand or spot; by default a gang's
// members share one capacity type, whichever holds the gang.
func TestFleetCapacityType(t *testing.T) {
	env := newTestEnv(t)
	spot := map[string]string{scheduling.LabelKarpenterCapacityType: "spot"}
	onDemand := map[string]string{scheduling.LabelKarpenterCapacityType: "on-demand"}
	env.createNodes(
		h100Node("a-spot-0", spot), h100Node("a-spot-1", spot),
		h100Node("b-od-0", onDemand), h100Node("b-od-1", onDemand), h100Node("b-od-2"), // no label: on-demand
	)
	od := env.wholeNodePods("od", 1, map[string]string{scheduling.AnnotationCapacityType: "on-demand"})
	env.createPods(od...)
	env.expectOn(env.waitForBound(bindTimeout, od...), "b-od-0", "b-od-1", "b-od-2")
	env.deletePods(od...)
	env.waitForDeleted(od...)

	watch := env.watchGangs(map[string]int{"uniform": 3, "spot": 2})
	uniform := env.gang("uniform", 3, nil)
	env.expectOn(env.waitForBound(bindTimeout, uniform...), "b-od-0", "b-od-1", "b-od-2")
	reclaimable := env.gang("spot", 2, map[string]string{scheduling.AnnotationCapacityType: "spot"})
	env.expectOn(env.waitForBound(bindTimeout, reclaimable...), "a-spot-0", "a-spot-1")
	watch.expectNeverPartial()
}

// MIG slices and shared GPUs are resources of their own: a gang of slices
// packs onto the fewest nodes, mixed shapes included; whole-GPU gangs avoid
// time-sliced nodes unless they allow them.
func TestFleetMIGAndSharedGPUs(t *testing.T) {
	env := newTestEnv(t)
	const (
		mig1g = v1.ResourceName("nvidia.com/mig-1g.10gb")
		mig3g = v1.ResourceName("nvidia.com/mig-3g.40gb")
	)
	migNode := func(name, clique string) *v1.Node {
		return st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{
			mig1g: "16", mig3g: "4", v1.ResourceCPU: "96", v1.ResourceMemory: "1Ti", v1.ResourcePods: "110",
		}).Label(scheduling.LabelGPUProduct, a100).Label(scheduling.LabelMIGStrategy, scheduling.MIGStrategyMixed).
			Label(scheduling.LabelCUDADriverVersionFull, "550.54.15").Label(cliqueLabel, clique).Obj()
	}
	timeSliced := map[string]string{scheduling.LabelGPUSharingStrategy: scheduling.SharingStrategyTimeSlicing, scheduling.LabelGPUReplicas: "4"}
	env.createNodes(
		migNode("a-mig-0", "c0"), migNode("a-mig-1", "c0"), migNode("a-mig-2", "c1"),
		// 8 GPUs time-sliced 4 ways: 32 nvidia.com/gpu, roomier than any
		// whole node but not whole GPUs.
		withLabels(gpuNode("b-shared", 32), gfd(h100+"-SHARED", "550.54.15", "12.4", "9.0"), timeSliced),
		h100Node("c-whole-0"), h100Node("c-whole-1"),
	)

	// Four members of two shapes: 3 × 4 slices of 1g and 1 × 2 slices of
	// 3g fit one MIG node; topology keeps them there.
	env.createPodGroup(gangtest.MakePodGroup("slices", env.ns).MinMember(4).Obj())
	var slices []*v1.Pod
	for i := range 3 {
		slices = append(slices, env.gangPod(fmt.Sprintf("slices-%d", i), "slices").
			Res(map[v1.ResourceName]string{mig1g: "4", v1.ResourceCPU: "1"}).Obj())
	}
	slices = append(slices, env.gangPod("slices-3", "slices").Res(map[v1.ResourceName]string{mig3g: "2", v1.ResourceCPU: "1"}).Obj())
	env.createPods(slices...)
	nodes := env.waitForBound(bindTimeout, slices...)
	if used := sets.New(mapValues(nodes)...); used.Len() != 1 {
		t.Errorf("the gang's slices fit one MIG node and landed on %v", nodes)
	}

	whole := env.gang("whole", 2, nil)
	env.expectOn(env.waitForBound(bindTimeout, whole...), "c-whole-0", "c-whole-1")

	// With every whole GPU taken, a pod that asks for whole GPUs waits
	// rather than take a time-sliced share; one that allows it runs.
	strict := env.wholeNodePods("strict", 1, nil)
	lenient := env.wholeNodePods("lenient", 1, map[string]string{scheduling.AnnotationAllowSharedGPUs: "true"})
	env.createPods(strict[0], lenient[0])
	env.expectOn(env.waitForBound(bindTimeout, lenient...), "b-shared")
	env.expectStaysUnbound(fleetWindow, strict...)
	env.waitForUnschedulable(strict[0], "the node's are shared: time-slicing with 4 replicas per GPU")
}

// A gang that no uniform group can hold waits, with an Event naming the
// groups, and starts once the labels change so that one does: here the
// GPU Operator finishes upgrading two nodes to the driver of the others.
func TestFleetGangWaitsForACompatibleGroup(t *testing.T) {
	env := newTestEnv(t)
	oldDriver := gfd(h100, "535.104.05", "12.2", "9.0")
	env.createNodes(h100Node("a-new-0"), h100Node("a-new-1"), fleetNode("b-old-0", oldDriver), fleetNode("b-old-1", oldDriver))
	watch := env.watchGangs(map[string]int{"four": 4})
	four := env.gang("four", 4, nil)
	env.expectStaysUnbound(fleetWindow, four...)
	ev := env.waitForEvent("PodGroup", "four", coscheduling.ReasonGangTooLarge)
	if !strings.Contains(ev.Note, "none of the 2 such groups of nodes holds them") {
		t.Errorf("the Event does not say that no group holds the gang: %s", ev.Note)
	}
	t.Logf("Event: %s", ev.Note)

	for _, n := range []string{"b-old-0", "b-old-1"} {
		env.relabel(n, map[string]string{scheduling.LabelCUDADriverVersionFull: "550.54.15", scheduling.LabelCUDARuntimeVersionFull: "12.4"})
	}
	env.waitForBound(bindTimeout, four...)
	watch.expectNeverPartial()
}
