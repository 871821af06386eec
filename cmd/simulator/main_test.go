package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// The profiles' processes get the parent's flags with --from-cluster
// replaced by the snapshot it wrote, in every spelling of the flag.
func TestWithoutFlag(t *testing.T) {
	for _, tc := range []struct {
		args, want []string
	}{
		{[]string{"--from-cluster", "/k", "--out", "o"}, []string{"--out", "o"}},
		{[]string{"--from-cluster=/k", "-v=2"}, []string{"-v=2"}},
		{[]string{"-from-cluster", "/k"}, nil},
		{[]string{"--keep-names", "--out=o"}, []string{"--keep-names", "--out=o"}},
	} {
		if diff := cmp.Diff(tc.want, withoutFlag(tc.args, "from-cluster")); diff != "" {
			t.Errorf("withoutFlag(%q) (-want,+got):\n%s", tc.args, diff)
		}
	}
}

// A snapshot's fabric is read with the topology levels gpu-gang is
// configured with, decoded as kube-scheduler and the plugin decode them.
func TestTopologyOf(t *testing.T) {
	preset, levels, err := topologyOf("../../manifests/scheduler-config.yaml")
	require.NoError(t, err)
	want, _ := scheduling.Preset("nvidia")
	require.Equal(t, "nvidia", preset)
	require.Equal(t, want, levels)

	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"+body), 0o600))
		return p
	}
	for _, tc := range []struct {
		name, body string
		wantPreset string
		wantLevels []scheduling.Level
		wantErr    string
	}{
		{
			name: "levels of the first profile that sets them",
			body: `
profiles:
  - schedulerName: other
  - schedulerName: gpu-gang
    pluginConfig:
      - name: ` + config.CoschedulingPluginName + `
        args:
          topologyLevels: [example.com/rack, example.com/row]
  - schedulerName: third
    pluginConfig:
      - name: ` + config.CoschedulingPluginName + `
        args: {topologyPreset: gke}
`,
			wantLevels: []scheduling.Level{{Key: "example.com/rack", Name: "rack"}, {Key: "example.com/row", Name: "row"}},
		},
		{
			name:       "a preset, with apiVersion and kind on the args",
			body:       "profiles:\n  - pluginConfig:\n      - name: Coscheduling\n        args: {apiVersion: kubescheduler.config.k8s.io/v1, kind: CoschedulingArgs, topologyPreset: aws}\n",
			wantPreset: "aws",
			wantLevels: mustPreset(t, "aws"),
		},
		{
			name:       "no args: the plugin's defaults",
			body:       "profiles:\n  - schedulerName: gpu-gang\n",
			wantPreset: scheduling.DefaultPreset,
			wantLevels: mustPreset(t, scheduling.DefaultPreset),
		},
		{
			name:    "an unknown preset fails as the plugin fails",
			body:    "profiles:\n  - pluginConfig:\n      - name: Coscheduling\n        args: {topologyPreset: nvidiaa}\n",
			wantErr: `pluginConfig[Coscheduling].args.topologyPreset: Unsupported value: "nvidiaa"`,
		},
		{
			name:    "a misspelt args field fails as the plugin fails",
			body:    "profiles:\n  - pluginConfig:\n      - name: Coscheduling\n        args: {topologyPresets: nvidia}\n",
			wantErr: `unknown field "topologyPresets"`,
		},
		{
			name:    "a misspelt configuration field fails as kube-scheduler fails",
			body:    "profile:\n  - schedulerName: gpu-gang\n",
			wantErr: `unknown field "profile"`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			preset, levels, err := topologyOf(write(strings.ReplaceAll(tc.name, " ", "-")+".yaml", tc.body))
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantPreset, preset)
			require.Equal(t, tc.wantLevels, levels)
		})
	}

	// A file that is not a KubeSchedulerConfiguration at all.
	plain := filepath.Join(dir, "plain.yaml")
	require.NoError(t, os.WriteFile(plain, []byte("profiles: []\n"), 0o600))
	_, _, err = topologyOf(plain)
	require.ErrorContains(t, err, plain)
}

func mustPreset(t *testing.T, name string) []scheduling.Level {
	t.Helper()
	levels, ok := scheduling.Preset(name)
	require.True(t, ok, name)
	return levels
}

// --heap-profile reaches the scheduler process: its command carries the
// profile's path prefix in --out, which the process takes off its
// arguments before kube-scheduler's flags; without the flag neither does.
func TestHeapProfileWiring(t *testing.T) {
	o := &options{out: "out/s11", childProfile: "gpu-gang", heapProfile: true}
	cmd := schedulerCommandLine("/bin/sim", o)
	require.Equal(t, []string{"/bin/sim", schedulerCommand, "--heap-profile-prefix=out/s11/gpu-gang-scheduler"}, cmd)
	// As StartSchedulerProcess runs it: the command, then its flags.
	prefix, rest := splitSchedulerArgs(append(cmd[1:], "--config=c.yaml", "--secure-port=0")[1:])
	require.Equal(t, "out/s11/gpu-gang-scheduler", prefix)
	require.Equal(t, []string{"--config=c.yaml", "--secure-port=0"}, rest)

	o.heapProfile = false
	cmd = schedulerCommandLine("/bin/sim", o)
	require.Equal(t, []string{"/bin/sim", schedulerCommand}, cmd)
	prefix, rest = splitSchedulerArgs([]string{"--config=c.yaml"})
	require.Empty(t, prefix)
	require.Equal(t, []string{"--config=c.yaml"}, rest)
}
