package coscheduling

import (
	"fmt"
	goruntime "runtime"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// BenchmarkRailAlignedGang measures the scheduling of a whole gang on
// BenchmarkRailAlignedPass's cluster (5,000 DRA nodes of railFabric, half
// of them with 4 GPUs busy) and gang (8 members of 4 GPUs each): every
// member's scheduling cycle, as kube-scheduler runs it, up to Reserve.
// Each cycle is PreFilter, Filter on each node PreFilter leaves the
// member, in name order, then the member assumed on the first node that
// passes (the snapshot's AssumePod, as the scheduler's cache assumes a
// pod) and the Reserve plugins, where DynamicResources sets aside the
// devices it allocated for the member's claim. In both modes the gang's
// plan leaves each member one node, where the scheduler does not score;
// Permit and binding come after, and are left out of both.
//
// BenchmarkRailAlignedPass times the first member's PreFilter, which does
// not compare the two modes fairly: unaligned, that pass chooses no
// device, and DynamicResources allocates each member's claim later, in
// the member's own cycle; aligned, the pass allocates every member's
// claim on one rail set at once, and the members' cycles find their
// claims allocated. Here both modes choose every member's devices, each
// the way it does in the scheduler, and each is charged all the cycles it
// takes. The unaligned gang takes 8: the first also plans the gang. The
// aligned gang takes 9: the first member's pass plans the gang, hands its
// members' claims to the allocations table and ends while they are
// written (dra.ErrReasonClaimsWriting); once the writes land (they run off
// the cycle and are not measured, as in BenchmarkRailAlignedPass), each
// member, the first again among them, has its cycle.
//
// Each cycle is metered on the benchmark's thread, as the pass is:
// cycle-cpu-ns/op is the gang's cycles' thread CPU and their share of the
// collector's, stock-cpu-ns/op the stock plugins' PreFilter within them,
// own-cpu-ns/op the rest: gpu-gang's, and the Filter and Reserve of the
// profile's other plugins. Preferred reports x-unaligned, its cycle CPU
// over none's.
//
// Each iteration is a fresh attempt. Between iterations, untimed, the
// members are forgotten from the snapshot, the devices DynamicResources
// set aside are given back to the claim tracker, and the attempt is ended
// as BenchmarkRailAlignedPass ends it (railBench.freshAttempt).
func BenchmarkRailAlignedGang(b *testing.B) {
	const nodes, size = 5000, 8
	// unaligned is the unaligned run's cycle CPU per gang.
	var unaligned float64
	for _, mode := range []string{scheduling.RailAlignmentNone, scheduling.RailAlignmentPreferred} {
		b.Run(fmt.Sprintf("nodes=%d/gang=%d/align=%s", nodes, size, mode), func(b *testing.B) {
			g := &gangBench{railBench: newRailBench(b, nodes, size, mode)}
			cycles := size
			if mode != scheduling.RailAlignmentNone {
				cycles++ // the pass that writes the claims
			}
			g.cycle.perIter, g.stock.perIter = cycles, cycles*meteredPlugins
			// The first attempt reads the slices' devices once for every
			// attempt after it, and is checked for what the run is meant
			// to measure.
			g.schedule(func() {}, func() {})
			g.checkGang()
			g.end()
			// The cycles run on this goroutine; the meters read its
			// thread's CPU.
			goruntime.LockOSThread()
			defer goruntime.UnlockOSThread()
			goruntime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			g.stock.reset()
			g.cycle.reset()
			for b.Loop() {
				g.schedule(b.StopTimer, b.StartTimer)
				b.StopTimer()
				g.end()
				b.StartTimer()
			}
			b.StopTimer()
			cycle := g.cycle.report(b)
			b.ReportMetric(cycle-g.stock.report(b), "own-cpu-ns/op")
			switch {
			case mode == scheduling.RailAlignmentNone:
				unaligned = cycle
			case unaligned > 0:
				b.ReportMetric(cycle/unaligned, "x-unaligned")
			}
		})
	}
}

// gangBench is one run of BenchmarkRailAlignedGang: a railBench whose
// members are scheduled, each in a cycle of its own.
type gangBench struct {
	*railBench
	// nodes are where the attempt's members were assumed, by member;
	// assumed are the members as assumed, in order.
	nodes   []string
	assumed []*v1.Pod
}

// schedule runs the gang's cycles, each metered. An aligned gang's pass
// comes first; stop and start bracket the wait for its writes, which is
// not timed.
func (g *gangBench) schedule(stop, start func()) {
	g.nodes = make([]string, len(g.job))
	if g.mode != scheduling.RailAlignmentNone {
		g.writes.Lock()
		g.cycle.metered(g.ctx, g.pass)
		stop()
		g.writes.Unlock()
		g.awaitWrites()
		start()
	}
	for i, p := range g.job {
		g.cycle.metered(g.ctx, func() { g.nodes[i] = g.member(p) })
	}
}

// member runs pod's scheduling cycle up to Reserve and returns the node it
// was assumed on.
func (g *gangBench) member(pod *v1.Pod) string {
	state := framework.NewCycleState()
	res, status, _ := g.env.fh.RunPreFilterPlugins(g.ctx, state, pod)
	if !status.IsSuccess() {
		g.b.Fatalf("PreFilter of member %s: %v", pod.Name, status)
	}
	if res.AllNodes() {
		g.b.Fatalf("PreFilter left member %s every node: the gang's plan did not restrict it", pod.Name)
	}
	candidates := res.NodeNames.UnsortedList()
	slices.Sort(candidates)
	node := ""
	for _, name := range candidates {
		ni, err := g.env.snapshot.Get(name)
		if err != nil {
			g.b.Fatal(err)
		}
		if g.env.fh.RunFilterPlugins(g.ctx, state, pod, ni).IsSuccess() && node == "" {
			node = name
		}
	}
	if node == "" {
		g.b.Fatalf("member %s passes Filter on none of %v", pod.Name, candidates)
	}
	assumed := pod.DeepCopy()
	assumed.Spec.NodeName = node
	pi, err := framework.NewPodInfo(assumed)
	if err != nil {
		g.b.Fatal(err)
	}
	if err := g.env.snapshot.AssumePod(pi); err != nil {
		g.b.Fatal(err)
	}
	g.assumed = append(g.assumed, assumed)
	if status := g.env.fh.RunReservePluginsReserve(g.ctx, state, assumed, node); !status.IsSuccess() {
		g.b.Fatalf("Reserve of member %s on %s: %v", pod.Name, node, status)
	}
	return node
}

// checkGang checks, after the first attempt, that each mode chose what it
// says: unaligned, DynamicResources set aside devices for every member's
// claim, on the member's node, and gpu-gang wrote none; aligned, gpu-gang
// wrote every member's claim, one member per node on the same 4 rails
// (railBench.checkFirst), each member went to its claim's node and
// DynamicResources allocated nothing again.
func (g *gangBench) checkGang() {
	g.b.Helper()
	g.checkFirst()
	tracker := g.env.pl.devices.Manager().ResourceClaims()
	for i, p := range g.job {
		c, err := tracker.Get(testNS, p.Name+"-gpus")
		if err != nil {
			g.b.Fatal(err)
		}
		pending := tracker.GetPendingAllocation(c.UID)
		allocation := c.Status.Allocation
		if g.mode == scheduling.RailAlignmentNone {
			if pending == nil {
				g.b.Fatalf("DynamicResources set aside no devices for member %s", p.Name)
			}
			allocation = pending
		} else if pending != nil {
			g.b.Fatalf("DynamicResources allocated member %s's claim, which gpu-gang had written", p.Name)
		}
		if on := allocation.NodeSelector.NodeSelectorTerms[0].MatchFields[0].Values[0]; on != g.nodes[i] {
			g.b.Fatalf("member %s went to %s, its devices are on %s", p.Name, g.nodes[i], on)
		}
	}
}

// end ends the attempt: the members are forgotten from the snapshot, last
// assumed first, as the scheduler's cache forgets a pod; the devices
// DynamicResources set aside are given back; the rest as freshAttempt.
func (g *gangBench) end() {
	g.b.Helper()
	for i := len(g.assumed) - 1; i >= 0; i-- {
		if err := g.env.snapshot.ForgetPod(klog.FromContext(g.ctx), g.assumed[i]); err != nil {
			g.b.Fatal(err)
		}
	}
	g.assumed = g.assumed[:0]
	tracker := g.env.pl.devices.Manager().ResourceClaims()
	for _, p := range g.job {
		c, err := tracker.Get(testNS, p.Name+"-gpus")
		if err != nil {
			g.b.Fatal(err)
		}
		tracker.MaybeRemoveClaimPendingAllocation(c.UID, false)
	}
	g.freshAttempt()
}
