package integration

// Kubernetes' CompositePodGroups (scheduling.k8s.io/v1alpha3) admitted by
// gpu-gang all or nothing, on a control plane that serves them
// (useNativeControlPlane), with the scheduler binary as in
// TestNativePodGroups. The subtests share one control plane and scheduler:
// starting them is most of a test's time.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/gpu-gang/gpu-gang/pkg/controller/podgroup"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// compositeShape is one composite of a test: its minGroupCount and the
// minCount of each child PodGroup, by name.
type compositeShape struct {
	minGroupCount int
	children      map[string]int
}

// compositeWatcher watches a namespace's pods and notes every span, longer
// than partialBindGrace, during which a composite is partly started: some
// member bound while fewer than minGroupCount children have their own
// minCount bound, or a child has some but fewer than minCount bound. A
// member deleted after binding still counts as bound: a composite that ran
// whole and then finished never was partial.
type compositeWatcher struct {
	t          *testing.T
	pods       *nsWatch
	mu         sync.Mutex
	shapes     map[string]compositeShape
	parentOf   map[string]string
	bound      map[string]sets.Set[string] // by child
	since      map[string]time.Time        // by composite, while partial
	violations []string
}

func (env *testEnv) watchComposites(shapes map[string]compositeShape) *compositeWatcher {
	env.t.Helper()
	w := &compositeWatcher{t: env.t, shapes: shapes, parentOf: map[string]string{}, bound: map[string]sets.Set[string]{}, since: map[string]time.Time{}}
	for name, s := range shapes {
		for c := range s.children {
			w.parentOf[c] = name
			w.bound[c] = sets.New[string]()
		}
	}
	w.pods = env.watchPods(func(pod *v1.Pod, deleted bool) {
		if !deleted {
			w.observe(pod, time.Now())
		}
	})
	return w
}

func (w *compositeWatcher) observe(pod *v1.Pod, now time.Time) {
	key, ok := gang.Of(pod)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	parent, ok := w.parentOf[key.Name]
	if !ok {
		return
	}
	w.bound[key.Name].Insert(string(pod.UID))
	partial := w.partial(parent)
	switch since, open := w.since[parent]; {
	case partial && !open:
		w.since[parent] = now
	case !partial && open:
		if d := now.Sub(since); d > partialBindGrace {
			w.violations = append(w.violations, fmt.Sprintf("composite %s was partly started for %s from %s", parent, d.Round(time.Millisecond), since.Format(time.StampMilli)))
		}
		delete(w.since, parent)
	}
}

// partial reports whether composite name is partly started now.
func (w *compositeWatcher) partial(name string) bool {
	s := w.shapes[name]
	any, whole := false, 0
	for c, minCount := range s.children {
		n := w.bound[c].Len()
		any = any || n > 0
		switch {
		case n >= minCount:
			whole++
		case n > 0:
			return true
		}
	}
	return any && whole < s.minGroupCount
}

// expectNeverPartial fails the test if a composite was partly started for
// longer than partialBindGrace, or still is.
func (w *compositeWatcher) expectNeverPartial() {
	w.t.Helper()
	w.pods.waitCaughtUp(w.t)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, v := range w.violations {
		w.t.Error(v)
	}
	names := make([]string, 0, len(w.since))
	for name := range w.since {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if d := time.Since(w.since[name]); d > partialBindGrace {
			w.t.Errorf("composite %s is partly started since %s ago", name, d.Round(time.Millisecond))
		}
	}
}

// waitForCompositeCondition waits until composite name's status has the
// condition with the given status.
func (env *testEnv) waitForCompositeCondition(name, condType string, status metav1.ConditionStatus) {
	env.t.Helper()
	var conds []metav1.Condition
	err := waitFor(env.t.Context(), statusTimeout, func(ctx context.Context) (bool, error) {
		cpg, err := kubeClient.SchedulingV1alpha3().CompositePodGroups(env.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds = cpg.Status.Conditions
		c := meta.FindStatusCondition(conds, condType)
		return c != nil && c.Status == status, nil
	})
	if err != nil {
		env.t.Fatalf("waiting %s for CompositePodGroup %s to show %s=%s: %v; conditions: %+v", statusTimeout, name, condType, status, err, conds)
	}
}

// createComposite creates a CompositePodGroup in env's namespace.
func (env *testEnv) createComposite(cpg *schedulingv1alpha3.CompositePodGroup) {
	env.t.Helper()
	cpg = cpg.DeepCopy()
	cpg.UID = ""
	cpg.CreationTimestamp = metav1.Time{}
	if _, err := kubeClient.SchedulingV1alpha3().CompositePodGroups(env.ns).Create(env.t.Context(), cpg, metav1.CreateOptions{}); err != nil {
		env.t.Fatalf("creating CompositePodGroup %s: %v", cpg.Name, err)
	}
}

// createTree creates composite name of minGroupCount with its child
// PodGroups (each of minCount members, from one Workload, as the API
// requires of a PodGroup that names a parent), and returns the children's
// members, each asking for gpus GPUs.
func (env *testEnv) createTree(name string, shape compositeShape, gpus int, opts ...func(*gangtest.CompositePodGroupWrapper)) map[string][]*v1.Pod {
	env.t.Helper()
	c := gangtest.MakeCompositePodGroup(name, env.ns).MinGroupCount(int32(shape.minGroupCount)).Workload(name, name)
	for _, o := range opts {
		o(c)
	}
	env.createComposite(c.Obj())
	out := map[string][]*v1.Pod{}
	for _, child := range sortedKeys(shape.children) {
		n := shape.children[child]
		env.createNativePodGroup(gangtest.MakeNativePodGroup(child, env.ns).MinCount(int32(n)).Parent(name).Workload(name, child).Obj())
		out[child] = env.nativePods(child, n, gpus)
	}
	return out
}

func allPods(byChild map[string][]*v1.Pod) []*v1.Pod {
	var out []*v1.Pod
	for _, c := range sortedKeys(byChild) {
		out = append(out, byChild[c]...)
	}
	return out
}

func TestCompositePodGroups(t *testing.T) {
	useNativeControlPlane(t)
	startPodGroupController(t, podgroup.DefaultMissingMembersGrace)
	startNativeScheduler(t)

	// (a) Two composites that each need the whole cluster: one starts
	// whole, the other waits whole, and starts once the first finished.
	t.Run("two composites under contention never start in part", func(t *testing.T) {
		env := newTestEnv(t)
		env.gpuNodes(4, 8)
		shape := func(p string) compositeShape {
			return compositeShape{minGroupCount: 2, children: map[string]int{p + "-a": 2, p + "-b": 2}}
		}
		w := env.watchComposites(map[string]compositeShape{"first": shape("first"), "second": shape("second")})
		first := allPods(env.createTree("first", shape("first"), 8))
		second := allPods(env.createTree("second", shape("second"), 8))
		// Interleave their members, so that each child of either could
		// take a node first.
		var pods []*v1.Pod
		for i := range first {
			pods = append(pods, first[i], second[i])
		}
		env.createPods(pods...)

		winner, loser := first, second
		bound := env.waitForBoundCount(retryBindTimeout, 4, pods...)
		if strings.HasPrefix(bound[0], "second") {
			winner, loser = second, first
		}
		env.expectStaysUnbound(staysUnboundWindow, loser...)
		w.expectNeverPartial()
		env.deleteAndWait(winner...) // the first job finished
		env.waitForBound(retryBindTimeout, loser...)
		w.expectNeverPartial()
	})

	// (b) minGroupCount 2 of 3 children: two whole children start while
	// the third still gathers; the third joins whole once it has.
	t.Run("minGroupCount below the number of children", func(t *testing.T) {
		env := newTestEnv(t)
		env.gpuNodes(6, 8)
		shape := compositeShape{minGroupCount: 2, children: map[string]int{"x": 2, "y": 2, "z": 2}}
		w := env.watchComposites(map[string]compositeShape{"job": shape})
		byChild := env.createTree("job", shape, 8)
		env.createPods(append(byChild["x"], append(byChild["y"], byChild["z"][0])...)...)
		env.waitForBound(retryBindTimeout, append(byChild["x"], byChild["y"]...)...)
		env.waitForEvent("CompositePodGroup", "job", coscheduling.ReasonGangScheduled)
		env.expectStaysUnbound(staysUnboundWindow, byChild["z"][0])
		env.createPods(byChild["z"][1])
		env.waitForBound(retryBindTimeout, byChild["z"]...)
		w.expectNeverPartial()

		// Losing a member of x and one of y leaves one child of the two
		// minGroupCount asks for: the status controller says so.
		env.deleteAndWait(byChild["x"][0], byChild["y"][0])
		env.waitForCompositeCondition("job", podgroup.ConditionBelowMinMember, metav1.ConditionTrue)
	})

	// (c) A running composite whose children are all needed for its
	// minGroupCount is one victim: a pod that needs one node evicts all of
	// it, never one child, which would leave it running in part.
	t.Run("a composite victim of preemption goes whole", func(t *testing.T) {
		env := newTestEnv(t)
		env.gpuNodes(4, 8)
		low, high := env.priorityClass("low", 10), env.priorityClass("high", 1000)
		shape := compositeShape{minGroupCount: 2, children: map[string]int{"a": 2, "b": 2}}
		victim := prioritized(low, allPods(env.createTree("job", shape, 8)))
		env.createPods(victim...)
		env.waitForBound(bindTimeout, victim...)
		evictions := env.watchEvictions()

		hot := prioritized(high, []*v1.Pod{env.pod("hot").Res(gpuRequest(8)).Obj()})[0]
		env.createPods(hot)
		env.waitForBound(bindTimeout, hot)
		// Native members carry no gang label: the watcher counts them
		// under "".
		if got := evictions.evicted(); len(got) != 1 || got[""] != len(victim) {
			t.Fatalf("evicted %v; want all %d members of the composite", got, len(victim))
		}
		ev := env.waitForEvent("CompositePodGroup", "job", coscheduling.ReasonPreempted)
		if !strings.Contains(ev.Note, fmt.Sprintf("all %d of its running pods evicted", len(victim))) {
			t.Errorf("the Event on the composite says %q", ev.Note)
		}
	})

	// (d) A PodGroup that names a parent that does not exist: its members
	// wait with an Event on it that names the fix, and start once the
	// parent is made.
	t.Run("bad input: a missing parent", func(t *testing.T) {
		env := newTestEnv(t)
		env.gpuNodes(2, 8)
		env.createNativePodGroup(gangtest.MakeNativePodGroup("orphan", env.ns).MinCount(2).Parent("later").Workload("later", "orphan").Obj())
		pods := env.nativePods("orphan", 2, 8)
		env.createPods(pods...)
		ev := env.waitForEvent("PodGroup", "orphan", coscheduling.ReasonPodGroupNotFound)
		if !strings.Contains(ev.Note, "CompositePodGroup "+env.ns+"/later") || !strings.Contains(ev.Note, "create it") {
			t.Errorf("the Event does not name the parent and the fix: %q", ev.Note)
		}
		env.expectStaysUnbound(staysUnboundWindow, pods...)
		env.createComposite(gangtest.MakeCompositePodGroup("later", env.ns).MinGroupCount(1).Workload("later", "later").Obj())
		env.waitForBound(retryBindTimeout, pods...)
	})
}
