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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// Consolidation against the real API server: movable one-node jobs are
// moved out of an NVLink clique, whole, so that a waiting gang that
// requires one clique gets it, and only when they fit elsewhere.

const (
	// consolidationWait is the test scheduler's consolidation.waitingFor.
	consolidationWait = 2 * time.Second
	// noMoveWindow is how long a test watches that nothing is moved once
	// the waiting gang has waited well past consolidationWait.
	noMoveWindow = 3 * consolidationWait
)

// consolidationArgs enables consolidation with a short wait; the moved
// jobs must have run for a second.
var consolidationArgs = map[string]any{"consolidation": map[string]any{
	"enabled": true, "waitingFor": consolidationWait.String(), "minRunTime": "1s", "maxEvictionsPerHour": 10, "cooldown": "1h",
}}

// markRunning sets the pods Running, started now, as their kubelet would
// once their containers run. No kubelet runs here.
func (env *testEnv) markRunning(pods ...*v1.Pod) {
	env.t.Helper()
	ctx := env.t.Context()
	for _, p := range pods {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			live, err := kubeClient.CoreV1().Pods(env.ns).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			live.Status.Phase = v1.PodRunning
			live.Status.StartTime = ptr.To(metav1.Now())
			_, err = kubeClient.CoreV1().Pods(env.ns).UpdateStatus(ctx, live, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			env.t.Fatalf("marking pod %s running: %v", p.Name, err)
		}
	}
}

// cliqueWithMovableJobs builds a fabric of two leaves of 4 nodes, each leaf
// one NVLink clique, and runs two movable one-node jobs, mov-a and mov-b,
// on the first two nodes of clique s0-l0-c0; every other node runs a pod
// outside gangs until the test frees it (the returned pods, by node short
// name). It returns the fabric and the movable jobs' pods.
func (env *testEnv) cliqueWithMovableJobs() (*fabric, map[string]*v1.Pod, map[string][]*v1.Pod) {
	env.t.Helper()
	f := env.createFabric(1, 2, 4, 4)
	others := []string{"s0-l0-n2", "s0-l0-n3", "s0-l1-n0", "s0-l1-n1", "s0-l1-n2", "s0-l1-n3"}
	busy := map[string]*v1.Pod{}
	for i, p := range env.occupy(others...) {
		busy[others[i]] = p
	}
	movable := map[string][]*v1.Pod{}
	for _, name := range []string{"mov-a", "mov-b"} {
		pods := env.gangPods(name, 1, 8)
		env.createPodGroup(gangtest.MakePodGroup(name, env.ns).MinMember(1).Annotation(scheduling.AnnotationMovable, "true").Obj())
		env.createPods(pods...)
		nodes := env.waitForBound(bindTimeout, pods...)
		env.expectOn(nodes, "s0-l0-n0", "s0-l0-n1")
		env.markRunning(pods...)
		movable[name] = pods
	}
	return f, busy, movable
}

// bigCliqueGang creates a 4-node gang that requires one NVLink clique.
func (env *testEnv) bigCliqueGang() []*v1.Pod {
	env.t.Helper()
	pods := env.gangPods("big", 4, 8)
	env.createPodGroup(gangtest.MakePodGroup("big", env.ns).MinMember(4).Annotation(scheduling.AnnotationTopologyRequired, cliqueLabel).Obj())
	env.createPods(pods...)
	return pods
}

// Two movable jobs hold half of one clique and the other clique is half
// busy: a 4-node gang that requires a clique fits nowhere, though the
// fabric has room for it. Once it has waited, both movable jobs are
// evicted whole, the gang binds in their clique, and the jobs, recreated as
// their controller would, run again whole on the free nodes of the other,
// which were held for them meanwhile.
func TestConsolidationMovesJobsToFreeAClique(t *testing.T) {
	env := newTestEnv(t)
	replaceInProcessScheduler(t, consolidationArgs)
	f, busy, movable := env.cliqueWithMovableJobs()
	env.deleteAndWait(busy["s0-l0-n2"], busy["s0-l0-n3"], busy["s0-l1-n2"], busy["s0-l1-n3"])
	evictions := env.watchEvictions()

	created := time.Now()
	big := env.bigCliqueGang()
	moved := append(append([]*v1.Pod{}, movable["mov-a"]...), movable["mov-b"]...)
	env.waitForDeleted(moved...)
	// The gang waits from its creationTimestamp, which the API keeps to
	// the second.
	if waited := time.Since(created); waited < consolidationWait-time.Second {
		t.Errorf("the movable jobs were evicted %s after the gang was created, before it waited %s", waited, consolidationWait)
	}
	note := env.waitForEvent("PodGroup", "big", coscheduling.ReasonConsolidating).Note
	for _, want := range []string{env.ns + "/mov-a", env.ns + "/mov-b", "s0-l0-c0"} {
		if !strings.Contains(note, want) {
			t.Errorf("the %s Event on big says %q, which does not name %s", coscheduling.ReasonConsolidating, note, want)
		}
	}
	for _, name := range []string{"mov-a", "mov-b"} {
		note := env.waitForEvent("PodGroup", name, coscheduling.ReasonMoved).Note
		if want := "moved to free NVLink domain s0-l0-c0 for gang " + env.ns + "/big"; !strings.Contains(note, want) {
			t.Errorf("the %s Event on %s says %q, want it to say %q", coscheduling.ReasonMoved, name, note, want)
		}
	}

	bigNodes := env.waitForBound(bindTimeout, big...)
	if n := spans(bigNodes, f.cliqueOf); n != 1 {
		t.Errorf("gang big spans %d cliques: %v", n, bigNodes)
	}
	env.expectOn(bigNodes, "s0-l0-n0", "s0-l0-n1", "s0-l0-n2", "s0-l0-n3")
	if whole := evictions.expectWhole(t, map[string]int{"mov-a": 1, "mov-b": 1}); fmt.Sprint(whole) != "[mov-a mov-b]" {
		t.Errorf("evicted gangs %v, want mov-a and mov-b", whole)
	}

	// Their places in the other clique are held for them: a pod that
	// would fit there stays out.
	interloper := env.pod("interloper").Res(gpuRequest(8)).Obj()
	env.createPods(interloper)
	env.expectStaysUnbound(noMoveWindow, interloper)

	// Their job controller recreates the moved jobs' pods: they run again,
	// each whole, on the nodes held for them.
	var again []*v1.Pod
	for _, p := range moved {
		again = append(again, replacement(p))
	}
	env.createPods(again...)
	env.expectOn(env.waitForBound(bindTimeout, again...), "s0-l1-n2", "s0-l1-n3")
	evictions.expectNoMoreEvictions(t, noMoreEvictionsWindow)
}

// The same clique, but the other clique stays busy: moving the jobs would
// make room for the gang, yet they would fit nowhere else. Once the gang
// has waited, a NotConsolidated Event says so; nothing is evicted and the
// gang waits.
func TestConsolidationRefusesWhenMovedJobsFitNowhere(t *testing.T) {
	env := newTestEnv(t)
	replaceInProcessScheduler(t, consolidationArgs)
	_, busy, movable := env.cliqueWithMovableJobs()
	env.deleteAndWait(busy["s0-l0-n2"], busy["s0-l0-n3"])
	evictions := env.watchEvictions()

	big := env.bigCliqueGang()
	moved := append(append([]*v1.Pod{}, movable["mov-a"]...), movable["mov-b"]...)
	uids := map[string]types.UID{}
	for _, p := range moved {
		uids[p.Name] = env.getPod(p.Name).UID
	}
	// Once the gang has waited, consolidation looks and says why it moves
	// nothing.
	note := env.waitForEvent("PodGroup", "big", coscheduling.ReasonNotConsolidated).Note
	for _, want := range []string{env.ns + "/mov-a", env.ns + "/mov-b", "s0-l0-c0", "would not fit elsewhere"} {
		if !strings.Contains(note, want) {
			t.Errorf("the %s Event on big says %q, which does not say %q", coscheduling.ReasonNotConsolidated, note, want)
		}
	}
	// Then for a window the gang keeps waiting: nothing binds, the movable
	// jobs keep running, nothing is evicted.
	err := staysTrue(t.Context(), noMoveWindow, func(ctx context.Context) error {
		nodes, err := env.boundNodes(ctx, podNames(big))
		if err != nil {
			return err
		}
		for name, node := range nodes {
			if node != "" {
				return fmt.Errorf("pod %s of the waiting gang bound to %s", name, node)
			}
		}
		for _, p := range moved {
			live, err := kubeClient.CoreV1().Pods(env.ns).Get(ctx, p.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				return fmt.Errorf("movable pod %s was deleted", p.Name)
			case err != nil:
				return err
			case live.UID != uids[p.Name] || live.DeletionTimestamp != nil:
				return fmt.Errorf("movable pod %s is being replaced or deleted", p.Name)
			}
		}
		if got := evictions.evicted(); len(got) > 0 {
			return fmt.Errorf("pods were evicted: %v", got)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("within %s of consolidation's refusal: %v", noMoveWindow, err)
	}
	list, err := kubeClient.EventsV1().Events(env.ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing Events: %v", err)
	}
	for _, e := range list.Items {
		if e.Reason == coscheduling.ReasonMoved || e.Reason == coscheduling.ReasonConsolidating {
			t.Errorf("%s Event on %s %s: %s", e.Reason, e.Regarding.Kind, e.Regarding.Name, e.Note)
		}
	}
}
