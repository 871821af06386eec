package coscheduling

import (
	"context"
	"runtime/metrics"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"

	"github.com/gpu-gang/gpu-gang/pkg/contract"
)

// cpuMeter reports the process's CPU time per iteration of a benchmark, as
// the metric cpu-ns/op. On a machine shared with other work, wall time per
// op (ns/op) measures the neighbours as much as the code; the CPU the
// process spent (every goroutine, the garbage collector's included) is what
// the scheduler would pay.
type cpuMeter struct {
	start time.Duration
}

// startCPU reads the process's CPU time; call it where the timer starts.
func startCPU(b *testing.B) *cpuMeter {
	b.Helper()
	return &cpuMeter{start: processCPU(b)}
}

// report divides the CPU time since startCPU by the benchmark's
// iterations, reports it and returns it.
func (m *cpuMeter) report(b *testing.B) float64 {
	b.Helper()
	if b.N == 0 {
		return 0
	}
	perOp := float64(processCPU(b)-m.start) / float64(b.N)
	b.ReportMetric(perOp, "cpu-ns/op")
	return perOp
}

func processCPU(b *testing.B) time.Duration { return rusageCPU(b, syscall.RUSAGE_SELF) }

// rusageCPU is the user and system CPU time getrusage reports for who.
func rusageCPU(tb testing.TB, who int) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(who, &u); err != nil {
		tb.Fatalf("reading CPU time: %v", err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// threadMeter adds up the CPU of calls made on one thread. As the stock
// meter, it adds up what kube-scheduler's own resource plugins
// (NodeResourcesFit and DynamicResources, see withStockMeter) spend in
// PreFilter for the pod being scheduled, where they run: inside a
// benchmark's measured loop, between gpu-gang's plans, with the caches and
// heap those plans leave. Their PreFilter runs on the calling goroutine, so
// the benchmark locks it to its thread and each call is charged that
// thread's CPU: the plugin's own work and the garbage collection it assists
// with. The collector's background work (its dedicated and idle marking
// and its pauses) runs on other threads; the plugins are charged the share
// of it that the bytes they allocated are of all bytes allocated in the
// loop, since the collector runs as often as the heap grows. The runs
// gpu-gang makes while it simulates a member are gpu-gang's planning, and
// are not metered. Not safe for concurrent use.
//
// The same meter meters a whole scheduling cycle on its thread
// (BenchmarkCapacityPreCheckDRA): less the stock plugins' part, what is
// left is gpu-gang's, read on the same thread.
type threadMeter struct {
	tb testing.TB
	// perIter is how many calls each iteration makes (meteredPlugins for
	// the stock meter); metric names the reported figure.
	perIter int
	metric  string
	// cpu is the plugins' thread CPU, bytes what they allocated, calls
	// how many calls were metered, all since reset; start is the
	// collector's background CPU and the bytes allocated at reset.
	cpu   time.Duration
	bytes uint64
	calls int
	start gcReading
	// allocs is allocated's sample, kept so that a metered call allocates
	// nothing of its own.
	allocs [1]metrics.Sample
}

// withStockMeter meters the PreFilter of NodeResourcesFit and, with
// withDRA, DynamicResources on m.
func withStockMeter(m *threadMeter) envOption {
	return func(c *envConfig) { c.stock = m }
}

// metered runs f, charging its thread CPU and allocations to m unless ctx
// is a simulation.
func (m *threadMeter) metered(ctx context.Context, f func()) {
	if contract.Simulated(ctx) {
		f()
		return
	}
	// The counter reads stay outside the thread CPU they bracket.
	allocated := m.allocated()
	start := threadCPU(m.tb)
	f()
	m.cpu += threadCPU(m.tb) - start
	m.bytes += m.allocated() - allocated
	m.calls++
}

// allocated reads the runtime's count of bytes allocated so far, alone
// (readGC reads the collector's CPU too, which a call does not need), into
// m's own sample.
func (m *threadMeter) allocated() uint64 {
	m.allocs[0].Name = gcSamples[0]
	metrics.Read(m.allocs[:])
	return m.allocs[0].Value.Uint64()
}

// reset forgets what m has metered.
func (m *threadMeter) reset() { m.cpu, m.bytes, m.calls, m.start = 0, 0, 0, readGC() }

// report divides what m metered since reset, with its share of the
// collector's background CPU, by the benchmark's iterations, reports it as
// its metric and returns it. Each iteration must have made its calls (each
// of the plugins once): a meter that missed one would charge its CPU to
// gpu-gang.
func (m *threadMeter) report(b *testing.B) float64 {
	b.Helper()
	if b.N == 0 {
		return 0
	}
	if m.calls != m.perIter*b.N {
		b.Fatalf("metered %d calls in %d iterations, want %d each", m.calls, b.N, m.perIter)
	}
	now := readGC()
	cpu := float64(m.cpu)
	if all := now.allocated - m.start.allocated; all > 0 {
		cpu += float64(now.background-m.start.background) * float64(m.bytes) / float64(all)
	}
	perOp := cpu / float64(b.N)
	b.ReportMetric(perOp, m.metric)
	return perOp
}

// gcReading is the runtime's count of bytes allocated and its estimate of
// the CPU its collector spent off the allocating goroutines, so far.
type gcReading struct {
	allocated  uint64
	background time.Duration
}

// gcSamples are the runtime metrics readGC reads: bytes allocated, then
// the collector's background classes of CPU (assists run on the
// allocating goroutine, and its thread CPU has them).
var gcSamples = []string{
	"/gc/heap/allocs:bytes",
	"/cpu/classes/gc/mark/dedicated:cpu-seconds",
	"/cpu/classes/gc/mark/idle:cpu-seconds",
	"/cpu/classes/gc/pause:cpu-seconds",
}

func readGC() gcReading {
	samples := make([]metrics.Sample, len(gcSamples))
	for i, name := range gcSamples {
		samples[i].Name = name
	}
	metrics.Read(samples)
	r := gcReading{allocated: samples[0].Value.Uint64()}
	for _, s := range samples[1:] {
		r.background += time.Duration(s.Value.Float64() * float64(time.Second))
	}
	return r
}

// meteredPlugins is how many plugins a threadMeter meters in one scheduling
// cycle: NodeResourcesFit and DynamicResources.
const meteredPlugins = 2

// meteredFit is NodeResourcesFit with its PreFilter metered.
type meteredFit struct {
	*noderesources.Fit
	m *threadMeter
}

func (p *meteredFit) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (res *fwk.PreFilterResult, status *fwk.Status) {
	p.m.metered(ctx, func() { res, status = p.Fit.PreFilter(ctx, state, pod, nodes) })
	return res, status
}

// meteredDRA is DynamicResources with its PreFilter metered.
type meteredDRA struct {
	*dynamicresources.DynamicResources
	m *threadMeter
}

func (p *meteredDRA) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (res *fwk.PreFilterResult, status *fwk.Status) {
	p.m.metered(ctx, func() { res, status = p.DynamicResources.PreFilter(ctx, state, pod, nodes) })
	return res, status
}
