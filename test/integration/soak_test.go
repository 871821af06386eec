package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// soakDurationEnv sets how long the soak's faults go on: 60 s by default
// (`make test`), 10 minutes in `make bench-soak`.
const soakDurationEnv = "GPU_GANG_SOAK_DURATION"

// soakSeedEnv sets the soak's random seed, to replay a run.
const soakSeedEnv = "GPU_GANG_SOAK_SEED"

// soakSettle bounds how long the soak waits, after its faults stop, for
// every pod to be placed or to say why not, and for the first quarter of
// the gangs to finish: a member recreated by the last fault runs up to
// 20 s more.
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

// The soak's shape. Gangs arrive throughout, so that every fault, kills
// included, lands on a busy cluster: soakInitialGangs at once (about twice
// the cluster), then one every soakArrivalEvery while the faults go on.
// Faults come every soakFaultEvery; every soakKillEvery-th of them, from the
// soakFirstKill-th on, SIGKILLs the scheduler process and starts a new one.
// Between faults, gangs that have run their time finish, every
// soakFinishEvery.
const (
	soakInitialGangs = 20
	soakArrivalEvery = 3 * time.Second
	soakFaultEvery   = 1500 * time.Millisecond
	soakKillEvery    = 15
	soakFirstKill    = 4
	soakFinishEvery  = 250 * time.Millisecond
)

// soakGang is one gang the soak submits, at its offset from the start; it
// runs for runFor once all its members run.
type soakGang struct {
	name   string
	pods   []*v1.Pod
	at     time.Duration
	runFor time.Duration
}

// soakGangs draws the soak's gangs: whole-node members (1-2) or half-node
// members (2-4), each gang running 8-20 s.
func (env *testEnv) soakGangs(rng *rand.Rand, duration time.Duration) []soakGang {
	n := soakInitialGangs + int(duration/soakArrivalEvery)
	gangs := make([]soakGang, n)
	for i := range gangs {
		name := fmt.Sprintf("g%03d", i)
		gpus, count := 8, 1+rng.IntN(2)
		if rng.IntN(2) == 0 {
			gpus, count = 4, 2+rng.IntN(3)
		}
		runFor := time.Duration(8+rng.IntN(13)) * time.Second
		gangs[i] = soakGang{name: name, pods: env.gangPods(name, count, gpus), runFor: runFor,
			at: time.Duration(max(0, i-soakInitialGangs+1)) * soakArrivalEvery}
	}
	return gangs
}

// finishGangs plays the end of the soak's training jobs. kwok runs the pods
// but does not end them: a synchronous job's members end together, once all
// of them have run for the gang's runFor since the last one started (a
// member that is replaced stalls its siblings until its replacement runs).
// Timers per pod would let the rest of a gang finish while a replacement
// waits, which no synchronous job does. It marks such gangs' members
// Succeeded, all of them before it returns.
func (env *testEnv) finishGangs(ctx context.Context, gangs []soakGang) error {
	list, err := kubeClient.CoreV1().Pods(env.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	byGang := map[string][]*v1.Pod{}
	for i := range list.Items {
		p := &list.Items[i]
		byGang[p.Labels[scheduling.PodGroupLabel]] = append(byGang[p.Labels[scheduling.PodGroupLabel]], p)
	}
	pods := kubeClient.CoreV1().Pods(env.ns)
	for _, g := range gangs {
		members := byGang[g.name]
		if len(members) != len(g.pods) {
			continue
		}
		var latest time.Time
		running := true
		for _, p := range members {
			if p.Status.Phase != v1.PodRunning || p.DeletionTimestamp != nil || p.Status.StartTime == nil {
				running = false
				break
			}
			latest = later(latest, p.Status.StartTime.Time)
		}
		if !running || time.Since(latest) < g.runFor {
			continue
		}
		for _, p := range members {
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				cur.Status.Phase = v1.PodSucceeded
				_, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				return fmt.Errorf("finishing pod %s of gang %s: %w", p.Name, g.name, err)
			}
		}
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// replaceSoakPod recreates a lost member, as a Job's controller does: the
// same spec under a fresh name. A fresh name keeps the replacement out of
// reach of kwok, which may still delete the lost pod by name after it is
// gone.
func (env *testEnv) replaceSoakPod(p *v1.Pod) {
	env.t.Helper()
	r := replacement(p)
	parts := strings.SplitN(p.Name, "-", 3)
	r.Name, r.GenerateName = "", parts[0]+"-"+parts[1]+"-"
	env.createPods(r)
}

// waitReasons are the Events on a PodGroup that say why its gang waits.
var waitReasons = map[string]bool{
	coscheduling.ReasonWaitingForMembers:     true,
	coscheduling.ReasonGangTooLarge:          true,
	coscheduling.ReasonGangTimedOut:          true,
	coscheduling.ReasonGangRejected:          true,
	coscheduling.ReasonTopologyUnsatisfied:   true,
	coscheduling.ReasonMemberDeleted:         true,
	coscheduling.ReasonMemberNotBound:        true,
	coscheduling.ReasonNoFeasibleNodes:       true,
	coscheduling.ReasonFilterRejectsPlan:     true,
	coscheduling.ReasonPermanentPodsInTheWay: true,
	coscheduling.ReasonGangHolding:           true,
	coscheduling.ReasonHoldExpired:           true,
}

// soakVerdict sorts the soak's gangs, from the API, by where they are.
type soakVerdict struct {
	// finished: every member succeeded. running: every member bound.
	// waiting: the rest.
	finished, running, waiting []string
	// unexplained names each unbound pod with no reason a person can read:
	// no PodScheduled condition from the scheduler and no Event on its
	// PodGroup that says why the gang waits.
	unexplained []string
	// why says, for each waiting gang, what a person reads: what the
	// scheduler wrote on a waiting pod at its last attempt, or else the
	// latest Event on its PodGroup that says why it waits.
	why map[string]string
}

func (env *testEnv) soakVerdict(ctx context.Context, gangs []soakGang) (soakVerdict, error) {
	var v soakVerdict
	list, err := kubeClient.CoreV1().Pods(env.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return v, err
	}
	events, err := kubeClient.EventsV1().Events(env.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return v, err
	}
	explained := map[string]bool{}
	latest := map[string]*eventsv1.Event{}
	for i := range events.Items {
		e := &events.Items[i]
		if e.Regarding.Kind != "PodGroup" || !waitReasons[e.Reason] || e.Note == "" {
			continue
		}
		explained[e.Regarding.Name] = true
		if l := latest[e.Regarding.Name]; l == nil || lastSeen(e).After(lastSeen(l)) {
			latest[e.Regarding.Name] = e
		}
	}
	v.why = map[string]string{}
	byGang := map[string][]*v1.Pod{}
	for i := range list.Items {
		p := &list.Items[i]
		byGang[p.Labels[scheduling.PodGroupLabel]] = append(byGang[p.Labels[scheduling.PodGroupLabel]], p)
	}
	for _, g := range gangs {
		succeeded, bound := 0, 0
		for _, p := range byGang[g.name] {
			switch {
			case p.Status.Phase == v1.PodSucceeded:
				succeeded++
				bound++
			case p.Spec.NodeName != "" && p.Status.Phase != v1.PodFailed:
				bound++
			case p.Spec.NodeName == "" && waitingReason(p) == "" && !explained[g.name]:
				v.unexplained = append(v.unexplained, fmt.Sprintf("pod %s of gang %s", p.Name, g.name))
			}
		}
		switch {
		case succeeded == len(g.pods):
			v.finished = append(v.finished, g.name)
		case bound >= len(g.pods):
			v.running = append(v.running, g.name)
		default:
			v.waiting = append(v.waiting, g.name)
			for _, p := range byGang[g.name] {
				if msg := waitingReason(p); msg != "" && v.why[g.name] == "" {
					v.why[g.name] = msg
				}
			}
			if e := latest[g.name]; e != nil && v.why[g.name] == "" {
				v.why[g.name] = e.Reason + ": " + e.Note
			}
		}
	}
	return v, nil
}

// lastSeen is when an Event (or the last of its series) was seen.
func lastSeen(e *eventsv1.Event) time.Time {
	if e.Series != nil {
		return e.Series.LastObservedTime.Time
	}
	return eventTime(e)
}

// The soak: gangs contend for about twice the cluster while members are
// deleted at random (and recreated, as their job's controller does), nodes
// come and go, and the scheduler process is killed with SIGKILL and started
// again. kwok runs the pods and finishGangs ends the jobs, so gangs finish
// and make room for the others. At the end no gang may have been
// half-bound beyond its grace (the bind grace, or restartGrace for a span
// across a kill), every gang is finished, running, or waiting with a reason
// a person can read on each waiting pod, and the gangs submitted in the
// first quarter have finished. It reports half-bound gang-seconds, the time
// each gang waited and each repair.
func TestFaultSoak(t *testing.T) {
	duration, seed := soakDuration(t), soakSeed(t)
	rng := rand.New(rand.NewPCG(seed, 2026))
	pauseInProcessScheduler(t)
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
	sched := startSchedulerProcess(t, "scheduler-0", false)
	env.waitForCanary(sched)

	gangs := env.soakGangs(rng, duration)
	minMembers := map[string]int{}
	demand := 0
	for _, g := range gangs {
		minMembers[g.name] = len(g.pods)
		for _, p := range g.pods {
			demand += int(p.Spec.Containers[0].Resources.Requests.Name(gpu, "").Value())
		}
	}
	t.Logf("seed %d: %d gangs (%d at once, then one every %s) ask for %d GPUs of %d; faults for %s",
		seed, len(gangs), soakInitialGangs, soakArrivalEvery, demand, 8*len(nodes), duration)
	ledger := env.ledgerGangs(bindGrace, minMembers)
	start := time.Now()
	submitted := 0
	submitDue := func() {
		for submitted < len(gangs) && time.Since(start) >= gangs[submitted].at {
			g := gangs[submitted]
			env.createPodGroup(gangtest.MakePodGroup(g.name, env.ns).MinMember(int32(len(g.pods))).Obj())
			env.createPods(g.pods...)
			submitted++
		}
	}
	// finishUntil ends the jobs that have run their time, every
	// soakFinishEvery, until the next fault is due.
	finishUntil := func(next time.Time) {
		for {
			if err := env.finishGangs(t.Context(), gangs[:submitted]); err != nil {
				t.Fatal(err)
			}
			left := time.Until(next)
			if left <= 0 {
				return
			}
			select {
			case <-t.Context().Done():
				return
			case <-time.After(min(left, soakFinishEvery)):
			}
		}
	}
	submitDue()

	// Faults, one every soakFaultEvery: the scheduler killed and
	// restarted (on schedule), a running member deleted and recreated, or
	// a node deleted with its pods (their controllers recreate them) and a
	// new one added to its leaf.
	memberFaults, nodeFaults, kills := 0, 0, 0
	live := append([]*v1.Node(nil), created...)
	end := start.Add(duration)
	for fault := 0; time.Now().Before(end); fault++ {
		finishUntil(time.Now().Add(soakFaultEvery))
		submitDue()
		if fault%soakKillEvery == soakFirstKill {
			killed := time.Now()
			sched.kill()
			ledger.schedulerKilled(killed)
			half := ledger.halfBound()
			restarted := time.Now()
			kills++
			sched = startSchedulerProcess(t, fmt.Sprintf("scheduler-%d", kills), false)
			ledger.schedulerStarted(restarted)
			t.Logf("%s: killed the scheduler; gangs half-bound at the kill: %v", killed.Sub(start).Round(100*time.Millisecond), half)
			continue
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
			env.replaceSoakPod(&victim)
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
			env.replaceSoakPod(p)
		}
		var spine, leaf int
		fmt.Sscanf(doomed.Labels[leafLabel], "s%d-l%d", &spine, &leaf)
		live[i] = env.createNodes(newNode(spine, leaf))[0]
		nodeFaults++
	}
	t.Logf("faults: %d scheduler kills and restarts, %d members deleted and recreated, %d nodes replaced; %d of %d gangs submitted",
		kills, memberFaults, nodeFaults, submitted, len(gangs))
	if kills == 0 {
		t.Errorf("the soak never killed the scheduler: %s is too short for the kill at fault %d", duration, soakFirstKill)
	}

	// Progress: every gang submitted is finished, running, or waiting
	// with a reason, and the first quarter have finished.
	faultsEnd := time.Now()
	early := gangs[:submitted/4]
	var v soakVerdict
	err := waitFor(t.Context(), soakSettle, func(ctx context.Context) (bool, error) {
		if err := env.finishGangs(ctx, gangs[:submitted]); err != nil {
			return false, err
		}
		all, err := env.soakVerdict(ctx, gangs[:submitted])
		if err != nil {
			return false, err
		}
		ev, err := env.soakVerdict(ctx, early)
		if err != nil {
			return false, err
		}
		v = all
		return len(v.unexplained) == 0 && len(ev.finished) == len(early), nil
	})
	t.Logf("%s after the faults: of %d gangs, %d finished, %d running, %d waiting %v; the first %d submitted have finished",
		time.Since(faultsEnd).Round(100*time.Millisecond), submitted, len(v.finished), len(v.running), len(v.waiting), v.waiting, len(early))
	submittedAt := map[string]time.Time{}
	for _, g := range gangs {
		submittedAt[g.name] = start.Add(g.at)
	}
	for _, name := range v.waiting {
		t.Logf("gang %s waits, %s after it was submitted: %s", name, time.Since(submittedAt[name]).Round(time.Second), v.why[name])
	}
	if err != nil {
		if len(v.unexplained) > 0 {
			t.Errorf("pods wait without a reason a person can read: %v", v.unexplained)
		}
		finished := map[string]bool{}
		for _, name := range v.finished {
			finished[name] = true
		}
		for _, g := range early {
			if !finished[g.name] {
				t.Errorf("gang %s, among the first quarter submitted, has not finished %s after the faults stopped", g.name, soakSettle)
			}
		}
		t.Errorf("the soak did not settle: %v", err)
	}
	r := ledger.expectNoHalfBound()
	sort.Slice(r.waits, func(i, j int) bool { return r.waits[i] < r.waits[j] })
	sort.Slice(r.restartSpans, func(i, j int) bool { return r.restartSpans[i] < r.restartSpans[j] })
	t.Logf("soak: half-bound gang-seconds beyond grace: %.1f; half-bound spans across a kill took %s; gangs placed: %d, waited %s; degraded %d times, repairs: %d, took %s; still repairing: %d",
		r.halfBoundSeconds, durations(r.restartSpans), len(r.waits), durations(r.waits), r.degradations, len(r.repairs), durations(r.repairs), r.openRepairs)
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
