package coscheduling

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

func TestSegmentedGangs(t *testing.T) {
	// Free: 4 GPUs on each node of s0-l0, s0-l1-n0 and s1-l1-n1 whole. The
	// flat plan of four 4-GPU members stays in spine s0 and puts ranks 0
	// and 1 on two nodes; segments of two ranks on one node take the two
	// whole nodes.
	used := map[string]string{"s0-l0-n0": "4", "s0-l0-n1": "4", "s0-l1-n1": "8", "s1-l0-n0": "8", "s1-l0-n1": "8", "s1-l1-n0": "8"}
	for _, tc := range []struct {
		name                 string
		onPodGroup, onMember map[string]string
	}{
		{"gpu-gang's PodGroup annotations", map[string]string{
			scheduling.AnnotationSegmentSize: "2", scheduling.AnnotationSegmentTopologyRequired: scheduling.HostnameKey}, nil},
		{"Kueue's slice annotations", nil, map[string]string{
			scheduling.KueueSliceSizeAnnotation: "2", scheduling.KueueSliceRequiredTopologyAnnotation: scheduling.HostnameKey}},
	} {
		t.Run("each segment lands on one node: "+tc.name, func(t *testing.T) {
			job := members("seg", 4, "4")
			pods := slices.Clone(job)
			for _, p := range job {
				p.Annotations = tc.onMember
			}
			for _, n := range slices.Sorted(maps.Keys(used)) {
				pods = append(pods, batchPod("busy-"+n, n, used[n]))
			}
			pg := gangtest.MakePodGroup("seg", testNS).MinMember(4)
			for k, v := range tc.onPodGroup {
				pg.Annotation(k, v)
			}
			env := newTestEnv(t, fabric(), pods, []*v1alpha1.PodGroup{pg.Obj()}, withTopology(t))
			got := plannedNodes(t, env, job)
			require.Equal(t, got[0], got[1], "ranks 0 and 1: %v", got)
			require.Equal(t, got[2], got[3], "ranks 2 and 3: %v", got)
			require.ElementsMatch(t, []string{"s0-l1-n0", "s1-l1-n1"}, []string{got[0], got[2]})
		})
	}

	t.Run("a returning member plans in its own segment, with its anchors", func(t *testing.T) {
		// Ranks 0 and 1 run on s0-l0-n0, rank 2 on s0-l1-n0, rank 3 returns
		// (core's TestReturningMemberHierarchy checks the request this
		// gives). The plan keeps rank 3 in segment 1's leaf, though the
		// gang requires only its spine and leaf s0-l0, which runs most of
		// it, has room on s0-l0-n1.
		job := members("back", 4, "4")
		job[0].Spec.NodeName, job[1].Spec.NodeName, job[2].Spec.NodeName = "s0-l0-n0", "s0-l0-n0", "s0-l1-n0"
		env := newTestEnv(t, fabric(), job, []*v1alpha1.PodGroup{gangtest.MakePodGroup("back", testNS).MinMember(4).
			Annotation(scheduling.AnnotationTopologyRequired, spineLabel).
			Annotation(scheduling.AnnotationSegmentSize, "2").
			Annotation(scheduling.AnnotationSegmentTopologyRequired, leafLabel).Obj()}, withTopology(t))
		node := plannedNodes(t, env, job[3:])[0]
		require.Equal(t, "s0-l1", node[:len("s0-l1")], "rank 3 runs in segment 1's leaf, beside rank 2: %s", node)
	})

	for _, tc := range []struct {
		name        string
		annotations map[string]string
		minMember   int32
		want        string
	}{
		{"a size that does not divide the members", map[string]string{
			scheduling.AnnotationSegmentSize: "3", scheduling.AnnotationSegmentTopologyRequired: leafLabel}, 4, "does not divide the gang's 4 members"},
		{"an unknown level", map[string]string{
			scheduling.AnnotationSegmentSize: "2", scheduling.AnnotationSegmentTopologyRequired: "example.com/rack"}, 4, "name a configured level's label key"},
		{"a level looser than the gang's", map[string]string{
			scheduling.AnnotationSegmentSize: "2", scheduling.AnnotationSegmentTopologyRequired: spineLabel,
			scheduling.AnnotationTopologyRequired: leafLabel}, 4, "looser than the gang's level"},
		{"an elastic minimum of part segments", map[string]string{
			scheduling.AnnotationSegmentSize: "2", scheduling.AnnotationSegmentTopologyRequired: leafLabel}, 3, "not a whole number of segments"},
		{"a size without a level", map[string]string{scheduling.AnnotationSegmentSize: "2"}, 4, "without a segment level"},
	} {
		t.Run("bad input: "+tc.name, func(t *testing.T) {
			job := members("bad", 4, "8")
			pg := gangtest.MakePodGroup("bad", testNS).MinMember(tc.minMember)
			for k, v := range tc.annotations {
				pg.Annotation(k, v)
			}
			env := newTestEnv(t, fabric(), job, []*v1alpha1.PodGroup{pg.Obj()}, withTopology(t))
			_, status, _ := env.fh.RunPreFilterPlugins(env.ctx, framework.NewCycleState(), job[0])
			require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "%v", status)
			require.True(t, hasEvent(env.recorded(), ReasonInvalidPodGroup, tc.want), "want an InvalidPodGroup Event with %q", tc.want)
		})
	}
}

// mpiJob is an MPIJob's pods in group: a launcher asking for no GPU, with
// launcherAnnotations, and n workers of gpus GPUs each, with
// workerAnnotations.
func mpiJob(group string, n int, gpus string, launcherAnnotations, workerAnnotations map[string]string) (launcher *v1.Pod, workers []*v1.Pod) {
	launcher = member(group, group+"-launcher", "")
	launcher.Labels[scheduling.KubeflowReplicaTypeLabel] = "launcher"
	launcher.Labels[scheduling.KubeflowReplicaIndexLabel] = "0"
	launcher.Annotations = launcherAnnotations
	for i := 0; i < n; i++ {
		w := member(group, fmt.Sprintf("%s-worker-%d", group, i), gpus)
		w.Labels[scheduling.KubeflowReplicaTypeLabel] = "worker"
		w.Labels[scheduling.KubeflowReplicaIndexLabel] = strconv.Itoa(i)
		w.Annotations = workerAnnotations
		workers = append(workers, w)
	}
	return launcher, workers
}

// A launcher beside workers that Kueue (or the PodGroup) slices 4 per leaf
// is outside the segments: each segment of workers takes one whole leaf,
// the launcher is placed, and no InvalidPodGroup comes. Workers that the
// size does not divide still get one, naming the fix.
func TestSegmentsBesideALauncher(t *testing.T) {
	// Free: 12 GPUs in leaf s0-l0 and 20 in s0-l1 (which has a third
	// node), 16 in s1-l0, none in s1-l1. Eight 4-GPU workers fit flat in
	// spine s0, three of them in s0-l0, which straddles a slice of 4;
	// slices of 4 workers fit only in s0-l1 and s1-l0, one each.
	nodes := fabric()
	third := gpuNode("s0-l1-n2")
	third.Labels = maps.Clone(nodes[2].Labels)
	nodes = append(nodes, third)
	used := map[string]string{"s0-l0-n1": "4", "s0-l1-n2": "4", "s1-l1-n0": "8", "s1-l1-n1": "8"}
	slices4 := map[string]string{scheduling.KueueSliceSizeAnnotation: "4", scheduling.KueueSliceRequiredTopologyAnnotation: leafLabel}
	for _, tc := range []struct {
		name                  string
		onPodGroup            map[string]string
		onLauncher, onWorkers map[string]string
	}{
		{name: "Kueue's slices on the workers only", onWorkers: slices4},
		{name: "Kueue's slices copied onto the launcher", onLauncher: slices4, onWorkers: slices4},
		{name: "the PodGroup's segments, which divide the workers", onPodGroup: map[string]string{
			scheduling.AnnotationSegmentSize: "4", scheduling.AnnotationSegmentTopologyRequired: leafLabel}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			launcher, workers := mpiJob("mpi", 8, "4", tc.onLauncher, tc.onWorkers)
			job := append([]*v1.Pod{launcher}, workers...)
			pods := slices.Clone(job)
			for _, n := range slices.Sorted(maps.Keys(used)) {
				pods = append(pods, batchPod("busy-"+n, n, used[n]))
			}
			pg := gangtest.MakePodGroup("mpi", testNS).MinMember(9)
			for k, v := range tc.onPodGroup {
				pg.Annotation(k, v)
			}
			env := newTestEnv(t, nodes, pods, []*v1alpha1.PodGroup{pg.Obj()}, withTopology(t))
			got := plannedNodes(t, env, job)
			leafOf := func(node string) string { return node[:len("s0-l0")] }
			for seg := 0; seg < 2; seg++ {
				for r := 1; r < 4; r++ {
					require.Equal(t, leafOf(got[1+4*seg]), leafOf(got[1+4*seg+r]), "segment %d: worker %d and worker %d: %v", seg, 4*seg, 4*seg+r, got)
				}
			}
			require.ElementsMatch(t, []string{"s0-l1", "s1-l0"}, []string{leafOf(got[1]), leafOf(got[5])})
			require.NotEmpty(t, got[0], "the launcher is placed")
			require.False(t, hasEvent(env.recorded(), ReasonInvalidPodGroup, ""), "no InvalidPodGroup for a launcher beside divisible workers")
		})
	}

	t.Run("bad input: workers the slice size does not divide", func(t *testing.T) {
		launcher, workers := mpiJob("mpi6", 6, "4", nil, slices4)
		job := append([]*v1.Pod{launcher}, workers...)
		env := newTestEnv(t, fabric(), job, []*v1alpha1.PodGroup{gangtest.MakePodGroup("mpi6", testNS).MinMember(7).Obj()}, withTopology(t))
		_, status, _ := env.fh.RunPreFilterPlugins(env.ctx, framework.NewCycleState(), workers[0])
		require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "%v", status)
		want := "PodGroup " + testNS + "/mpi6 has invalid segments: the annotation of pod " + testNS + "/mpi6-worker-0 (the first of the members it slices) " +
			"kueue.x-k8s.io/podset-slice-size is 4, which does not divide the 6 members its segments cover (pod " + testNS + "/mpi6-launcher, outside them, is not counted): " +
			"set a size that divides 6, such as 3 or 6, or make the member count a multiple of 4"
		require.True(t, hasEvent(env.recorded(), ReasonInvalidPodGroup, want), "want an InvalidPodGroup Event with %q", want)
	})
}
