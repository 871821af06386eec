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
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/component-base/cli"
	"k8s.io/klog/v2"

	"github.com/gpu-gang/gpu-gang/pkg/peakheap"
	"github.com/gpu-gang/gpu-gang/pkg/scheduler"
	"github.com/gpu-gang/gpu-gang/pkg/simulator"
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
	runs            int
	gangLines       int
	gpuGangGates    string
	heapProfile     bool
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

// heapProfileArg, right after schedulerCommand, makes the scheduler process
// write heap profiles at its RSS highs at the path prefix that follows
// (package peakheap).
const heapProfileArg = "--heap-profile-prefix="

func main() {
	if len(os.Args) > 1 && os.Args[1] == schedulerCommand {
		os.Exit(runScheduler(os.Args[2:]))
	}
	os.Exit(run())
}

// schedulerCommandLine is the command that runs a profile's scheduler in a
// process of its own: this executable with schedulerCommand, and with
// --heap-profile the path prefix of that profile's heap profiles.
func schedulerCommandLine(self string, o *options) []string {
	cmd := []string{self, schedulerCommand}
	if o.heapProfile {
		cmd = append(cmd, heapProfileArg+filepath.Join(o.out, o.childProfile+"-scheduler"))
	}
	return cmd
}

// splitSchedulerArgs takes the heap profiles' prefix, if given, off the
// front of the scheduler command's arguments.
func splitSchedulerArgs(args []string) (heapPrefix string, rest []string) {
	if len(args) > 0 {
		if p, ok := strings.CutPrefix(args[0], heapProfileArg); ok {
			return p, args[1:]
		}
	}
	return "", args
}

// runScheduler runs gpu-gang's scheduler command with args, writing heap
// profiles at its RSS highs if the arguments start with heapProfileArg.
func runScheduler(args []string) int {
	heapPrefix, args := splitSchedulerArgs(args)
	if heapPrefix != "" {
		peakheap.SetProfileRate()
		go func() {
			if err := peakheap.Run(context.Background(), peakheap.Options{Prefix: heapPrefix}); err != nil {
				fmt.Fprintf(os.Stderr, "heap profiles stopped: %v\n", err)
			}
		}()
	}
	cmd := scheduler.NewCommand()
	cmd.SetArgs(args)
	return cli.Run(cmd)
}

func run() int {
	var o options
	fs := flag.NewFlagSet("simulator", flag.ContinueOnError)
	fs.StringVar(&o.scenario, "scenario", "scenarios/default.yaml", "scenario file (see scenarios/README.md)")
	fs.StringVar(&o.snapshot, "snapshot", "", "run a snapshot of a real cluster instead of a scenario: the file `"+snapshot.Command+"` writes (see scenarios/README.md)")
	fs.StringVar(&o.fromCluster, "from-cluster", "", "take the snapshot from the cluster this kubeconfig file points at, write it to <out>/snapshot.yaml, and run it")
	fs.BoolVar(&o.keepNames, "keep-names", false, "with --snapshot or --from-cluster, keep node, label and job names; by default they are anonymized")
	fs.StringVar(&o.profiles, "profiles", "",
		"comma-separated profiles to run, one after another, each on a fresh control plane (default: the scenario's `profiles`, or else all of "+strings.Join(simulator.ProfileNames, ",")+"): gpu-gang, default (stock kube-scheduler, no gangs), default-affinity (default with node affinity from each gang's GPU fleet policy; skipped where it gives none), in-tree (k8s 1.37 GangScheduling + TopologyPlacement), in-tree-topology (in-tree with a preferred level as the PodGroup's topology key; skipped where no gang prefers one), gpu-gang-native (gpu-gang on in-tree's very objects: scheduling.k8s.io/v1beta1 PodGroups)")
	fs.StringVar(&o.out, "out", "", "directory for the report, JSON results and logs (default _output/simulator/<scenario>)")
	fs.StringVar(&o.schedulerConfig, "scheduler-config", "manifests/scheduler-config.yaml", "gpu-gang's KubeSchedulerConfiguration, used as written except for the client limits")
	fs.StringVar(&o.crd, "crd", "manifests/crds/scheduling.x-k8s.io_podgroups.yaml", "the PodGroup CRD file to install")
	fs.StringVar(&o.kwok, "kwok", "bin/kwok", "kwok binary (build it with: source hack/lib/tools.sh && tools::ensure kwok)")
	fs.Float64Var(&o.schedulerQPS, "scheduler-qps", simulator.DefaultSchedulerQPS, "client QPS of the scheduler, every profile alike; high enough that the API server, not the rate limiter, bounds binding")
	fs.IntVar(&o.schedulerBurst, "scheduler-burst", simulator.DefaultSchedulerBurst, "client burst of the scheduler, every profile alike")
	fs.Float64Var(&o.clientQPS, "client-qps", simulator.DefaultClientQPS, "client QPS of the simulator's own submissions and set-up")
	fs.IntVar(&o.clientBurst, "client-burst", simulator.DefaultClientBurst, "client burst of the simulator's own submissions and set-up")
	fs.DurationVar(&o.partialGrace, "partial-grace", simulator.DefaultPartialGrace,
		"a gang part-bound for at most this long, plus --partial-grace-per-member for each member, does not count as partial: once released, its members bind through separate API calls, which land up to about 2s apart on a saturated 2-core machine")
	fs.DurationVar(&o.graceMember, "partial-grace-per-member", simulator.DefaultPartialGracePerMember,
		"added to --partial-grace for each member of a gang: binding a large gang takes longer")
	fs.DurationVar(&o.sampleInterval, "sample-interval", simulator.DefaultSampleInterval, "how often GPU occupancy and free leaves and cliques are sampled")
	fs.DurationVar(&o.timeout, "timeout", 0, "bound on each profile's run, overriding the scenario's timeout (0 keeps the scenario's)")
	fs.IntVar(&o.runs, "runs", 1, "run every profile this many times, each run's output in <out>/run-<i>, and report each figure's median and range over the runs with the machine and date (in <out>/runs.txt)")
	fs.IntVar(&o.gangLines, "gang-lines", 20, "per profile, print at most this many per-gang lines (where and when each gang landed)")
	fs.StringVar(&o.gpuGangGates, "gpu-gang-feature-gates", "", "extra feature gates (Name=true,...) for the gpu-gang profile's kube-apiserver and kube-scheduler, to try the plugin under other gates")
	fs.BoolVar(&o.heapProfile, "heap-profile", false,
		"where a profile's scheduler runs in a process of its own (S11, or a scenario's schedulerProcess), have that process write a Go heap profile each time its RSS reaches a new high (4 MiB above the last), to <out>/<profile>-scheduler-heap.pb.gz, with its RSS and the Go runtime's memory classes at that moment in <out>/<profile>-scheduler-heap.txt and its goroutines in <out>/<profile>-scheduler-goroutines.txt; read the profile with go tool pprof -sample_index=inuse_space (sampled every 64 KiB)")
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
