//go:build !linux

package coscheduling

import (
	"testing"
	"time"
)

// threadCPU would be the calling thread's CPU time; only Linux gives it
// (see cputime_linux_test.go), so a benchmark that meters a thread stops
// here.
func threadCPU(tb testing.TB) time.Duration {
	tb.Fatal("threadMeter reads a thread's CPU time, which this benchmark reads only on Linux")
	return 0
}
