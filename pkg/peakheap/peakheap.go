// Package peakheap writes a Go heap profile of this process each time its
// resident memory reaches a new high, so that the profile left when the
// process ends was taken at (within one step of) its peak RSS. Beside the
// profile it writes the process's RSS and the Go runtime's memory classes
// at the same moment, which tell how much of the RSS is live heap, heap
// the collector has not yet reclaimed or returned, stacks, or runtime
// metadata.
//
// The heap profile is the one runtime/pprof writes: its in-use figures
// are as of the most recently completed garbage collection, not the very
// moment it is written.
package peakheap

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"time"
)

// Default polling interval and step.
const (
	DefaultInterval = 100 * time.Millisecond
	DefaultStep     = 4 << 20
)

// ProfileRate is the heap profile's sampling rate (runtime.MemProfileRate)
// that SetProfileRate sets: one sample per 64 KiB allocated on average,
// eight times Go's default, so that holders of a few MiB are told apart.
const ProfileRate = 64 << 10

// SetProfileRate sets runtime.MemProfileRate to ProfileRate. Call it first
// thing in main, before the process allocates what the profile should
// show: the rate applies to allocations made after it is set.
func SetProfileRate() { runtime.MemProfileRate = ProfileRate }

// Options configures Run.
type Options struct {
	// Prefix is the path the files are written at: Prefix+"-heap.pb.gz"
	// (the pprof heap profile), Prefix+"-heap.txt" (RSS and runtime
	// memory classes) and Prefix+"-goroutines.txt" (the goroutines'
	// stacks, grouped, with their counts). Each new high replaces all
	// three.
	Prefix string
	// Interval is how often RSS is read; DefaultInterval if zero.
	Interval time.Duration
	// Step is how far above the RSS of the last profile written a new
	// high must be before another is written; DefaultStep if zero. It
	// bounds what writing profiles costs while memory grows.
	Step int64
	// RSS reads the process's resident memory in bytes; nil reads
	// /proc/self/statm.
	RSS func() (int64, error)
}

// ProfileFile and StatsFile are the paths Run writes for prefix.
func ProfileFile(prefix string) string { return prefix + "-heap.pb.gz" }

// StatsFile is where Run writes the RSS and memory classes for prefix.
func StatsFile(prefix string) string { return prefix + "-heap.txt" }

// GoroutinesFile is where Run writes the goroutines' stacks for prefix.
func GoroutinesFile(prefix string) string { return prefix + "-goroutines.txt" }

// Run polls the process's RSS until ctx is done, and writes the heap
// profile and memory statistics each time the RSS is Step above the last
// profile's (the first time, at the first reading). It returns ctx's
// error, or the first error reading RSS or writing a file.
func Run(ctx context.Context, opts Options) error {
	if opts.Prefix == "" {
		return errors.New("peakheap: no file prefix")
	}
	interval, step, rss := opts.Interval, opts.Step, opts.RSS
	if interval <= 0 {
		interval = DefaultInterval
	}
	if step <= 0 {
		step = DefaultStep
	}
	if rss == nil {
		rss = statmRSS
	}
	if err := os.MkdirAll(filepath.Dir(opts.Prefix), 0o755); err != nil {
		return err
	}
	start := time.Now()
	written := int64(-1)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		r, err := rss()
		if err != nil {
			return fmt.Errorf("peakheap: reading RSS: %w", err)
		}
		if written < 0 || r >= written+step {
			if err := write(opts.Prefix, r, time.Since(start)); err != nil {
				return err
			}
			written = r
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// write replaces the profile, statistics and goroutine files, each through a
// temporary file and a rename, so that a process killed while writing
// leaves the previous pair whole.
func write(prefix string, rss int64, since time.Duration) error {
	if err := writeFile(ProfileFile(prefix), func(f *os.File) error {
		return pprof.Lookup("heap").WriteTo(f, 0)
	}); err != nil {
		return err
	}
	if err := writeFile(GoroutinesFile(prefix), func(f *os.File) error {
		return pprof.Lookup("goroutine").WriteTo(f, 1)
	}); err != nil {
		return err
	}
	return writeFile(StatsFile(prefix), func(f *os.File) error {
		w := bufio.NewWriter(f)
		fmt.Fprintf(w, "rss:bytes %d\nsince-start:seconds %.1f\n", rss, since.Seconds())
		writeMetrics(w)
		return w.Flush()
	})
}

func writeFile(path string, fill func(*os.File) error) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := fill(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// writeMetrics writes the runtime's memory classes and heap figures, one
// "name value" line each, in the order runtime/metrics lists them.
func writeMetrics(w *bufio.Writer) {
	var samples []metrics.Sample
	for _, d := range metrics.All() {
		if d.Kind != metrics.KindUint64 {
			continue
		}
		if strings.HasPrefix(d.Name, "/memory/classes/") || strings.HasPrefix(d.Name, "/gc/heap/") ||
			d.Name == "/sched/goroutines:goroutines" || d.Name == "/gc/gogc:percent" || d.Name == "/gc/gomemlimit:bytes" || d.Name == "/gc/cycles/total:gc-cycles" {
			samples = append(samples, metrics.Sample{Name: d.Name})
		}
	}
	metrics.Read(samples)
	for _, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			fmt.Fprintf(w, "%s %d\n", s.Name, s.Value.Uint64())
		}
	}
}

// statmRSS reads this process's resident pages from /proc/self/statm.
func statmRSS() (int64, error) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, err
	}
	var size, resident int64
	if _, err := fmt.Sscan(string(b), &size, &resident); err != nil {
		return 0, fmt.Errorf("/proc/self/statm %q: %w", b, err)
	}
	return resident * int64(os.Getpagesize()), nil
}
