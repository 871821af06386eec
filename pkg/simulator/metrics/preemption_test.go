package metrics

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/workload"
)

// preemptionRun is 1 spine x 2 leaves x 2 nodes of 8 GPUs, full of two
// low-priority 2-node gangs (low-a on leaf 0, low-b on leaf 1), into which
// a 2-node urgent gang arrives.
type preemptionRun struct {
	t      *testing.T
	layout *fabric.Layout
	pt     *PreemptionTracker
	start  time.Time
}

func newPreemptionRun(t *testing.T) *preemptionRun {
	t.Helper()
	layout, err := fabric.NewLayout(scenario.Fabric{Spines: 1, LeavesPerSpine: 2, NodesPerLeaf: 2, GPUsPerNode: 8, Preset: "nvidia"})
	require.NoError(t, err)
	jobs := []scenario.Job{
		{Name: "low-a", Gang: true, Pods: 2, GPUsPerPod: 8},
		{Name: "low-b", Gang: true, Pods: 2, GPUsPerPod: 8},
		{Name: "urgent", Gang: true, Pods: 2, GPUsPerPod: 8, Priority: 100, At: 10 * time.Second},
	}
	r := &preemptionRun{t: t, layout: layout, pt: NewPreemptionTracker(layout, jobs), start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, j := range jobs {
		r.pt.Submitted(j.Name, r.start.Add(j.At))
	}
	for i, name := range []string{"low-a-0", "low-a-1", "low-b-0", "low-b-1"} {
		r.bind(name, i, 0)
	}
	return r
}

func (r *preemptionRun) pod(name string) *v1.Pod {
	job := name[:len(name)-2]
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{workload.JobLabel: job, workload.RoleLabel: workload.RoleWorkload}}}
}

func (r *preemptionRun) bind(name string, node int, second float64) {
	p := r.pod(name)
	p.Spec.NodeName = r.layout.Nodes[node].Name
	r.pt.Observe(p, r.start.Add(time.Duration(second*float64(time.Second))))
}

// evict marks a bound pod as a preemption victim, if marked, and deletes it.
func (r *preemptionRun) evict(name string, node int, second float64, marked bool) {
	p := r.pod(name)
	p.Spec.NodeName = r.layout.Nodes[node].Name
	if marked {
		p.Status.Conditions = []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonPreemptionByScheduler}}
	}
	now := r.start.Add(time.Duration(second * float64(time.Second)))
	r.pt.Observe(p, now)
	r.pt.ObserveDelete(p, now)
}

func TestPreemptionSummary(t *testing.T) {
	t.Run("a whole gang evicted inside one leaf", func(t *testing.T) {
		r := newPreemptionRun(t)
		r.evict("low-b-0", 2, 11, true)
		r.evict("low-b-1", 3, 11, true)
		r.bind("urgent-0", 2, 12)
		r.bind("urgent-1", 3, 12.5)
		got := r.pt.Summary("gpu-gang")
		want := PreemptionSummary{
			Profile: "gpu-gang", UrgentJobs: 1, Preemptions: 1, VictimPods: 2, VictimGangs: 1,
			VictimPodsPerPreemption: 2, VictimGangsPerPreemption: 1, MaxVictimPods: 2,
			TimeToBoundP50: 2.5, TimeToBoundMax: 2.5, LeavesSpanned: 1, SpinesSpanned: 1,
			Jobs: []UrgentJob{{Name: "urgent", Priority: 100, Pods: 2, TimeToBound: 2.5, VictimPods: 2, VictimGangs: []string{"low-b"}, Leaves: 1, Spines: 1}},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("summary (-want,+got):\n%s", diff)
		}
	})
	t.Run("one pod of each gang, unmarked: two gangs broken, spread over leaves", func(t *testing.T) {
		r := newPreemptionRun(t)
		r.evict("low-a-1", 1, 11, false)
		r.evict("low-b-0", 2, 11, true)
		r.bind("urgent-0", 1, 11.5)
		r.bind("urgent-1", 2, 14)
		got := r.pt.Summary("default")
		require.Equal(t, 2, got.BrokenGangs)
		require.Equal(t, 2, got.VictimGangs)
		require.Equal(t, 1, got.UnmarkedVictims)
		require.Equal(t, 2.0, got.VictimGangsPerPreemption)
		require.Equal(t, 2, got.LeavesSpanned)
		require.Equal(t, 1, got.ExtraLeaves, "2 nodes fit one leaf")
		require.Equal(t, 4.0, got.TimeToBoundP50)
	})
	t.Run("an urgent job that never binds and pods that finished", func(t *testing.T) {
		r := newPreemptionRun(t)
		done := r.pod("low-a-0")
		done.Spec.NodeName = r.layout.Nodes[0].Name
		done.Status.Phase = v1.PodSucceeded
		r.pt.Observe(done, r.start.Add(5*time.Second))
		r.pt.ObserveDelete(done, r.start.Add(6*time.Second))
		got := r.pt.Summary("in-tree")
		require.Equal(t, 0, got.VictimPods, "a pod that finished was not evicted")
		require.Equal(t, 1, got.UrgentUnbound)
		require.Equal(t, -1.0, got.Jobs[0].TimeToBound)
		var out bytes.Buffer
		require.NoError(t, WritePreemption(&out, []PreemptionSummary{got}))
		require.Contains(t, out.String(), "urgent (priority 100, 2 pods): never bound, evicted nothing")
	})
}

// A cluster snapshot's layout has leaves of any size and no fabric spec:
// the fewest leaves a preemptor needs come from the leaves themselves.
func TestPreemptionSummaryOnUnevenLeaves(t *testing.T) {
	levels, ok := scheduling.Preset("nvidia")
	require.True(t, ok)
	leafKey := levels[1].Key
	node := func(name, leaf string) fabric.NodeInfo {
		return fabric.NodeInfo{Name: name, GPUs: 8, Labels: map[string]string{leafKey: leaf}}
	}
	layout, err := fabric.FromNodes("nvidia", levels, []fabric.NodeInfo{
		node("a1", "big"), node("a2", "big"), node("a3", "big"), node("b1", "small"),
		{Name: "lone", GPUs: 4, Labels: map[string]string{}}, // a leaf of its own, too small for an 8-GPU pod
	})
	require.NoError(t, err)
	require.Zero(t, layout.Spec.NodesPerLeaf, "a snapshot's layout has no fabric spec")
	jobs := []scenario.Job{
		{Name: "low", Pods: 1, GPUsPerPod: 8}, // urgent jobs are those above the lowest priority
		{Name: "three", Gang: true, Pods: 3, GPUsPerPod: 8, Priority: 100},
		{Name: "four", Gang: true, Pods: 4, GPUsPerPod: 8, Priority: 100},
	}
	pt := NewPreemptionTracker(layout, jobs)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	index := map[string]int{}
	for i, n := range layout.Nodes {
		index[n.Name] = i
	}
	bind := func(job string, i int, node string) {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", job, i), Labels: map[string]string{workload.JobLabel: job, workload.RoleLabel: workload.RoleWorkload}}}
		p.Spec.NodeName = layout.Nodes[index[node]].Name
		pt.Observe(p, start.Add(time.Second))
	}
	for _, j := range jobs {
		pt.Submitted(j.Name, start)
	}
	// "three" fits the big leaf but spans both; "four" needs both.
	bind("three", 0, "a1")
	bind("three", 1, "a2")
	bind("three", 2, "b1")
	got := pt.Summary("gpu-gang")
	require.Equal(t, 2, got.LeavesSpanned)
	require.Equal(t, 1, got.ExtraLeaves, "three 8-GPU pods fit the 3-node leaf")

	pt = NewPreemptionTracker(layout, jobs)
	for _, j := range jobs {
		pt.Submitted(j.Name, start)
	}
	for i, n := range []string{"a1", "a2", "a3", "b1"} {
		bind("four", i, n)
	}
	got = pt.Summary("gpu-gang")
	require.Equal(t, 0, got.ExtraLeaves, "four 8-GPU pods need both leaves that hold one; the 4-GPU node holds none")
}
