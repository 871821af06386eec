package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

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
// configured with.
func TestTopologyOf(t *testing.T) {
	preset, levels, err := topologyOf("../../manifests/scheduler-config.yaml")
	require.NoError(t, err)
	want, _ := scheduling.Preset("nvidia")
	require.Equal(t, "nvidia", preset)
	require.Equal(t, want, levels)

	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	explicit := write("levels.yaml", `
profiles:
  - schedulerName: gpu-gang
    pluginConfig:
      - name: Coscheduling
        args:
          topologyLevels: [example.com/rack, example.com/row]
`)
	_, levels, err = topologyOf(explicit)
	require.NoError(t, err)
	require.Equal(t, []scheduling.Level{{Key: "example.com/rack", Name: "rack"}, {Key: "example.com/row", Name: "row"}}, levels)

	bad := write("bad.yaml", `
profiles:
  - pluginConfig:
      - name: Coscheduling
        args: {topologyPreset: nvidiaa}
`)
	_, _, err = topologyOf(bad)
	require.ErrorContains(t, err, `unknown topology preset "nvidiaa"`)
}
