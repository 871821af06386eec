package integration

import (
	"maps"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

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
