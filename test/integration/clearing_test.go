package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// Clearing one domain for an urgent gang: which running gangs preemption
// takes when several leaves could be cleared. The cost order (see
// pkg/preemption's doc) spares higher priorities first, then the work that
// cannot be recovered (victims that are not movable), then GPU-seconds
// lost; and a victim gang goes whole, wherever its pods run.

// startedAt sets status.startTime of each pod, as a kubelet does when it
// starts one, to at: no kubelet runs here, and preemption measures the
// work a victim loses from it (gang.StartedAt). The scheduler's informer
// sees the update before any pod created after it, on the same watch.
func (env *testEnv) startedAt(at time.Time, pods ...*v1.Pod) {
	env.t.Helper()
	ctx := env.t.Context()
	for _, p := range pods {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := kubeClient.CoreV1().Pods(env.ns).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Status.StartTime = ptr.To(metav1.NewTime(at))
			_, err = kubeClient.CoreV1().Pods(env.ns).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			env.t.Fatalf("setting the start time of pod %s: %v", p.Name, err)
		}
	}
}

// leafGang builds the PodGroup of an urgent gang of n members that
// requires one leaf.
func (env *testEnv) leafGang(name string, n int) *gangtest.PodGroupWrapper {
	return gangtest.MakePodGroup(name, env.ns).MinMember(int32(n)).Annotation(scheduling.AnnotationTopologyRequired, leafLabel)
}

// expectNoGangPartlyRunning checks, for window, that each gang of sizes
// has all of its pods bound or none left: a victim gang is evicted whole.
// Pods being deleted count as gone.
func (env *testEnv) expectNoGangPartlyRunning(window time.Duration, sizes map[string]int) {
	env.t.Helper()
	err := staysTrue(env.t.Context(), window, func(ctx context.Context) error {
		list, err := kubeClient.CoreV1().Pods(env.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		running := map[string]int{}
		for _, p := range list.Items {
			if g := p.Labels[scheduling.PodGroupLabel]; g != "" && p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
				running[g]++
			}
		}
		for g, size := range sizes {
			if n := running[g]; n != 0 && n != size {
				return fmt.Errorf("gang %s runs with %d of its %d pods", g, n, size)
			}
		}
		return nil
	})
	if err != nil {
		env.t.Fatalf("within %s: %v", window, err)
	}
}

// Five leaves of two nodes, each full with one 2-node gang of mixed
// priority, size and age; where a gang holds less than its nodes, pods of
// the preemptors' priority take the rest. A first urgent gang of 8-GPU
// members clears the leaf of the lowest priority, old, though it has run
// longest. A second, of 2-GPU members, spares mid, of higher priority,
// though it would lose the least, and of the three gangs of priority 10
// clears the one that loses the fewest GPU-seconds: half (8 GPUs for 8
// minutes), not wide, which started last (16 GPUs for 5 minutes), nor
// thin, which holds the fewest GPUs (4 for 20 minutes).
func TestClearingLowestPriorityThenLeastGPUSeconds(t *testing.T) {
	env := newTestEnv(t)
	f := env.createFabric(1, 5, 2, 2)
	p5, p10, p20 := env.priorityClass("p5", 5), env.priorityClass("p10", 10), env.priorityClass("p20", 20)
	high := env.priorityClass("high", 1000)
	now := time.Now()
	victims := []struct {
		name, leaf, class string
		gpus              int
		ran               time.Duration
	}{
		{"old", "s0-l0", p5, 8, 10 * time.Hour},
		{"mid", "s0-l1", p20, 8, time.Minute},
		{"wide", "s0-l2", p10, 8, 5 * time.Minute},
		{"half", "s0-l3", p10, 4, 8 * time.Minute},
		{"thin", "s0-l4", p10, 2, 20 * time.Minute},
	}
	sizes := map[string]int{}
	gangs := map[string]int{"urgent": 2, "second": 2}
	for _, v := range victims {
		sizes[v.name], gangs[v.name] = 2, 2
	}
	watch := env.watchGangs(gangs)
	for _, v := range victims {
		if v.gpus < 8 {
			env.occupyWith(high, 8-v.gpus, v.leaf+"-n0", v.leaf+"-n1")
		}
		pods := onLeaf(v.leaf, prioritized(v.class, env.gangPods(v.name, 2, v.gpus)))
		env.runGang(v.name, pods)
		env.startedAt(now.Add(-v.ran), pods...)
	}
	evictions := env.watchEvictions()

	urgent := prioritized(high, env.gangPods("urgent", 2, 8))
	nodes := env.runPodGroup(env.leafGang("urgent", 2), urgent)
	if got := evictions.expectWhole(t, sizes); fmt.Sprint(got) != "[old]" {
		t.Fatalf("the first urgent gang evicted %v; want [old], the lowest priority", got)
	}
	if got, want := sortedValues(nodes), evictions.nodes("old"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the first urgent gang landed on %v, not on the nodes of old %v", got, want)
	}

	second := prioritized(high, env.gangPods("second", 2, 2))
	nodes = env.runPodGroup(env.leafGang("second", 2), second)
	if got := evictions.expectWhole(t, sizes); fmt.Sprint(got) != "[half old]" {
		t.Fatalf("after the second urgent gang, evicted %v; want [half old]: half loses the fewest GPU-seconds of priority 10", got)
	}
	for _, n := range nodes {
		if f.leafOf[n] != "s0-l3" {
			t.Errorf("the second urgent gang landed on %s, outside half's leaf s0-l3", n)
		}
	}
	ev := env.waitForEvent("PodGroup", "half", coscheduling.ReasonPreempted)
	if want := fmt.Sprintf("preempted by %s/second, priority 1000, to place it in leaf s0-l3", env.ns); !strings.Contains(ev.Note, want) {
		t.Errorf("the Event on half says %q; want it to contain %q", ev.Note, want)
	}
	evictions.expectNoMoreEvictions(t, noMoreEvictionsWindow)
	env.expectNoGangPartlyRunning(noMoreEvictionsWindow, sizes)
	watch.expectNeverPartial()
}

// A gang runs on the last two nodes of leaf s0-l0 and the first two of
// s0-l1; a cheap 2-node gang fills the rest of s0-l0, and pods no
// preemptor may evict the rest of s0-l1. An urgent gang that requires a
// leaf of four nodes either clears s0-l0, evicting the spanning gang whole
// (its pods in s0-l1 too), or, where another leaf is cheaper to clear,
// goes there and leaves the spanning gang alone. No gang is ever left
// partly running.
func TestClearingEvictsASpanningGangWhole(t *testing.T) {
	tests := []struct {
		name string
		// spines is 1 or 2; the second spine's first leaf holds one
		// 4-node gang, ns/other, and its second leaf unevictable pods.
		spines      int
		wantEvicted string
		wantLeaf    string
	}{
		{name: "the only clearable leaf", spines: 1, wantEvicted: "[low span]", wantLeaf: "s0-l0"},
		{name: "a leaf that one gang clears", spines: 2, wantEvicted: "[other]", wantLeaf: "s1-l0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			f := env.createFabric(tc.spines, 2, 4, 2)
			low, high := env.priorityClass("low", 10), env.priorityClass("high", 1000)
			sizes := map[string]int{"span": 4, "low": 2}
			if tc.spines == 2 {
				sizes["other"] = 4
			}
			gangs := map[string]int{"urgent": 4}
			for g, n := range sizes {
				gangs[g] = n
			}
			watch := env.watchGangs(gangs)
			env.occupyWith(high, 8, "s0-l1-n2", "s0-l1-n3")
			env.runGang("span", env.onNodes(prioritized(low, env.gangPods("span", 4, 8)), "s0-l0-n2", "s0-l0-n3", "s0-l1-n0", "s0-l1-n1"))
			env.runGang("low", env.onNodes(prioritized(low, env.gangPods("low", 2, 8)), "s0-l0-n0", "s0-l0-n1"))
			if tc.spines == 2 {
				env.runGang("other", onLeaf("s1-l0", prioritized(low, env.gangPods("other", 4, 8))))
				env.occupyWith(high, 8, "s1-l1-n0", "s1-l1-n1", "s1-l1-n2", "s1-l1-n3")
			}
			evictions := env.watchEvictions()

			urgent := prioritized(high, env.gangPods("urgent", 4, 8))
			nodes := env.runPodGroup(env.leafGang("urgent", 4), urgent)
			got := evictions.expectWhole(t, sizes)
			if fmt.Sprint(got) != tc.wantEvicted {
				t.Fatalf("evicted %v; want %s", got, tc.wantEvicted)
			}
			for _, n := range nodes {
				if f.leafOf[n] != tc.wantLeaf {
					t.Errorf("the urgent gang landed on %s, outside leaf %s: %v", n, tc.wantLeaf, nodes)
				}
			}
			evictions.expectNoMoreEvictions(t, noMoreEvictionsWindow)
			env.expectNoGangPartlyRunning(noMoreEvictionsWindow, sizes)
			watch.expectNeverPartial()
		})
	}
}

// Three leaves of two nodes, each full with one 2-node gang: rigid
// (priority 10, not movable: its annotation is malformed) started a minute
// ago; spot (priority 10, movable) has run ten hours; spot-hi (priority 20,
// movable) started a minute ago. The urgent gang clears spot's leaf: a
// movable gang goes before one of equal priority that is not, however
// long it has run, but not before a lower priority. (Had the start times
// not counted, rigid, which would lose no work either, would go first by
// name.) The malformed annotation is named in an Event on rigid's
// PodGroup.
func TestClearingPrefersMovableVictims(t *testing.T) {
	env := newTestEnv(t)
	f := env.createFabric(1, 3, 2, 2)
	p10, p20, high := env.priorityClass("p10", 10), env.priorityClass("p20", 20), env.priorityClass("high", 1000)
	now := time.Now()
	victims := []struct {
		name, leaf, class, movable string
		ran                        time.Duration
	}{
		{"rigid", "s0-l0", p10, "yes", time.Minute},
		{"spot", "s0-l1", p10, "true", 10 * time.Hour},
		{"spot-hi", "s0-l2", p20, "true", time.Minute},
	}
	sizes := map[string]int{}
	gangs := map[string]int{"urgent": 2}
	for _, v := range victims {
		sizes[v.name], gangs[v.name] = 2, 2
	}
	watch := env.watchGangs(gangs)
	for _, v := range victims {
		pods := onLeaf(v.leaf, prioritized(v.class, env.gangPods(v.name, 2, 8)))
		pg := gangtest.MakePodGroup(v.name, env.ns).MinMember(2).Annotation(scheduling.AnnotationMovable, v.movable)
		env.runPodGroup(pg, pods)
		env.startedAt(now.Add(-v.ran), pods...)
	}
	evictions := env.watchEvictions()

	urgent := prioritized(high, env.gangPods("urgent", 2, 8))
	nodes := env.runPodGroup(env.leafGang("urgent", 2), urgent)
	if got := evictions.expectWhole(t, sizes); fmt.Sprint(got) != "[spot]" {
		t.Fatalf("evicted %v; want [spot], the movable gang of the lowest priority", got)
	}
	if got, want := sortedValues(nodes), evictions.nodes("spot"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the urgent gang landed on %v, not on the nodes of spot %v", got, want)
	}
	for _, n := range nodes {
		if f.leafOf[n] != "s0-l1" {
			t.Errorf("the urgent gang landed on %s, outside leaf s0-l1", n)
		}
	}
	ev := env.waitForEvent("PodGroup", "rigid", scheduling.ReasonInvalidPodGroup)
	for _, want := range []string{scheduling.AnnotationMovable + `="yes"`, "not movable", `"true" or "false"`} {
		if !strings.Contains(ev.Note, want) {
			t.Errorf("the Event on rigid says %q; want it to contain %q", ev.Note, want)
		}
	}
	if ev.Type != v1.EventTypeWarning {
		t.Errorf("the Event on rigid is of type %s, want %s", ev.Type, v1.EventTypeWarning)
	}
	evictions.expectNoMoreEvictions(t, noMoreEvictionsWindow)
	env.expectNoGangPartlyRunning(noMoreEvictionsWindow, sizes)
	watch.expectNeverPartial()
}
