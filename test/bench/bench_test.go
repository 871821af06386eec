//go:build bench

// Package bench runs the shipped scenarios as go test benchmarks, one
// sub-benchmark per scheduler profile, with names benchstat can compare:
//
//	go test -tags bench -run '^$' -bench . -benchtime 1x -timeout 3h ./test/bench | tee new.txt
//	benchstat -col /profile new.txt
//
// It is behind the bench build tag so that go test ./... never builds it: the
// binary links kube-apiserver, and each scenario runs for minutes.
//
// Each profile runs in a child process (this test binary, started again with
// an environment variable naming the scenario and profile), as
// cmd/simulator does it: feature gates are process-wide, and the in-tree
// profile's gates must not leak into the next benchmark. kwok must have been
// built first, and the scheduler binary gpu-gang-native runs (make
// test-binaries builds both; make bench-go runs it first).
//
// ns/op is the run's makespan, from first submission to the last pod done,
// not the wall time of the whole benchmark (control plane start-up and node
// creation are left out). The other metrics are the simulator's.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/klog/v2"

	"github.com/gpu-gang/gpu-gang/pkg/simulator"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/metrics"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

// childEnv names "<scenario>|<profile>|<result file>" in a child process.
const childEnv = "GPU_GANG_BENCH_CHILD"

// repo is the repository root, relative to this package's directory, where
// go test runs it.
const repo = "../.."

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(runChild(spec))
	}
	os.Exit(m.Run())
}

func BenchmarkS1PlainPods(b *testing.B)      { benchScenario(b, "s1-plain-pods") }
func BenchmarkS2ManySmallGangs(b *testing.B) { benchScenario(b, "s2-many-small-gangs") }
func BenchmarkS3LargeGangs(b *testing.B)     { benchScenario(b, "s3-large-gangs") }
func BenchmarkS4Fragmented(b *testing.B)     { benchScenario(b, "s4-fragmented") }
func BenchmarkS5KnownOptimum(b *testing.B)   { benchScenario(b, "s5-known-optimum") }
func BenchmarkS6Churn(b *testing.B)          { benchScenario(b, "s6-churn") }

func benchScenario(b *testing.B, name string) {
	sc, err := scenario.Load(filepath.Join(repo, "scenarios", name+".yaml"))
	if err != nil {
		b.Fatal(err)
	}
	in, err := simulator.ScenarioInput(sc)
	if err != nil {
		b.Fatal(err)
	}
	for _, profile := range simulator.ProfileNames {
		p, err := simulator.LookupProfile(profile)
		if err != nil {
			b.Fatal(err)
		}
		if applies, err := p.AppliesTo(in); err != nil {
			b.Fatal(err)
		} else if !applies {
			continue
		}
		b.Run("profile="+profile, func(b *testing.B) {
			var sum metrics.Summary
			// excess sums extra domains per level, in the order the
			// results list levels (loosest first).
			var levels []string
			excess := map[string]int{}
			for range b.N {
				res := runProfile(b, name, profile)
				s := res.Summary
				sum.PodsPerSecond += s.PodsPerSecond
				sum.GangsPerSecond += s.GangsPerSecond
				sum.GangLatencyP50 += s.GangLatencyP50
				sum.GangLatencyP99 += s.GangLatencyP99
				sum.PartialGangSeconds += s.PartialGangSeconds
				sum.MakespanSeconds += s.MakespanSeconds
				sum.UsefulOccupancy += s.UsefulOccupancy
				for _, l := range res.Levels {
					if _, ok := excess[l.Level]; !ok {
						levels = append(levels, l.Level)
					}
					excess[l.Level] += l.ExcessOverJoint
				}
			}
			n := float64(b.N)
			b.ReportMetric(sum.MakespanSeconds/n*1e9, "ns/op")
			b.ReportMetric(sum.PodsPerSecond/n, "pods/s")
			if sum.GangsPerSecond > 0 {
				b.ReportMetric(sum.GangsPerSecond/n, "gangs/s")
				b.ReportMetric(sum.GangLatencyP50/n, "p50-s")
				b.ReportMetric(sum.GangLatencyP99/n, "p99-s")
			}
			b.ReportMetric(sum.PartialGangSeconds/n, "partial-gang-s")
			b.ReportMetric(sum.MakespanSeconds/n, "makespan-s")
			b.ReportMetric(100*sum.UsefulOccupancy/n, "useful-occupancy-%")
			for _, level := range levels {
				b.ReportMetric(float64(excess[level])/n, "extra-"+unitName(level))
			}
		})
	}
}

// runProfile runs one profile of the scenario in a child process and
// returns its result.
func runProfile(b *testing.B, name, profile string) *metrics.Result {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	dir := b.TempDir()
	resultFile := filepath.Join(dir, "result.json")
	logFile := filepath.Join(dir, "child.log")
	log, err := os.Create(logFile)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = log.Close() }()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%s|%s", childEnv, name, profile, resultFile))
	cmd.Stdout, cmd.Stderr = log, log
	runErr := cmd.Run()
	data, err := os.ReadFile(resultFile)
	if err != nil {
		tail, _ := os.ReadFile(logFile)
		if len(tail) > 4000 {
			tail = tail[len(tail)-4000:]
		}
		b.Fatalf("%s/%s left no result (%v, %v); log tail:\n%s", name, profile, runErr, err, tail)
	}
	res := &metrics.Result{}
	if err := json.Unmarshal(data, res); err != nil {
		b.Fatal(err)
	}
	if res.Error != "" {
		b.Fatalf("%s/%s failed: %s", name, profile, res.Error)
	}
	if res.Summary.TimedOut {
		b.Logf("%s/%s hit the scenario's timeout: %d/%d pods bound", name, profile, res.Summary.BoundPods, res.Summary.Pods)
	}
	return res
}

// runChild runs one profile in this process and writes its result.
func runChild(spec string) int {
	parts := strings.Split(spec, "|")
	if len(parts) != 3 {
		fmt.Fprintf(os.Stderr, "%s=%q: want <scenario>|<profile>|<result file>\n", childEnv, spec)
		return 2
	}
	name, profile, resultFile := parts[0], parts[1], parts[2]
	sc, err := scenario.Load(filepath.Join(repo, "scenarios", name+".yaml"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := klog.NewContext(context.Background(), klog.Background())
	res, runErr := simulator.Run(ctx, simulator.Options{
		Scenario:        sc,
		Profile:         profile,
		SchedulerConfig: filepath.Join(repo, "manifests", "scheduler-config.yaml"),
		CRDs:            []string{filepath.Join(repo, "manifests", "crds", "scheduling.x-k8s.io_podgroups.yaml")},
		KwokBinary:      filepath.Join(repo, "bin", "kwok"),
		SchedulerQPS:    simulator.DefaultSchedulerQPS,
		SchedulerBurst:  simulator.DefaultSchedulerBurst,
		ClientQPS:       simulator.DefaultClientQPS,
		ClientBurst:     simulator.DefaultClientBurst,
		PartialGrace:    metrics.Grace{Base: simulator.DefaultPartialGrace, PerMember: simulator.DefaultPartialGracePerMember},
		SampleInterval:  simulator.DefaultSampleInterval,
		// gpu-gang-native's scheduler runs in a process of its own, as
		// the Deployment runs it; make test-binaries builds it.
		SchedulerCommand: []string{filepath.Join(repo, "bin", "gpu-gang-scheduler")},
	})
	if res == nil {
		res = &metrics.Result{Profile: profile, Scenario: name}
		if runErr != nil {
			res.Error = runErr.Error()
		}
	}
	data, err := json.Marshal(res)
	if err == nil {
		err = os.WriteFile(resultFile, data, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// unitName makes a metric unit of a level's name: "NVLink domain" becomes
// "NVLink-domains", "leaf" becomes "leaves".
func unitName(level string) string {
	level = strings.ReplaceAll(level, " ", "-")
	if strings.HasSuffix(level, "leaf") {
		return strings.TrimSuffix(level, "f") + "ves"
	}
	return level + "s"
}
