package integration

// A claim gpu-gang allocated itself (one several members share) that no
// pod of the gang ever came to use is given back by the claim reconciler:
// the claim controller deallocates only claims whose last consumer left,
// and such a claim never had one. The members' bindings are refused (an
// admission policy, as a webhook or quota would), which leaves the claim
// allocated and unreserved, deterministically: DynamicResources
// unreserves it when the bind fails.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/gpu-gang/gpu-gang/pkg/controlplane"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
)

const (
	// testClaimGrace is the scheduler's claimReleaseGraceSeconds in these
	// tests; the reconciler then looks every 5 s (its shortest period).
	testClaimGrace = 4 * time.Second
	// unusedClaimBound is how soon an unused allocation must be given
	// back once the scheduler that leads sees it: the grace, one period,
	// and slack for a loaded machine.
	unusedClaimBound = testClaimGrace + 5*time.Second + 10*time.Second
	// processStartSlack bounds how long a scheduler process takes to
	// start and sync.
	processStartSlack = 15 * time.Second
	// sharedClaim is the claim the gang's two members share.
	sharedClaim = "node-gpus"
)

// claimProcess starts the scheduler binary with the test's claim grace
// and the gates the in-process scheduler runs with, and waits until it
// schedules.
func (env *draEnv) claimProcess(name string, leaderElect bool) *schedulerProcess {
	env.t.Helper()
	p := startSchedulerProcessWith(env.t, name, processOptions{
		leaderElect:      leaderElect,
		flags:            []string{controlplane.SchedulerGatesFlag},
		coschedulingArgs: map[string]any{"claimReleaseGraceSeconds": int64(testClaimGrace / time.Second)},
	})
	if leaderElect {
		p.waitForLog(env.t, "Successfully acquired lease", retryBindTimeout)
	}
	env.waitForCanary(p)
	return p
}

// sharingGang creates gang name of two members sharing claim (8 GPUs),
// whose bindings the API server refuses, and waits until gpu-gang has
// allocated the claim and a binding was refused.
func (env *draEnv) sharingGang(name, claim string) []*v1.Pod {
	env.t.Helper()
	env.createClaim(claim, gpuClaimSpec(8))
	pods := env.claimGang(name, 2, nil, func(int) []v1.PodResourceClaim {
		return []v1.PodResourceClaim{namedClaim("gpus", claim)}
	})
	ev := env.waitForEvent("PodGroup", name, coscheduling.ReasonMemberNotBound)
	env.t.Logf("the PodGroup says: %s", ev.Note)
	c := env.waitForClaim(claim, "allocated", retryBindTimeout, func(c *resourceapi.ResourceClaim) bool { return c.Status.Allocation != nil })
	m, marked, err := dra.MarkOf(c)
	env.t.Logf("claim %s allocated on %v, reserved for %v, mark %+v", claim, allocatedDevices(c), consumers(c), m)
	// The allocation says whose it is, for a restarted scheduler and for
	// kubectl.
	if !marked || err != nil || m.Gang.Name != name || m.Attempt == "" {
		env.t.Fatalf("claim %s allocated without gpu-gang's mark naming gang %s: annotations %v (%v)", claim, name, c.Annotations, err)
	}
	return pods
}

// waitForClaim waits until claim satisfies cond, and returns it.
func (env *draEnv) waitForClaim(claim, what string, timeout time.Duration, cond func(*resourceapi.ResourceClaim) bool) *resourceapi.ResourceClaim {
	env.t.Helper()
	var last *resourceapi.ResourceClaim
	err := waitFor(env.t.Context(), timeout, func(ctx context.Context) (bool, error) {
		c, err := kubeClient.ResourceV1().ResourceClaims(env.ns).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = c
		return cond(c), nil
	})
	if err != nil {
		desc := "none"
		if last != nil {
			desc = fmt.Sprintf("allocation %v, reserved for %v, annotations %v", last.Status.Allocation != nil, consumers(last), last.Annotations)
		}
		env.t.Fatalf("claim %s/%s not %s within %s (last seen: %s): %v", env.ns, claim, what, timeout, desc, err)
	}
	return last
}

// expectReleased waits until claim has no allocation, mark or finalizer,
// and checks the Event that says why; it returns how long that took from
// since.
func (env *draEnv) expectReleased(claim string, since time.Time, bound time.Duration) time.Duration {
	env.t.Helper()
	env.waitForClaim(claim, "given back", bound, func(c *resourceapi.ResourceClaim) bool {
		_, marked, _ := dra.MarkOf(c)
		return c.Status.Allocation == nil && !marked && !slices.Contains(c.Finalizers, resourceapi.Finalizer)
	})
	took := time.Since(since)
	ev := env.waitForEvent("ResourceClaim", claim, dra.ReasonClaimReleased)
	env.t.Logf("claim %s given back %s after the job went; the claim says: %s", claim, took.Round(time.Millisecond), ev.Note)
	return took
}

func unreserved(c *resourceapi.ResourceClaim) bool {
	return c.Status.Allocation != nil && len(c.Status.ReservedFor) == 0
}

// Bindings refused, then the job cancelled: the claim gpu-gang allocated for
// the gang is given back within the grace and one period. Members retry
// their refused bindings, each reserving the claim for the moment of its
// PreBind; a job deleted then leaves a claim reserved by a deleted pod,
// which the claim controller gives back itself, so that try proves
// nothing and the scenario runs again with a fresh gang and claim.
func TestFaultClaimReleasedAfterJobCancelled(t *testing.T) {
	pauseInProcessScheduler(t)
	env := newDRAEnv(t, gpuClass(true))
	env.draNodes(h100DRA, "n0", "n1", "n2", "n3")
	env.claimProcess("scheduler", false)
	env.refuseTries()
	for try := 1; try <= killTries; try++ {
		gang, claim := fmt.Sprintf("job%d", try), fmt.Sprintf("%s-%d", sharedClaim, try)
		pods := env.sharingGang(gang, claim)
		env.waitForClaim(claim, "allocated and unreserved", bindTimeout, unreserved)
		start := time.Now()
		reserved := env.watchReservations(claim)
		env.deleteAndWait(pods...)
		err := staysTrue(t.Context(), time.Second, func(ctx context.Context) error {
			c, err := kubeClient.ResourceV1().ResourceClaims(env.ns).Get(ctx, claim, metav1.GetOptions{})
			if err == nil && len(c.Status.ReservedFor) > 0 {
				err = fmt.Errorf("claim %s reserved for %v after the job went", claim, consumers(c))
			}
			return err
		})
		if err == nil {
			// A member that reserved the claim for its PreBind while the
			// job went leaves it to the claim controller, which may give
			// it back before the window above starts.
			err = reserved()
		}
		if err != nil {
			t.Logf("try %d: a member was binding when the job went (%v); trying again with a fresh gang and claim", try, err)
			continue
		}
		env.expectReleased(claim, start, unusedClaimBound)
		return
	}
	t.Fatalf("in none of %d tries did the job go while its claim was unreserved", killTries)
}

// watchReservations watches claim from now on; the function it returns
// reports the first change that reserved it for a pod, or nil, and stops
// the watch.
func (env *draEnv) watchReservations(claim string) func() error {
	env.t.Helper()
	ctx, cancel := context.WithCancel(env.t.Context())
	w, err := kubeClient.ResourceV1().ResourceClaims(env.ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", claim).String(),
	})
	if err != nil {
		cancel()
		env.t.Fatalf("watching claim %s: %v", claim, err)
	}
	var (
		mu   sync.Mutex
		seen error
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			c, ok := ev.Object.(*resourceapi.ResourceClaim)
			mu.Lock()
			if ok && seen == nil && len(c.Status.ReservedFor) > 0 {
				seen = fmt.Errorf("claim %s was reserved for %v while the job went", claim, consumers(c))
			}
			mu.Unlock()
		}
	}()
	return func() error {
		w.Stop()
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}

// refuseTries makes the API server refuse the bindings of the members of
// gangs job1 to job<killTries>, two each.
func (env *draEnv) refuseTries() *bindingRefusal {
	env.t.Helper()
	var refused []string
	for try := 1; try <= killTries; try++ {
		refused = append(refused, fmt.Sprintf("job%d-0", try), fmt.Sprintf("job%d-1", try))
	}
	return env.refuseBindings(append(refused, "binding-probe")...)
}

// killTries is how many times a test tries to land its fault (a kill, a
// job's deletion) while the claim is allocated and unreserved.
const killTries = 3

// claimKill is a kill that landed while a gang's shared claim was
// allocated and no pod reserved it.
type claimKill struct {
	gang, claim string
	pods        []*v1.Pod
	refusal     *bindingRefusal
}

// killWithClaimAllocated runs a scheduler process (leader election on),
// creates a gang whose members share a claim and whose bindings are
// refused, and kills the process with SIGKILL as soon as the claim is
// allocated and unreserved. Members keep retrying their refused bindings,
// each reserving the claim for the moment of its PreBind; a kill that
// lands then proves nothing (the claim controller unreserves a deleted
// pod's claim and deallocates it), so the scenario runs again with a
// fresh gang and claim, at most killTries times.
func (env *draEnv) killWithClaimAllocated() claimKill {
	env.t.Helper()
	env.draNodes(h100DRA, "n0", "n1", "n2", "n3")
	refusal := env.refuseTries()
	for try := 1; try <= killTries; try++ {
		k := claimKill{gang: fmt.Sprintf("job%d", try), claim: fmt.Sprintf("%s-%d", sharedClaim, try), refusal: refusal}
		p := env.claimProcess(fmt.Sprintf("victim-%d", try), true)
		k.pods = env.sharingGang(k.gang, k.claim)
		env.waitForClaim(k.claim, "allocated and unreserved", bindTimeout, unreserved)
		p.kill()
		c := env.waitForClaim(k.claim, "allocated", bindTimeout, func(c *resourceapi.ResourceClaim) bool { return c.Status.Allocation != nil })
		if len(c.Status.ReservedFor) == 0 {
			env.t.Logf("try %d: killed %s with claim %s allocated and unreserved", try, p, k.claim)
			return k
		}
		env.t.Logf("try %d: the kill landed while %v reserved claim %s; trying again with a fresh gang and claim", try, consumers(c), k.claim)
		env.deleteAndWait(k.pods...)
	}
	env.t.Fatalf("none of %d kills landed while the claim was unreserved", killTries)
	return claimKill{}
}

// The scheduler killed between allocating a shared claim and binding its
// gang (the bindings refused keep it there), then restarted as the leader:
// the claim ends used by the gang, or given back once the job is gone;
// never left allocated with no consumer.
func TestFaultSchedulerKilledWithClaimAllocated(t *testing.T) {
	t.Run("job cancelled while no scheduler runs", func(t *testing.T) {
		pauseInProcessScheduler(t)
		env := newDRAEnv(t, gpuClass(true))
		k := env.killWithClaimAllocated()
		env.deleteAndWait(k.pods...)
		start := time.Now()
		// The successor takes the lease once the victim's runs out.
		env.claimProcess("successor", true)
		env.expectReleased(k.claim, start, testLeaseDuration+processStartSlack+unusedClaimBound)
	})

	t.Run("job kept, bindings allowed again", func(t *testing.T) {
		pauseInProcessScheduler(t)
		env := newDRAEnv(t, gpuClass(true))
		gangs := map[string]int{}
		for try := 1; try <= killTries; try++ {
			gangs[fmt.Sprintf("job%d", try)] = 2
		}
		ledger := env.ledgerGangs(restartGrace, gangs)
		k := env.killWithClaimAllocated()
		k.refusal.lift()
		env.claimProcess("successor", true)
		env.waitForBound(retryBindTimeout, k.pods...)
		used := func(c *resourceapi.ResourceClaim) bool {
			return c.Status.Allocation != nil && len(c.Status.ReservedFor) == len(k.pods)
		}
		env.waitForClaim(k.claim, "reserved by both members", bindTimeout, used)
		// Used, it stays so past the grace and a period.
		err := staysTrue(t.Context(), testClaimGrace+5*time.Second+time.Second, func(ctx context.Context) error {
			c, err := kubeClient.ResourceV1().ResourceClaims(env.ns).Get(ctx, k.claim, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !used(c) {
				return fmt.Errorf("claim %s no longer allocated and reserved by both members: reserved for %v", k.claim, consumers(c))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		ledger.expectNoHalfBound()
	})
}
