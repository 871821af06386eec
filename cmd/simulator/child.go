package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/gpu-gang/gpu-gang/pkg/simulator"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/metrics"
)

// runChild runs one profile in this process and writes its result.
func runChild(ctx context.Context, o *options, in *simulator.Input, klogFlags *flag.FlagSet) int {
	logPath := logFile(o.out, o.childProfile)
	logOut, err := os.Create(logPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = logOut.Close() }()
	// The control plane logs a lot at V(0), and etcd's client logs to
	// stderr directly; send all of it to the log file and keep the terminal
	// for the progress line.
	progressOut, err := redirectStderr(logOut)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	klog.LogToStderr(false)
	klog.SetOutputBySeverity("INFO", logOut)
	if err := klogFlags.Set("stderrthreshold", "FATAL"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kwokLog, err := os.Create(filepath.Join(o.out, o.childProfile+"-kwok.log"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = kwokLog.Close() }()

	var extraGates []string
	if o.childProfile == simulator.ProfileGpuGang && o.gpuGangGates != "" {
		extraGates = strings.Split(o.gpuGangGates, ",")
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(progressOut, err)
		return 1
	}
	// A profile whose scheduler runs in a process of its own logs it to a
	// file of its own; an in-process scheduler logs with the rest.
	var schedulerLog io.Writer
	if p, err := simulator.LookupProfile(o.childProfile); err == nil && (p.SchedulerProcess || in.SchedulerProcess) {
		f, err := os.Create(filepath.Join(o.out, o.childProfile+"-scheduler.log"))
		if err != nil {
			fmt.Fprintln(progressOut, err)
			return 1
		}
		defer func() { _ = f.Close() }()
		schedulerLog = f
	}
	res, runErr := simulator.Run(klog.NewContext(ctx, klog.Background()), simulator.Options{
		Input:             in,
		Profile:           o.childProfile,
		SchedulerConfig:   o.schedulerConfig,
		CRDs:              []string{o.crd},
		KwokBinary:        o.kwok,
		SchedulerQPS:      float32(o.schedulerQPS),
		SchedulerBurst:    int32(o.schedulerBurst),
		ClientQPS:         float32(o.clientQPS),
		ClientBurst:       o.clientBurst,
		PartialGrace:      metrics.Grace{Base: o.partialGrace, PerMember: o.graceMember},
		SampleInterval:    o.sampleInterval,
		Progress:          os.Stderr,
		ProgressTTY:       isTerminal(os.Stderr),
		KwokLog:           kwokLog,
		ExtraFeatureGates: extraGates,
		SchedulerCommand:  schedulerCommandLine(self, o),
		SchedulerLog:      schedulerLog,
		Preemption: func(s metrics.PreemptionSummary) {
			if err := writeJSON(simulator.PreemptionFile(o.out, o.childProfile), s); err != nil {
				fmt.Fprintln(progressOut, err)
			}
		},
	})
	klog.Flush()
	if res == nil {
		res = &metrics.Result{Profile: o.childProfile, Scenario: in.Name}
		if runErr != nil {
			res.Error = runErr.Error()
		}
	}
	if err := writeJSON(o.childResult, res); err != nil {
		fmt.Fprintln(progressOut, err)
		return 1
	}
	if runErr != nil {
		return 1
	}
	return 0
}

// redirectStderr points file descriptor 2 at f and returns a file for the
// original stderr.
func redirectStderr(f *os.File) (*os.File, error) {
	orig, err := syscall.Dup(2)
	if err != nil {
		return nil, fmt.Errorf("duplicating stderr: %w", err)
	}
	if err := syscall.Dup3(int(f.Fd()), 2, 0); err != nil {
		return nil, fmt.Errorf("redirecting stderr: %w", err)
	}
	return os.NewFile(uintptr(orig), "stderr"), nil
}

func logFile(out, profile string) string { return filepath.Join(out, profile+".log") }

// isTerminal reports whether f is a character device, as a terminal is.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
