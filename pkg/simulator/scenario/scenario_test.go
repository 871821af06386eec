package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

const minimal = `
name: tiny
fabric: {spines: 1, leavesPerSpine: 2, nodesPerLeaf: 4, gpusPerNode: 8, cliqueSize: 2}
workload:
  gangs:
    - {name: g, count: 3, pods: {min: 2, max: 4}, gpusPerPod: 8, duration: 10s, arrival: {process: uniform, rate: 2}}
  jobs:
    - {name: fixed, at: 1.5s, pods: 2, gpusPerPod: 4, duration: 1m, topology: {level: leaf, required: true}}
  pods:
    - {count: 2, gpus: {choices: [1, 2]}}
`

func TestParseDefaults(t *testing.T) {
	s, err := Parse([]byte(minimal))
	require.NoError(t, err)
	require.Equal(t, DefaultTimeout, s.Timeout.Duration)
	require.Equal(t, "nvidia", s.Fabric.Preset)
	require.Equal(t, ArrivalUniform, s.Workload.Gangs[0].Arrival.Process)
	require.Equal(t, "pod", s.Workload.Pods[0].Name)
	require.Equal(t, ArrivalBurst, s.Workload.Pods[0].Arrival.Process)
	require.Equal(t, IntRange{Min: 2, Max: 4}, s.Workload.Gangs[0].Pods)
	require.Equal(t, IntRange{Min: 8, Max: 8}, s.Workload.Gangs[0].GPUsPerPod)
	require.Equal(t, 1500*time.Millisecond, s.Workload.Jobs[0].At.Duration)
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{
			name: "unknown field",
			yaml: strings.Replace(minimal, "gpusPerNode: 8", "gpusPerNode: 8, gpuPerNode: 8", 1),
			want: []string{`unknown field "gpuPerNode"`},
		},
		{
			name: "clique does not divide leaf",
			yaml: strings.Replace(minimal, "cliqueSize: 2", "cliqueSize: 3", 1),
			want: []string{"fabric.cliqueSize", "must divide nodesPerLeaf (4)"},
		},
		{
			name: "unknown preset",
			yaml: strings.Replace(minimal, "cliqueSize: 2}", "cliqueSize: 2, preset: nope}", 1),
			want: []string{"fabric.preset", `"nope"`},
		},
		{
			name: "pod larger than a node",
			yaml: strings.Replace(minimal, "gpusPerPod: 4", "gpusPerPod: 16", 1),
			want: []string{"workload.jobs[0].gpusPerPod", "a node has 8 GPUs"},
		},
		{
			name: "rate missing",
			yaml: strings.Replace(minimal, "{process: uniform, rate: 2}", "{process: poisson}", 1),
			want: []string{"workload.gangs[0].arrival.rate", "must be positive"},
		},
		{
			name: "duplicate names",
			yaml: strings.Replace(minimal, "name: fixed", "name: g", 1),
			want: []string{"workload.jobs[0].name", "Duplicate"},
		},
		{
			name: "bad range",
			yaml: strings.Replace(minimal, "{min: 2, max: 4}", "{min: 4, max: 2}", 1),
			want: []string{"workload.gangs[0].pods.max", "must be at least min"},
		},
		{
			name: "unknown tier",
			yaml: strings.Replace(minimal, "level: leaf", "level: rack", 1),
			want: []string{"workload.jobs[0].topology.level", `"rack"`},
		},
		{
			name: "preload with arrivals over time",
			yaml: strings.Replace(minimal, "name: tiny\n", "name: tiny\npreload: true\n", 1),
			want: []string{"workload.gangs[0].arrival", "must be a burst at 0s with preload", "workload.jobs[0].at", "must be 0 with preload"},
		},
		{
			name: "empty workload",
			yaml: "name: x\nfabric: {spines: 1, leavesPerSpine: 1, nodesPerLeaf: 1, gpusPerNode: 8}\n",
			want: []string{"workload: Required value"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			require.Error(t, err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestExpandIsDeterministicAndOrdered(t *testing.T) {
	s, err := Parse([]byte(minimal))
	require.NoError(t, err)
	a, b := Expand(s), Expand(s)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("two expansions differ (-first,+second):\n%s", diff)
	}
	require.Len(t, a, 3+1+2)
	for i := 1; i < len(a); i++ {
		require.LessOrEqual(t, a[i-1].At, a[i].At, "jobs out of arrival order")
	}
	var names []string
	for _, j := range a {
		names = append(names, j.Name)
		if j.Name == "fixed" {
			require.True(t, j.Gang)
			require.Equal(t, &Topology{Level: TierLeaf, Required: true}, j.Topology)
		}
		if strings.HasPrefix(j.Name, "g-") {
			require.True(t, j.Gang)
			require.GreaterOrEqual(t, j.Pods, 2)
			require.LessOrEqual(t, j.Pods, 4)
			require.Equal(t, 10*time.Second, j.Duration)
		}
		if strings.HasPrefix(j.Name, "pod-") {
			require.False(t, j.Gang)
			require.Equal(t, 1, j.Pods)
			require.Contains(t, []int{1, 2}, j.GPUsPerPod)
		}
	}
	// Uniform arrivals at 2/s: 0s, 0.5s, 1s.
	want := map[string]time.Duration{"g-0": 0, "g-1": 500 * time.Millisecond, "g-2": time.Second, "fixed": 1500 * time.Millisecond}
	for _, j := range a {
		if d, ok := want[j.Name]; ok {
			require.Equal(t, d, j.At, j.Name)
		}
	}
	require.Len(t, names, 6)
}

func TestPoissonArrivalsAverageTheRate(t *testing.T) {
	s, err := Parse([]byte(strings.Replace(minimal, "count: 3", "count: 2000", 1)))
	require.NoError(t, err)
	s.Workload.Gangs[0].Arrival = Arrival{Process: ArrivalPoisson, Rate: 4}
	var last time.Duration
	for _, j := range Expand(s) {
		if strings.HasPrefix(j.Name, "g-") {
			last = max(last, j.At)
		}
	}
	// 2000 arrivals at 4/s take about 500 s; 10% covers the noise of a
	// fixed seed many times over.
	require.InDelta(t, 500, last.Seconds(), 50)
}

// TestShippedScenarios loads every file in scenarios/: a broken shipped
// scenario fails here rather than in make bench.
func TestShippedScenarios(t *testing.T) {
	files, err := filepath.Glob("../../../scenarios/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			s, err := Load(f)
			require.NoError(t, err)
			require.Equal(t, strings.TrimSuffix(filepath.Base(f), ".yaml"), s.Name, "the file is named after the scenario")
			require.NotEmpty(t, Expand(s))
		})
	}
	_, err = os.Stat("../../../scenarios/default.yaml")
	require.NoError(t, err, "the README's scenario must exist")
}

// big and movable, on a gang family or an explicit job, reach every job
// drawn from it and no other.
func TestBigAndMovable(t *testing.T) {
	yaml := strings.Replace(minimal, "duration: 10s,", "duration: 10s, big: true, movable: true,", 1)
	yaml = strings.Replace(yaml, "duration: 1m,", "duration: 1m, movable: true,", 1)
	s, err := Parse([]byte(yaml))
	require.NoError(t, err)
	for _, j := range Expand(s) {
		switch {
		case strings.HasPrefix(j.Name, "g-"):
			require.True(t, j.Big && j.Movable, j.Name)
		case j.Name == "fixed":
			require.True(t, j.Movable && !j.Big, j.Name)
		default:
			require.False(t, j.Big || j.Movable, j.Name)
		}
	}
}
