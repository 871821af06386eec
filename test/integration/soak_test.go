package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/lifecycle"
)

// soakDurationEnv sets how long the soak's faults go on: 60 s by default
// (`make test`), 10 minutes in `make bench-soak`.
const soakDurationEnv = "GPU_GANG_SOAK_DURATION"

// soakSeedEnv sets the soak's random seed, to replay a run.
const soakSeedEnv = "GPU_GANG_SOAK_SEED"

// soakSettle bounds how long the soak waits, after its faults stop, for
// every replacement it created to be placed or to say why not.
const soakSettle = time.Minute

func soakDuration(t *testing.T) time.Duration {
	if v := os.Getenv(soakDurationEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", soakDurationEnv, v, err)
		}
		return d
	}
	return time.Minute
}

func soakSeed(t *testing.T) uint64 {
	if v := os.Getenv(soakSeedEnv); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", soakSeedEnv, v, err)
		}
		return s
	}
	return 1
}

// The soak: 20 gangs contend for about twice the cluster while members are
// deleted at random (and recreated, as their job's controller does) and
// nodes come and go. kwok runs the pods, so gangs finish and make room for
// the others. At the end no gang may have been half-bound beyond the bind
// grace, and every gang is finished, running, or waiting with a reason on
// each of its waiting pods. It reports half-bound gang-seconds, the time
// each gang waited and each repair.
func TestFaultSoak(t *testing.T) {
	duration, seed := soakDuration(t), soakSeed(t)
	rng := rand.New(rand.NewPCG(seed, 2026))
	env := newTestEnv(t)
	startKwok(t)
	var nodes []*v1.Node
	nodeSeq := 0
	newNode := func(spine, leaf int) *v1.Node {
		name := fmt.Sprintf("s%d-l%d-n%d", spine, leaf, nodeSeq)
		nodeSeq++
		n := gpuNode(name, 8).Label(spineLabel, fmt.Sprintf("s%d", spine)).
			Label(leafLabel, fmt.Sprintf("s%d-l%d", spine, leaf)).
			Label(cliqueLabel, fmt.Sprintf("s%d-l%d-c%d", spine, leaf, nodeSeq/2)).Obj()
		n.Annotations = map[string]string{"kwok.x-k8s.io/node": "fake"}
		return n
	}
	for s := range 2 {
		for l := range 2 {
			for range 4 {
				nodes = append(nodes, newNode(s, l))
			}
		}
	}
	created := env.createNodes(nodes...)

	// 20 gangs: whole-node members (1-2) or half-node members (2-4), each
	// running 8-20 s once bound: about 240 GPUs asked of 128.
	minMembers := map[string]int{}
	var all [][]*v1.Pod
	demand := 0
	for i := range 20 {
		name := fmt.Sprintf("g%02d", i)
		gpus, count := 8, 1+rng.IntN(2)
		if rng.IntN(2) == 0 {
			gpus, count = 4, 2+rng.IntN(3)
		}
		runFor := time.Duration(8+rng.IntN(13)) * time.Second
		pods := env.gangPods(name, count, gpus)
		for _, p := range pods {
			p.Annotations = map[string]string{lifecycle.RunForAnnotation: runFor.String()}
		}
		minMembers[name] = count
		all = append(all, pods)
		demand += gpus * count
	}
	t.Logf("seed %d: 20 gangs ask for %d GPUs of %d; faults for %s", seed, demand, 8*len(nodes), duration)
	ledger := env.ledgerGangs(bindGrace, minMembers)
	for i, pods := range all {
		name := fmt.Sprintf("g%02d", i)
		env.createPodGroup(gangtest.MakePodGroup(name, env.ns).MinMember(int32(len(pods))).Obj())
		env.createPods(pods...)
	}

	// Faults, one every 1.5 s: a running member deleted and recreated, or
	// a node deleted with its pods (their controllers recreate them) and a
	// new one added to its leaf.
	memberFaults, nodeFaults := 0, 0
	live := append([]*v1.Node(nil), created...)
	end := time.Now().Add(duration)
	for time.Now().Before(end) {
		select {
		case <-t.Context().Done():
			return
		case <-time.After(1500 * time.Millisecond):
		}
		list, err := kubeClient.CoreV1().Pods(env.ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("listing pods: %v", err)
		}
		var running []v1.Pod
		for _, p := range list.Items {
			if p.Spec.NodeName != "" && p.Status.Phase != v1.PodSucceeded && p.DeletionTimestamp == nil {
				running = append(running, p)
			}
		}
		sort.Slice(running, func(i, j int) bool { return running[i].Name < running[j].Name })
		if rng.IntN(10) < 6 {
			if len(running) == 0 {
				continue
			}
			victim := running[rng.IntN(len(running))]
			env.deleteAndWait(&victim)
			env.createPods(replacement(&victim))
			memberFaults++
			continue
		}
		i := rng.IntN(len(live))
		doomed := live[i]
		if err := kubeClient.CoreV1().Nodes().Delete(t.Context(), doomed.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting node %s: %v", doomed.Name, err)
		}
		var orphans []*v1.Pod
		for j := range running {
			if running[j].Spec.NodeName == doomed.Name {
				orphans = append(orphans, &running[j])
			}
		}
		env.deleteAndWait(orphans...)
		for _, p := range orphans {
			env.createPods(replacement(p))
		}
		var spine, leaf int
		fmt.Sscanf(doomed.Labels[leafLabel], "s%d-l%d", &spine, &leaf)
		live[i] = env.createNodes(newNode(spine, leaf))[0]
		nodeFaults++
	}
	t.Logf("faults: %d members deleted and recreated, %d nodes replaced", memberFaults, nodeFaults)

	// Every gang is finished, running, or waiting with a reason.
	err := waitFor(t.Context(), soakSettle, func(ctx context.Context) (bool, error) {
		list, err := kubeClient.CoreV1().Pods(env.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		events, err := kubeClient.EventsV1().Events(env.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		// A member held back before its scheduling cycle (its gang lacks
		// members) has no PodScheduled condition; its PodGroup's Events
		// say what it waits for.
		explained := map[string]bool{}
		for _, e := range events.Items {
			if e.Regarding.Kind == "PodGroup" && e.Note != "" {
				explained[e.Regarding.Name] = true
			}
		}
		for _, p := range list.Items {
			if p.Spec.NodeName == "" && waitingReason(&p) == "" && !explained[p.Labels[scheduling.PodGroupLabel]] {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("pods wait without a reason a person can read: %v", err)
	}
	r := ledger.expectNoHalfBound()
	sort.Slice(r.waits, func(i, j int) bool { return r.waits[i] < r.waits[j] })
	t.Logf("soak: half-bound gang-seconds beyond the %s bind grace: %.1f; gangs placed: %d, waited %s; repairs: %d, took %s; still repairing: %d",
		bindGrace, r.halfBoundSeconds, len(r.waits), durations(r.waits), len(r.repairs), durations(r.repairs), r.openRepairs)
	if r.halfBoundSeconds > 0 {
		t.Errorf("half-bound gang-seconds: %.1f, want 0", r.halfBoundSeconds)
	}
}

// waitingReason is what the scheduler said about a pod it has not placed:
// its PodScheduled condition's message.
func waitingReason(p *v1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse {
			return c.Message
		}
	}
	return ""
}
