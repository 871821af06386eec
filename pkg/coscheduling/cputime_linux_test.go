package coscheduling

import (
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// threadCPU is the calling thread's CPU time, read from the kernel's
// CLOCK_THREAD_CPUTIME_ID clock to the nanosecond. The goroutine must be
// locked to its thread (runtime.LockOSThread) for differences to mean
// anything. getrusage(RUSAGE_THREAD) reports the same time from the
// scheduler's ticks, 4 ms apart here: a call shorter than a tick read as
// 0 or 4 ms.
func threadCPU(tb testing.TB) time.Duration {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		tb.Fatalf("reading the thread's CPU time: %v", errno)
	}
	return time.Duration(ts.Nano())
}

// clockThreadCPUTime is Linux's CLOCK_THREAD_CPUTIME_ID, which syscall
// does not name.
const clockThreadCPUTime = 3
