package coscheduling

import (
	"syscall"
	"testing"
	"time"
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

func processCPU(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatalf("reading CPU time: %v", err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
