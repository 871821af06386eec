// Command simulator runs a workload through gpu-gang and the schedulers a
// user would pick instead, each on a fresh embedded control plane with a
// simulated GPU fabric, and reports the difference.
//
//	go run ./cmd/simulator --scenario scenarios/default.yaml
//
// Each profile runs in a child process: the simulator starts itself again
// with the hidden --child-profile flag, and the child writes its result as
// JSON. Feature gates are process-wide in kube-apiserver and kube-scheduler,
// and the in-tree baseline turns on gates that must not leak into the other
// profiles; a child process also gives each profile a cold heap and no
// goroutines left over from the last one.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/component-base/cli"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/scheduler"
	"github.com/gpu-gang/gpu-gang/pkg/simulator"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/metrics"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/report"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/snapshot"
)

type options struct {
	scenario        string
	snapshot        string
	fromCluster     string
	keepNames       bool
	profiles        string
	out             string
	schedulerConfig string
	crd             string
	kwok            string
	schedulerQPS    float64
	schedulerBurst  int
	clientQPS       float64
	clientBurst     int
	partialGrace    time.Duration
	graceMember     time.Duration
	sampleInterval  time.Duration
	timeout         time.Duration
	gangLines       int
	gpuGangGates    string
	rerender        string
	childProfile    string
	childResult     string
}

// schedulerCommand, as the first argument, makes the simulator run
// gpu-gang's scheduler command (kube-scheduler with gpu-gang's plugins)
// with the arguments that follow, as cmd/scheduler does. Profiles whose
// scheduler must not share this process's feature gates with the
// in-process kube-apiserver run it in a process of its own this way, so
// that no separate binary needs building.
const schedulerCommand = "run-scheduler"

func main() {
	if len(os.Args) > 1 && os.Args[1] == schedulerCommand {
		cmd := scheduler.NewCommand()
		cmd.SetArgs(os.Args[2:])
		os.Exit(cli.Run(cmd))
	}
	os.Exit(run())
}

func run() int {
	var o options
	fs := flag.NewFlagSet("simulator", flag.ContinueOnError)
	fs.StringVar(&o.scenario, "scenario", "scenarios/default.yaml", "scenario file (see scenarios/README.md)")
	fs.StringVar(&o.snapshot, "snapshot", "", "run a snapshot of a real cluster instead of a scenario: the file `"+snapshot.Command+"` writes (see scenarios/README.md)")
	fs.StringVar(&o.fromCluster, "from-cluster", "", "take the snapshot from the cluster this kubeconfig file points at, write it to <out>/snapshot.yaml, and run it")
	fs.BoolVar(&o.keepNames, "keep-names", false, "with --snapshot or --from-cluster, keep node, label and job names; by default they are anonymized")
	fs.StringVar(&o.profiles, "profiles", strings.Join(simulator.ProfileNames, ","),
		"comma-separated profiles to run, one after another, each on a fresh control plane: gpu-gang, default (stock kube-scheduler, no gangs), in-tree (k8s 1.37 GangScheduling + TopologyPlacement), gpu-gang-native (gpu-gang on in-tree's very objects: scheduling.k8s.io/v1beta1 PodGroups)")
	fs.StringVar(&o.out, "out", "", "directory for the report, JSON results and logs (default _output/simulator/<scenario>)")
	fs.StringVar(&o.schedulerConfig, "scheduler-config", "manifests/scheduler-config.yaml", "gpu-gang's KubeSchedulerConfiguration, used as written except for the client limits")
	fs.StringVar(&o.crd, "crd", "manifests/crds/scheduling.x-k8s.io_podgroups.yaml", "the PodGroup CRD file to install")
	fs.StringVar(&o.kwok, "kwok", "bin/kwok", "kwok binary (build it with: source hack/lib/tools.sh && tools::ensure kwok)")
	fs.Float64Var(&o.schedulerQPS, "scheduler-qps", 5000, "client QPS of the scheduler, every profile alike; high enough that the API server, not the rate limiter, bounds binding")
	fs.IntVar(&o.schedulerBurst, "scheduler-burst", 10000, "client burst of the scheduler, every profile alike")
	fs.Float64Var(&o.clientQPS, "client-qps", 5000, "client QPS of the simulator's own submissions and set-up")
	fs.IntVar(&o.clientBurst, "client-burst", 10000, "client burst of the simulator's own submissions and set-up")
	fs.DurationVar(&o.partialGrace, "partial-grace", 2*time.Second,
		"a gang part-bound for at most this long, plus --partial-grace-per-member for each member, does not count as partial: once released, its members bind through separate API calls, which land up to about 2s apart on a saturated 2-core machine")
	fs.DurationVar(&o.graceMember, "partial-grace-per-member", 20*time.Millisecond,
		"added to --partial-grace for each member of a gang: binding a large gang takes longer")
	fs.DurationVar(&o.sampleInterval, "sample-interval", 250*time.Millisecond, "how often GPU occupancy and free leaves and cliques are sampled")
	fs.DurationVar(&o.timeout, "timeout", 0, "bound on each profile's run, overriding the scenario's timeout (0 keeps the scenario's)")
	fs.IntVar(&o.gangLines, "gang-lines", 20, "per profile, print at most this many per-gang lines (where and when each gang landed)")
	fs.StringVar(&o.gpuGangGates, "gpu-gang-feature-gates", "", "extra feature gates (Name=true,...) for the gpu-gang profile's kube-apiserver and kube-scheduler, to try the plugin under other gates")
	fs.StringVar(&o.rerender, "rerender", "", "render report.html and the summary again from this results.json, without running anything")
	fs.StringVar(&o.childProfile, "child-profile", "", "internal: run this one profile in this process")
	fs.StringVar(&o.childResult, "child-result", "", "internal: where the child writes its JSON result")
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.Var(klogFlags.Lookup("v").Value, "v", "log verbosity of the control plane and scheduler logs (written to <out>/<profile>.log)")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, `Usage: simulator [flags]

Runs a scenario's GPU workload through each scheduler profile on a fresh
embedded etcd + kube-apiserver with a simulated fabric; kwok moves bound pods
to Running and then Succeeded after their duration. Writes report.html,
results.json and logs into --out and prints a summary.

With --snapshot FILE (what `+"`"+snapshot.Command+"`"+` prints) or
--from-cluster KUBECONFIG, the fabric is your cluster's GPU nodes, its
running GPU pods are pre-fill and its pending gangs and GPU pods the
workload.

Flags:
`)
		fs.VisitAll(func(f *flag.Flag) {
			if strings.HasPrefix(f.Name, "child-") {
				return
			}
			def := ""
			if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "0s" && f.DefValue != "false" {
				def = fmt.Sprintf(" (default %s)", f.DefValue)
			}
			fmt.Fprintf(w, "  --%s\n    \t%s%s\n", f.Name, f.Usage, def)
		})
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unexpected arguments: %v\n", fs.Args())
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.rerender != "" {
		return rerender(o.rerender)
	}

	args := os.Args[1:]
	if o.fromCluster != "" {
		if o.snapshot != "" {
			fmt.Fprintln(os.Stderr, "--snapshot and --from-cluster: give one")
			return 2
		}
		if o.out == "" {
			o.out = filepath.Join("_output", "simulator", "cluster")
		}
		path, err := fetchSnapshot(ctx, o.fromCluster, o.out)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		// The profiles' processes read the file, not the cluster: every
		// profile runs the same snapshot.
		o.snapshot, o.fromCluster = path, ""
		args = append(withoutFlag(args, "from-cluster"), "--snapshot="+path)
	}
	in, err := loadInput(&o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if o.out == "" {
		o.out = filepath.Join("_output", "simulator", in.Name)
	}
	if o.childProfile != "" {
		return runChild(ctx, &o, in, klogFlags)
	}
	return runParent(ctx, &o, in, args)
}

// snapshotTimeout bounds a snapshot's run unless --timeout says otherwise:
// pending jobs run until the end, and a gang that cannot fit waits for it.
const snapshotTimeout = 2 * time.Minute

// loadInput reads the scenario or the snapshot the flags name.
func loadInput(o *options) (*simulator.Input, error) {
	if o.snapshot == "" {
		sc, err := scenario.Load(o.scenario)
		if err != nil {
			return nil, err
		}
		if o.timeout > 0 {
			sc.Timeout.Duration = o.timeout
		}
		return simulator.ScenarioInput(sc)
	}
	snap, err := snapshot.Load(o.snapshot)
	if err != nil {
		return nil, err
	}
	preset, levels, err := topologyOf(o.schedulerConfig)
	if err != nil {
		return nil, err
	}
	timeout := snapshotTimeout
	if o.timeout > 0 {
		timeout = o.timeout
	}
	name := strings.TrimSuffix(filepath.Base(o.snapshot), filepath.Ext(o.snapshot))
	return snap.Input(snapshot.Options{Name: name, Preset: preset, Levels: levels, KeepNames: o.keepNames, Timeout: timeout})
}

// fetchSnapshot writes a snapshot of the cluster into out and returns its
// path.
func fetchSnapshot(ctx context.Context, kubeconfig, out string) (string, error) {
	data, err := snapshot.FetchFromKubeconfig(ctx, kubeconfig)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(out, "snapshot.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "snapshot of the cluster written to %s (real names: keep it private)\n", path)
	return path, nil
}

// withoutFlag drops --name and --name=value (and -name forms) from args.
func withoutFlag(args []string, name string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := strings.TrimLeft(args[i], "-")
		switch {
		case a == name && i+1 < len(args):
			i++
		case strings.HasPrefix(a, name+"="):
		default:
			out = append(out, args[i])
		}
	}
	return out
}

// topologyOf reads the topology levels gpu-gang's configuration sets, so
// that a snapshot's fabric is read as the scheduler reads it.
func topologyOf(configFile string) (string, []scheduling.Level, error) {
	data, err := os.ReadFile(configFile)
	if err != nil {
		return "", nil, err
	}
	var cfg struct {
		Profiles []struct {
			PluginConfig []struct {
				Name string `json:"name"`
				Args struct {
					TopologyPreset string   `json:"topologyPreset"`
					TopologyLevels []string `json:"topologyLevels"`
				} `json:"args"`
			} `json:"pluginConfig"`
		} `json:"profiles"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return "", nil, fmt.Errorf("%s: %w", configFile, err)
	}
	for _, p := range cfg.Profiles {
		for _, pc := range p.PluginConfig {
			if pc.Name != "Coscheduling" {
				continue
			}
			preset := pc.Args.TopologyPreset
			if preset == "" && len(pc.Args.TopologyLevels) == 0 {
				preset = scheduling.DefaultPreset
			}
			levels, err := scheduling.ResolveLevels(preset, pc.Args.TopologyLevels)
			if err != nil {
				return "", nil, fmt.Errorf("%s: %w", configFile, err)
			}
			return preset, levels, nil
		}
	}
	levels, _ := scheduling.Preset(scheduling.DefaultPreset)
	return scheduling.DefaultPreset, levels, nil
}

// runParent runs every profile in a child process, then writes the report.
func runParent(ctx context.Context, o *options, in *simulator.Input, args []string) int {
	var profiles []string
	for _, p := range strings.Split(o.profiles, ",") {
		if p = strings.TrimSpace(p); p != "" {
			profiles = append(profiles, p)
		}
	}
	for _, p := range profiles {
		if _, err := simulator.LookupProfile(p); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
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
	run := &report.Run{Scenario: in.Name, Description: in.Description}
	var preemption []metrics.PreemptionSummary
	failed := false
	for _, p := range profiles {
		resultFile := simulator.ResultFile(o.out, p)
		_ = os.Remove(resultFile)
		_ = os.Remove(simulator.PreemptionFile(o.out, p))
		started := time.Now()
		cmd := exec.CommandContext(ctx, self, append(append([]string{}, args...), "--child-profile="+p, "--child-result="+resultFile)...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		childErr := cmd.Run()
		res, err := readResult(resultFile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "[%s] no result (%v); see %s\n", p, errors.Join(childErr, err), logFile(o.out, p))
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
		if ps, err := readPreemption(simulator.PreemptionFile(o.out, p)); err == nil {
			preemption = append(preemption, *ps)
		}
		if ctx.Err() != nil {
			return 1
		}
	}
	// Occupancy figures compare profiles over one window.
	metrics.CommonWindow(run.Results)
	if err := writeOutputs(o.out, run); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println()
	if err := report.WriteSummary(os.Stdout, run); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if hasUrgentJobs(preemption) {
		fmt.Println()
		if err := metrics.WritePreemption(os.Stdout, preemption); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	fmt.Printf("report: %s\n", filepath.Join(o.out, "report.html"))
	if failed {
		return 1
	}
	return 0
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
	if p, err := simulator.LookupProfile(o.childProfile); err == nil && p.SchedulerProcess {
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
		SchedulerCommand:  []string{self, schedulerCommand},
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

// isTerminal reports whether f is a character device, as a terminal is.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
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
