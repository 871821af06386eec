package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gpu-gang/gpu-gang/pkg/simulator"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/metrics"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/report"
)

// runParent runs every profile in a child process, then writes the report.
func runParent(ctx context.Context, o *options, in *simulator.Input, args []string) int {
	var profiles []string
	names := o.profiles
	if names == "" {
		names = strings.Join(simulator.ProfileNames, ",")
		if len(in.Profiles) > 0 {
			names = strings.Join(in.Profiles, ",")
		}
	}
	for _, p := range strings.Split(names, ",") {
		if p = strings.TrimSpace(p); p != "" {
			profiles = append(profiles, p)
		}
	}
	var applying []string
	for _, p := range profiles {
		profile, err := simulator.LookupProfile(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		applies, err := profile.AppliesTo(in)
		if err != nil {
			fmt.Fprintf(os.Stderr, "scenario %s: %s: %v\n", in.Name, p, err)
			return 2
		}
		if !applies {
			fmt.Fprintf(os.Stderr, "scenario %s: %s skipped: its configuration changes nothing here\n", in.Name, p)
			continue
		}
		applying = append(applying, p)
	}
	profiles = applying
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "scenario %s: profiles %s; output in %s\n", in.Name, strings.Join(profiles, ", "), o.out)
	if o.snapshot != "" {
		fmt.Fprintln(os.Stderr, in.Description)
	}
	if o.runs <= 1 {
		_, code := runOnce(ctx, o, in, args, profiles, o.out, self)
		return code
	}
	machine := thisMachine(time.Now())
	var runs []*report.Run
	code := 0
	for i := 1; i <= o.runs; i++ {
		out := filepath.Join(o.out, fmt.Sprintf("run-%d", i))
		if err := os.MkdirAll(out, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "scenario %s: run %d of %d, output in %s\n", in.Name, i, o.runs, out)
		run, c := runOnce(ctx, o, in, args, profiles, out, self)
		if run != nil {
			runs = append(runs, run)
		}
		code = max(code, c)
		if ctx.Err() != nil {
			return 1
		}
	}
	f, err := os.Create(filepath.Join(o.out, "runs.txt"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = f.Close() }()
	fmt.Println()
	if err := report.WriteRuns(io.MultiWriter(os.Stdout, f), runs, machine); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return code
}

// runOnce runs every profile once, each in a child process with its
// output in out, and writes the report there. It returns the run (nil if
// it stopped early) and the exit code.
func runOnce(ctx context.Context, o *options, in *simulator.Input, args, profiles []string, out, self string) (*report.Run, int) {
	run := &report.Run{Scenario: in.Name, Description: in.Description}
	var preemption []metrics.PreemptionSummary
	failed := false
	for _, p := range profiles {
		resultFile := simulator.ResultFile(out, p)
		_ = os.Remove(resultFile)
		_ = os.Remove(simulator.PreemptionFile(out, p))
		started := time.Now()
		cmd := exec.CommandContext(ctx, self, append(append([]string{}, args...), "--out="+out, "--child-profile="+p, "--child-result="+resultFile)...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		childErr := cmd.Run()
		res, err := readResult(resultFile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "[%s] no result (%v); see %s\n", p, errors.Join(childErr, err), logFile(out, p))
			failed = true
			res = &metrics.Result{Profile: p, Scenario: in.Name, Error: fmt.Sprint(errors.Join(childErr, err))}
		} else if res.Error != "" {
			fmt.Fprintf(os.Stderr, "[%s] failed: %s\n", p, res.Error)
			failed = true
		}
		fmt.Fprintf(os.Stderr, "[%s] finished in %s\n", p, time.Since(started).Round(100*time.Millisecond))
		if err := report.WriteGangs(os.Stdout, res, o.gangLines); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		if err := writeFleetCounts(os.Stdout, in, res); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		run.Results = append(run.Results, res)
		if ps, err := readPreemption(simulator.PreemptionFile(out, p)); err == nil {
			preemption = append(preemption, *ps)
		}
		if ctx.Err() != nil {
			return nil, 1
		}
	}
	// Occupancy figures compare profiles over one window.
	metrics.CommonWindow(run.Results)
	if err := writeOutputs(out, run); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return nil, 1
	}
	fmt.Println()
	if err := report.WriteSummary(os.Stdout, run); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return nil, 1
	}
	if hasUrgentJobs(preemption) {
		fmt.Println()
		if err := metrics.WritePreemption(os.Stdout, preemption); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return nil, 1
		}
	}
	fmt.Printf("report: %s\n", filepath.Join(out, "report.html"))
	if failed {
		return run, 1
	}
	return run, 0
}

// readPreemption reads what a child wrote to simulator.PreemptionFile.
func readPreemption(path string) (*metrics.PreemptionSummary, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := &metrics.PreemptionSummary{}
	if err := json.Unmarshal(data, s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// hasUrgentJobs reports whether a run had jobs of more than the lowest
// priority, so that preemption is worth reporting.
func hasUrgentJobs(sums []metrics.PreemptionSummary) bool {
	for _, s := range sums {
		if s.UrgentJobs > 0 {
			return true
		}
	}
	return false
}

func readResult(path string) (*metrics.Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	res := &metrics.Result{}
	if err := json.Unmarshal(data, res); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return res, nil
}

// writeOutputs writes results.json (every profile) and report.html.
func writeOutputs(out string, run *report.Run) error {
	if err := writeJSON(filepath.Join(out, "results.json"), run); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(out, "report.html"))
	if err != nil {
		return err
	}
	if err := report.WriteHTML(f, run); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// rerender writes report.html beside a results.json and prints the summary.
func rerender(results string) int {
	data, err := os.ReadFile(results)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	run := &report.Run{}
	if err := json.Unmarshal(data, run); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", results, err)
		return 1
	}
	out := filepath.Dir(results)
	metrics.CommonWindow(run.Results)
	if err := writeOutputs(out, run); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := report.WriteSummary(os.Stdout, run); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("report: %s\n", filepath.Join(out, "report.html"))
	return 0
}
