package integration

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// A PyTorchJob-shaped gang cut into segments of two ranks, each segment on
// one node, asked for with gpu-gang's PodGroup annotations or with Kueue's
// pod-template annotations. Free: 4 GPUs on each node of s0-l0, s0-l1-n0
// and s1-l1-n1 whole. The flat plan of four 4-GPU members stays in spine
// s0 and splits ranks 0 and 1 over two nodes; segments take the two whole
// nodes.
func TestSegmentsLandEachInOneDomain(t *testing.T) {
	used := map[string]int{"s0-l0-n0": 4, "s0-l0-n1": 4, "s0-l1-n1": 8, "s1-l0-n0": 8, "s1-l0-n1": 8, "s1-l1-n0": 8}
	for _, tc := range []struct {
		name                 string
		onPodGroup, onMember map[string]string
	}{
		{"gpu-gang's PodGroup annotations", map[string]string{
			scheduling.AnnotationSegmentSize: "2", scheduling.AnnotationSegmentTopologyRequired: scheduling.HostnameKey}, nil},
		{"Kueue's podset slice annotations", nil, map[string]string{
			scheduling.KueueSliceSizeAnnotation: "2", scheduling.KueueSliceRequiredTopologyAnnotation: scheduling.HostnameKey}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			env.createFabric(2, 2, 2, 2)
			var busy []*v1.Pod
			for _, n := range slices.Sorted(maps.Keys(used)) {
				busy = append(busy, env.pod("busy-"+n).Res(gpuRequest(used[n])).NodeSelector(map[string]string{v1.LabelHostname: env.nodeName(n)}).Obj())
			}
			env.createPods(busy...)
			env.waitForBound(bindTimeout, busy...)
			watch := env.watchGangs(map[string]int{"ptj": 4})
			pg := gangtest.MakePodGroup("ptj", env.ns).MinMember(4)
			for k, v := range tc.onPodGroup {
				pg.Annotation(k, v)
			}
			env.createPodGroup(pg.Obj())
			type member struct{ name, role, index string }
			// Names sort against rank order on purpose.
			ranks := []member{{"z-master", "master", "0"}, {"y-worker", "worker", "0"}, {"x-worker", "worker", "1"}, {"w-worker", "worker", "2"}}
			var pods []*v1.Pod
			for _, m := range ranks {
				pods = append(pods, env.gangPod(m.name, "ptj").Res(gpuRequest(4)).Annotations(tc.onMember).
					Label(scheduling.KubeflowReplicaTypeLabel, m.role).Label(scheduling.KubeflowReplicaIndexLabel, m.index).Obj())
			}
			env.createPods(pods...)
			nodes := env.waitForBound(bindTimeout, pods...)
			node := func(i int) string { return nodes[pods[i].Name] }
			if node(0) != node(1) || node(2) != node(3) || node(0) == node(2) {
				t.Errorf("segments are not one node each: master-0 %s, worker-0 %s, worker-1 %s, worker-2 %s", node(0), node(1), node(2), node(3))
			}
			watch.expectNeverPartial()
		})
	}
}

// Segments that cannot be honoured get an InvalidPodGroup Event that names
// the fix, and the gang binds nothing.
func TestInvalidSegmentsGetAnEvent(t *testing.T) {
	env := newTestEnv(t)
	env.createFabric(1, 2, 2, 2)
	env.createPodGroup(gangtest.MakePodGroup("bad", env.ns).MinMember(4).
		Annotation(scheduling.AnnotationSegmentSize, "3").
		Annotation(scheduling.AnnotationSegmentTopologyRequired, leafLabel).Obj())
	pods := env.gangPods("bad", 4, 8)
	env.createPods(pods...)
	ev := env.waitForEvent("PodGroup", "bad", coscheduling.ReasonInvalidPodGroup)
	if !strings.Contains(ev.Note, "does not divide the gang's 4 members") || !strings.Contains(ev.Note, "such as 2 or 4") {
		t.Errorf("the Event does not name the fix: %s", ev.Note)
	}
	env.expectStaysUnbound(staysUnboundWindow, pods...)
}

// An elastic segmented gang (6 ranks, segments of two on one node, quorum
// two segments) starts with whole segments of its own ranks and grows by a
// whole segment. Free: three whole nodes and half of s0-l1-n1. Ranks 2-5
// come first and start as segments 1 and 2; ranks 0 and 1 come later and
// join as segment 0 on the whole node left: rank 0 alone would best fit the
// half node, where rank 1 could never join it.
func TestElasticSegmentsGrowWhole(t *testing.T) {
	env := newTestEnv(t)
	env.createFabric(1, 2, 2, 2)
	half := env.pod("busy-half").Res(gpuRequest(4)).NodeSelector(map[string]string{v1.LabelHostname: env.nodeName("s0-l1-n1")}).Obj()
	env.createPods(half)
	env.waitForBound(bindTimeout, half)
	watch := env.watchGangs(map[string]int{"el": 4})
	env.createPodGroup(gangtest.MakePodGroup("el", env.ns).MinMember(4).
		Annotation(scheduling.AnnotationSegmentSize, "2").
		Annotation(scheduling.AnnotationSegmentTopologyRequired, scheduling.HostnameKey).Obj())
	var pods []*v1.Pod
	for i := range 6 {
		pods = append(pods, env.gangPod(fmt.Sprintf("el-%d", i), "el").Res(gpuRequest(4)).
			Label(scheduling.KubeflowReplicaTypeLabel, "worker").Label(scheduling.KubeflowReplicaIndexLabel, strconv.Itoa(i)).Obj())
	}
	env.createPods(pods[2:]...)
	nodes := env.waitForBound(bindTimeout, pods[2:]...)
	env.createPods(pods[:2]...)
	maps.Copy(nodes, env.waitForBound(bindTimeout, pods[:2]...))
	node := func(i int) string { return nodes[pods[i].Name] }
	for s := range 3 {
		if node(2*s) != node(2*s+1) {
			t.Errorf("segment %d is not on one node: rank %d on %s, rank %d on %s", s, 2*s, node(2*s), 2*s+1, node(2*s+1))
		}
	}
	if half := env.nodeName("s0-l1-n1"); node(0) == half {
		t.Errorf("segment 0 joined on the half-free node %s", half)
	}
	watch.expectNeverPartial()
}

// An MPIJob-shaped gang: a launcher asking for no GPU and eight 4-GPU
// workers whose pod template carries Kueue's slice annotations, 4 workers
// per leaf; the launcher's template carries none, as Kueue puts them per
// PodSet. Free: 12 GPUs in leaf s0-l0 and 20 in s0-l1 (a third node), 16
// in s1-l0, none in s1-l1. The flat plan fits spine s0 with three workers
// in s0-l0, straddling a slice; the slices fit only s0-l1 and s1-l0. Every
// slice lands in one leaf, the launcher binds with them, and no
// InvalidPodGroup comes.
func TestKueueSlicesBesideALauncher(t *testing.T) {
	env := newTestEnv(t)
	f := env.createFabric(2, 2, 2, 2)
	third := env.createNodes(gpuNode("s0-l1-n2", 8).Label(spineLabel, "s0").Label(leafLabel, "s0-l1").Label(cliqueLabel, "s0-l1-c1").Obj())[0]
	f.leafOf[third.Name] = "s0-l1"
	used := map[string]int{"s0-l0-n1": 4, "s0-l1-n2": 4, "s1-l1-n0": 8, "s1-l1-n1": 8}
	var busy []*v1.Pod
	for _, n := range slices.Sorted(maps.Keys(used)) {
		busy = append(busy, env.pod("busy-"+n).Res(gpuRequest(used[n])).NodeSelector(map[string]string{v1.LabelHostname: env.nodeName(n)}).Obj())
	}
	env.createPods(busy...)
	env.waitForBound(bindTimeout, busy...)

	watch := env.watchGangs(map[string]int{"mpi": 9})
	env.createPodGroup(gangtest.MakePodGroup("mpi", env.ns).MinMember(9).Obj())
	launcher := env.gangPod("mpi-launcher", "mpi").Res(map[v1.ResourceName]string{v1.ResourceCPU: "1", v1.ResourceMemory: "1Gi"}).
		Label(scheduling.KubeflowReplicaTypeLabel, "launcher").Label(scheduling.KubeflowReplicaIndexLabel, "0").Obj()
	slices4 := map[string]string{scheduling.KueueSliceSizeAnnotation: "4", scheduling.KueueSliceRequiredTopologyAnnotation: leafLabel}
	var workers []*v1.Pod
	for i := range 8 {
		workers = append(workers, env.gangPod(fmt.Sprintf("mpi-worker-%d", i), "mpi").Res(gpuRequest(4)).Annotations(slices4).
			Label(scheduling.KubeflowReplicaTypeLabel, "worker").Label(scheduling.KubeflowReplicaIndexLabel, strconv.Itoa(i)).Obj())
	}
	env.createPods(append([]*v1.Pod{launcher}, workers...)...)
	nodes := env.waitForBound(bindTimeout, append([]*v1.Pod{launcher}, workers...)...)

	leafOf := func(i int) string { return f.leafOf[nodes[workers[i].Name]] }
	for s := range 2 {
		for r := 4 * s; r < 4*s+4; r++ {
			if leafOf(r) != leafOf(4*s) {
				t.Errorf("slice %d straddles leaves: worker %d in %s, worker %d in %s", s, 4*s, leafOf(4*s), r, leafOf(r))
			}
		}
	}
	if got := []string{leafOf(0), leafOf(4)}; !slices.Contains(got, "s0-l1") || !slices.Contains(got, "s1-l0") {
		t.Errorf("slices in leaves %v, want s0-l1 and s1-l0 (the only leaves with 16 GPUs free)", got)
	}
	t.Logf("launcher on %s", nodes[launcher.Name])
	err := staysTrue(t.Context(), staysUnboundWindow, func(ctx context.Context) error {
		list, err := kubeClient.EventsV1().Events(env.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil // a failed list proves nothing either way; look again
		}
		for _, e := range list.Items {
			if e.Reason == coscheduling.ReasonInvalidPodGroup {
				return fmt.Errorf("%s Event on %s %s: %s", e.Reason, e.Regarding.Kind, e.Regarding.Name, e.Note)
			}
		}
		return nil
	})
	if err != nil {
		t.Errorf("a launcher beside workers the slices divide got a false InvalidPodGroup: %v", err)
	}
	watch.expectNeverPartial()
}
