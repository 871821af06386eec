package integration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// Gang preemption against the real API server: the victims are evicted
// whole (marked with DisruptionTarget, then deleted), the preemptor binds
// into the room they free, inside one domain, and nothing else is touched.

const (
	// evictionSpread is how far apart the deletions of one victim gang may
	// land: they are issued together, each an API call of its own.
	evictionSpread = 2 * time.Second
	// noMoreEvictionsWindow is how long a test watches, after the
	// preemptor bound, that nothing more is evicted.
	noMoreEvictionsWindow = 2 * time.Second
)

// priorityClass creates a PriorityClass for env's test and deletes it when
// the test ends; PriorityClasses are cluster-wide, so the name carries the
// namespace. It returns once the Priority admission plugin, which resolves
// names from an informer of its own, admits a pod naming the class: until
// then creating such a pod is refused with "no PriorityClass with name".
func (env *testEnv) priorityClass(name string, value int32) string {
	env.t.Helper()
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: env.ns + "-" + name}, Value: value}
	if _, err := kubeClient.SchedulingV1().PriorityClasses().Create(env.t.Context(), pc, metav1.CreateOptions{}); err != nil {
		env.t.Fatalf("creating PriorityClass %s: %v", pc.Name, err)
	}
	env.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := kubeClient.SchedulingV1().PriorityClasses().Delete(ctx, pc.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			env.t.Errorf("deleting PriorityClass %s: %v", pc.Name, err)
		}
	})
	probe := probePod(env.ns, "priority-probe")
	probe.Spec.PriorityClassName = pc.Name
	err := waitFor(env.t.Context(), eventTimeout, func(ctx context.Context) (bool, error) {
		_, err := kubeClient.CoreV1().Pods(env.ns).Create(ctx, probe.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return true, err
	})
	if err != nil {
		env.t.Fatalf("admission never saw PriorityClass %s: %v", pc.Name, err)
	}
	return pc.Name
}

// prioritized sets a priorityClassName on pods; the Priority admission
// plugin resolves it to spec.priority.
func prioritized(class string, pods []*v1.Pod) []*v1.Pod {
	for _, p := range pods {
		p.Spec.PriorityClassName = class
	}
	return pods
}

// onLeaf pins pods to one leaf of a fabric with a node selector.
func onLeaf(leaf string, pods []*v1.Pod) []*v1.Pod {
	for _, p := range pods {
		p.Spec.NodeSelector = map[string]string{leafLabel: leaf}
	}
	return pods
}

// onNodes pins pods[i] to node nodes[i] (a name as createNodes was given
// it) with a hostname node selector.
func (env *testEnv) onNodes(pods []*v1.Pod, nodes ...string) []*v1.Pod {
	for i, p := range pods {
		p.Spec.NodeSelector = map[string]string{v1.LabelHostname: env.nodeName(nodes[i])}
	}
	return pods
}

// manageByKwok hands env's nodes to kwok, which then runs their pods and
// confirms their deletion as a kubelet would. Call it before startKwok.
func (env *testEnv) manageByKwok() {
	env.t.Helper()
	ctx := env.t.Context()
	nodes, err := kubeClient.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: testNodeLabel + "=" + env.ns})
	if err != nil {
		env.t.Fatalf("listing nodes: %v", err)
	}
	patch := []byte(`{"metadata":{"annotations":{"kwok.x-k8s.io/node":"fake"}}}`)
	for _, n := range nodes.Items {
		if _, err := kubeClient.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			env.t.Fatalf("handing node %s to kwok: %v", n.Name, err)
		}
	}
}

// runGang creates a gang's PodGroup and pods and waits until they are bound.
func (env *testEnv) runGang(name string, pods []*v1.Pod) map[string]string {
	env.t.Helper()
	return env.runPodGroup(gangtest.MakePodGroup(name, env.ns).MinMember(int32(len(pods))), pods)
}

// runPodGroup is runGang with the PodGroup pg builds: one with annotations,
// say.
func (env *testEnv) runPodGroup(pg *gangtest.PodGroupWrapper, pods []*v1.Pod) map[string]string {
	env.t.Helper()
	env.createPodGroup(pg.Obj())
	env.createPods(pods...)
	return env.waitForBound(bindTimeout, pods...)
}

// evictionWatcher follows every pod event of a namespace and records each
// deletion of a bound pod: when, from which node, whether it was marked as
// a preemption victim first.
type evictionWatcher struct {
	mu      sync.Mutex
	node    map[types.UID]string
	deleted map[string][]eviction // by gang; "" for pods outside gangs
	// terminating are the pods seen with a deletionTimestamp before they
	// went: deleted gracefully.
	terminating map[types.UID]bool
}

type eviction struct {
	pod, node string
	at        time.Time
	marked    bool
	graceful  bool
}

func (env *testEnv) watchEvictions() *evictionWatcher {
	w := &evictionWatcher{node: map[types.UID]string{}, deleted: map[string][]eviction{}, terminating: map[types.UID]bool{}}
	env.watchPods(func(pod *v1.Pod, deleted bool) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if pod.Spec.NodeName != "" {
			w.node[pod.UID] = pod.Spec.NodeName
		}
		if !deleted {
			if pod.DeletionTimestamp != nil {
				w.terminating[pod.UID] = true
			}
			return
		}
		if w.node[pod.UID] == "" {
			return
		}
		marked := false
		for _, c := range pod.Status.Conditions {
			if c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue && c.Reason == v1.PodReasonPreemptionByScheduler {
				marked = true
			}
		}
		g := pod.Labels[scheduling.PodGroupLabel]
		w.deleted[g] = append(w.deleted[g], eviction{pod: pod.Name, node: w.node[pod.UID], at: time.Now(), marked: marked, graceful: w.terminating[pod.UID]})
	})
	return w
}

// evicted returns, per gang with evicted pods, how many went.
func (w *evictionWatcher) evicted() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for g, es := range w.deleted {
		out[g] = len(es)
	}
	return out
}

// allGraceful reports whether every evicted pod was seen terminating
// before it went.
func (w *evictionWatcher) allGraceful() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, es := range w.deleted {
		for _, e := range es {
			if !e.graceful {
				return false
			}
		}
	}
	return true
}

// nodes returns the nodes the evicted pods of the given gangs ran on.
func (w *evictionWatcher) nodes(gangs ...string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, g := range gangs {
		for _, e := range w.deleted[g] {
			out = append(out, e.node)
		}
	}
	sort.Strings(out)
	return out
}

// expectWhole fails the test unless each gang lost all of its size pods or
// none, within evictionSpread, every pod marked as a preemption victim
// before it went. It returns the evicted gangs, sorted.
func (w *evictionWatcher) expectWhole(t *testing.T, sizes map[string]int) []string {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	var whole []string
	for g, es := range w.deleted {
		size, known := sizes[g]
		if !known {
			t.Errorf("pods %v of %q were evicted, which the test does not expect to lose any", es, g)
			continue
		}
		if len(es) != size {
			t.Errorf("gang %s lost %d of its %d pods: partly evicted", g, len(es), size)
		}
		first, last := es[0].at, es[0].at
		for _, e := range es {
			if !e.marked {
				t.Errorf("pod %s of gang %s was deleted without the %s condition (reason %s)", e.pod, g, v1.DisruptionTarget, v1.PodReasonPreemptionByScheduler)
			}
			first, last = minTime(first, e.at), maxTime(last, e.at)
		}
		if last.Sub(first) > evictionSpread {
			t.Errorf("gang %s was evicted over %s: part of it ran on without the rest", g, last.Sub(first))
		}
		whole = append(whole, g)
	}
	sort.Strings(whole)
	return whole
}

// expectNoMoreEvictions checks, for window, that no further pod is evicted.
func (w *evictionWatcher) expectNoMoreEvictions(t *testing.T, window time.Duration) {
	t.Helper()
	before := w.evicted()
	err := staysTrue(t.Context(), window, func(context.Context) error {
		if now := w.evicted(); fmt.Sprint(now) != fmt.Sprint(before) {
			return fmt.Errorf("more pods were evicted: %v, before %v", now, before)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("within %s: %v", window, err)
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func sortedValues(m map[string]string) []string {
	out := mapValues(m)
	sort.Strings(out)
	return out
}

// The case: 16 nodes full of four low-priority 4-node gangs, one per
// leaf. A high-priority 8-node gang evicts exactly two of them, whole, both
// under one spine, and binds there; the other two are never touched.
func TestPreemptionEvictsWholeGangsInsideOneSpine(t *testing.T) {
	env := newTestEnv(t)
	f := env.createFabric(2, 2, 4, 2)
	low, high := env.priorityClass("low", 10), env.priorityClass("high", 1000)
	lows := []string{"low-a", "low-b", "low-c", "low-d"}
	sizes := map[string]int{}
	gangs := map[string]int{"urgent": 8}
	for _, g := range lows {
		sizes[g], gangs[g] = 4, 4
	}
	watch := env.watchGangs(gangs)
	evictions := env.watchEvictions()
	for i, g := range lows {
		env.runGang(g, onLeaf(f.leaves[i], prioritized(low, env.gangPods(g, 4, 8))))
	}

	urgent := prioritized(high, env.gangPods("urgent", 8, 8))
	nodes := env.runGang("urgent", urgent)

	victims := evictions.expectWhole(t, sizes)
	if len(victims) != 2 {
		t.Fatalf("evicted gangs %v; want exactly the 2 that one spine needs", victims)
	}
	if n := spans(nodes, f.spineOf); n != 1 {
		t.Errorf("the urgent gang spans %d spines, want 1: %v", n, nodes)
	}
	if got, want := sortedValues(nodes), evictions.nodes(victims...); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the urgent gang landed on %v, not on the nodes its victims freed %v", got, want)
	}
	spine := f.spineOf[mapValues(nodes)[0]]
	for _, g := range victims {
		ev := env.waitForEvent("PodGroup", g, coscheduling.ReasonPreempted)
		want := fmt.Sprintf("preempted by %s/urgent, priority 1000, to place it in spine %s", env.ns, spine)
		if !strings.Contains(ev.Note, want) {
			t.Errorf("the Event on victim %s says %q; want it to contain %q", g, ev.Note, want)
		}
	}
	ev := env.waitForEvent("PodGroup", "urgent", coscheduling.ReasonPreempting)
	for _, g := range victims {
		if !strings.Contains(ev.Note, g) {
			t.Errorf("the preemptor's Event %q does not name victim %s", ev.Note, g)
		}
	}
	t.Logf("preemptor's Event: %s", ev.Note)
	evictions.expectNoMoreEvictions(t, noMoreEvictionsWindow)
	evictions.expectWhole(t, sizes)
	watch.expectNeverPartial()
}

// A preemptor that requires one leaf takes a whole leaf: the two gangs of
// one leaf go, not the two cheapest gangs of the cluster, which sit in
// different leaves and would free room no leaf could use.
func TestRequiredLeafPreemptorClearsOneLeaf(t *testing.T) {
	env := newTestEnv(t)
	f := env.createFabric(2, 2, 4, 2)
	cheap, dearer, high := env.priorityClass("cheap", 10), env.priorityClass("dearer", 20), env.priorityClass("high", 1000)
	sizes := map[string]int{}
	for i, leaf := range f.leaves {
		// Each leaf holds one cheap and one dearer 2-node gang.
		for _, c := range []struct{ name, class string }{{"cheap", cheap}, {"dearer", dearer}} {
			g := fmt.Sprintf("%s-%d", c.name, i)
			sizes[g] = 2
			env.runGang(g, onLeaf(leaf, prioritized(c.class, env.gangPods(g, 2, 8))))
		}
	}
	evictions := env.watchEvictions()

	env.createPodGroup(gangtest.MakePodGroup("ring", env.ns).MinMember(4).
		Annotation(scheduling.AnnotationTopologyRequired, leafLabel).Obj())
	ring := prioritized(high, env.gangPods("ring", 4, 8))
	env.createPods(ring...)
	nodes := env.waitForBound(bindTimeout, ring...)

	victims := evictions.expectWhole(t, sizes)
	if len(victims) != 2 {
		t.Fatalf("evicted gangs %v; want the 2 gangs of one leaf", victims)
	}
	if n := spans(nodes, f.leafOf); n != 1 {
		t.Errorf("the ring spans %d leaves despite requiring one: %v", n, nodes)
	}
	leaf := f.leafOf[mapValues(nodes)[0]]
	for _, node := range evictions.nodes(victims...) {
		if f.leafOf[node] != leaf {
			t.Errorf("victims %v ran outside the ring's leaf %s (on %s)", victims, leaf, node)
		}
	}
	evictions.expectNoMoreEvictions(t, noMoreEvictionsWindow)
}

// Two preemptors at once, on kwok nodes whose pods terminate gracefully:
// each evicts a gang of its own, neither counts on the room the other's
// victims free, and each binds into its own leaf.
func TestTwoPreemptorsAtOnce(t *testing.T) {
	env := newTestEnv(t)
	f := env.createFabric(2, 2, 4, 4)
	env.manageByKwok()
	startKwok(t)
	low, high := env.priorityClass("low", 10), env.priorityClass("high", 1000)
	sizes := map[string]int{}
	gangs := map[string]int{"first": 4, "second": 4}
	for i := range f.leaves {
		g := fmt.Sprintf("low-%d", i)
		sizes[g], gangs[g] = 4, 4
	}
	watch := env.watchGangs(gangs)
	for i, leaf := range f.leaves {
		pods := onLeaf(leaf, prioritized(low, env.gangPods(fmt.Sprintf("low-%d", i), 4, 8)))
		for _, p := range pods {
			// Victims take their time to go, as real pods do: the API
			// server marks them and kwok confirms the deletion.
			p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
		}
		env.runGang(fmt.Sprintf("low-%d", i), pods)
	}
	evictions := env.watchEvictions()

	env.createPodGroup(gangtest.MakePodGroup("first", env.ns).MinMember(4).Obj())
	env.createPodGroup(gangtest.MakePodGroup("second", env.ns).MinMember(4).Obj())
	first, second := prioritized(high, env.gangPods("first", 4, 8)), prioritized(high, env.gangPods("second", 4, 8))
	env.createPods(append(first, second...)...)
	a := env.waitForBound(retryBindTimeout, first...)
	b := env.waitForBound(retryBindTimeout, second...)

	victims := evictions.expectWhole(t, sizes)
	if len(victims) != 2 {
		t.Fatalf("evicted gangs %v; want one per preemptor", victims)
	}
	if !evictions.allGraceful() {
		t.Errorf("some victims went at once; this test is about victims that take their grace period")
	}
	if spans(a, f.leafOf) != 1 || spans(b, f.leafOf) != 1 || f.leafOf[mapValues(a)[0]] == f.leafOf[mapValues(b)[0]] {
		t.Errorf("the preemptors do not have a leaf each: first %v, second %v", a, b)
	}
	evictions.expectNoMoreEvictions(t, noMoreEvictionsWindow)
	watch.expectNeverPartial()
}

// A plain high-priority pod takes the node of one elastic member (above
// minMember, not the lowest-ranked), and the gang keeps running.
func TestPlainPodPreemptsOneElasticMember(t *testing.T) {
	env := newTestEnv(t)
	env.gpuNodes(4, 8)
	low, high := env.priorityClass("low", 10), env.priorityClass("high", 1000)
	elastic := prioritized(low, env.gangPods("elastic", 4, 8))
	for i, p := range elastic {
		p.Labels[scheduling.RankLabel] = fmt.Sprint(i)
	}
	env.createPodGroup(gangtest.MakePodGroup("elastic", env.ns).MinMember(3).Obj())
	env.createPods(elastic...)
	env.waitForBound(bindTimeout, elastic...)
	evictions := env.watchEvictions()

	hot := prioritized(high, []*v1.Pod{env.pod("hot").Res(gpuRequest(8)).Obj()})[0]
	env.createPods(hot)
	env.waitForBound(bindTimeout, hot)

	got := evictions.evicted()
	if len(got) != 1 || got["elastic"] != 1 {
		t.Fatalf("evicted %v; want one member of the elastic gang", got)
	}
	var kept []*v1.Pod
	for _, p := range elastic {
		if _, err := kubeClient.CoreV1().Pods(env.ns).Get(t.Context(), p.Name, metav1.GetOptions{}); err == nil {
			kept = append(kept, p)
		} else if p.Name == "elastic-0" {
			t.Errorf("the lowest-ranked member, elastic-0, was evicted")
		}
	}
	ev := env.waitForEvent("PodGroup", "elastic", coscheduling.ReasonPreempted)
	if !strings.Contains(ev.Note, "the gang keeps running with 3") {
		t.Errorf("the Event on the elastic gang says %q", ev.Note)
	}
	// The gang keeps its three members.
	err := staysTrue(t.Context(), noMoreEvictionsWindow, func(ctx context.Context) error {
		nodes, err := env.boundNodes(ctx, podNames(kept))
		if err != nil {
			return err
		}
		for name, node := range nodes {
			if node == "" {
				return fmt.Errorf("member %s is not bound", name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A gang of the same priority as the running ones evicts nothing: it waits.
func TestEqualPriorityDoesNotPreempt(t *testing.T) {
	env := newTestEnv(t)
	env.gpuNodes(4, 8)
	same := env.priorityClass("same", 100)
	env.runGang("running", prioritized(same, env.gangPods("running", 4, 8)))
	evictions := env.watchEvictions()

	env.createPodGroup(gangtest.MakePodGroup("late", env.ns).MinMember(2).Obj())
	late := prioritized(same, env.gangPods("late", 2, 8))
	env.createPods(late...)
	env.expectStaysUnbound(staysUnboundWindow, late...)
	if got := evictions.evicted(); len(got) != 0 {
		t.Errorf("evicted %v for a gang of equal priority", got)
	}
}
