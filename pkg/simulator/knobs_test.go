package simulator

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2/ktesting"
	scheduleroptions "k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// effectiveKnobs are the knob values kube-scheduler runs with, read back
// from a configuration file as kube-scheduler decodes and defaults it.
type effectiveKnobs struct {
	QPS                      float32
	Burst                    int32
	Parallelism              int32
	PercentageOfNodesToScore *int32
	ProfilePercentages       []*int32
	PodInitialBackoffSeconds int64
	PodMaxBackoffSeconds     int64
	LeaderElect              bool
}

// Every profile's scheduler runs with the same limits, whatever its own
// configuration says: here gpu-gang's file is given its own client limits,
// parallelism, backoff and a profile that scores every node, as an earlier
// table was measured, and none of it survives.
func TestEveryProfileRunsWithTheSameKnobs(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	data, err := os.ReadFile("../../manifests/scheduler-config.yaml")
	require.NoError(t, err)
	shipped := map[string]any{}
	require.NoError(t, yaml.Unmarshal(data, &shipped))
	shipped["parallelism"] = 32
	shipped["podMaxBackoffSeconds"] = 3
	shipped["percentageOfNodesToScore"] = 50
	shipped["profiles"].([]any)[0].(map[string]any)["percentageOfNodesToScore"] = 100
	tampered, err := yaml.Marshal(shipped)
	require.NoError(t, err)

	dir := t.TempDir()
	for _, file := range []struct{ name, path string }{
		{"shipped", "../../manifests/scheduler-config.yaml"},
		{"tampered", filepath.Join(dir, "tampered.yaml")},
	} {
		if file.name == "tampered" {
			require.NoError(t, os.WriteFile(file.path, tampered, 0o600))
		}
		t.Run(file.name, func(t *testing.T) {
			want := effectiveKnobs{
				QPS: 123, Burst: 456, Parallelism: 16, PercentageOfNodesToScore: ptr.To[int32](0),
				ProfilePercentages: []*int32{nil}, PodInitialBackoffSeconds: 1, PodMaxBackoffSeconds: 10,
			}
			for _, name := range ProfileNames {
				p, err := LookupProfile(name)
				require.NoError(t, err)
				out := t.TempDir()
				path, err := p.schedulerConfig(file.path, out, Knobs{QPS: 123, Burst: 456})
				require.NoError(t, err)
				cfg, err := scheduleroptions.LoadConfigFromFile(logger, path)
				require.NoError(t, err)
				got := effectiveKnobs{
					QPS: cfg.ClientConnection.QPS, Burst: cfg.ClientConnection.Burst, Parallelism: cfg.Parallelism,
					PercentageOfNodesToScore: cfg.PercentageOfNodesToScore,
					PodInitialBackoffSeconds: cfg.PodInitialBackoffSeconds, PodMaxBackoffSeconds: cfg.PodMaxBackoffSeconds,
					LeaderElect: cfg.LeaderElection.LeaderElect,
				}
				for _, prof := range cfg.Profiles {
					got.ProfilePercentages = append(got.ProfilePercentages, prof.PercentageOfNodesToScore)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s: knobs (-want,+got):\n%s", name, diff)
				}
			}
		})
	}
}
