package scheduling

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

func TestResolveLevels(t *testing.T) {
	tests := []struct {
		name    string
		preset  string
		keys    []string
		want    []string // keys, tightest first
		wantErr []string // substrings the error must hold
	}{
		{name: "default preset", preset: DefaultPreset, want: []string{LabelGPUClique, LabelLeaf, LabelSpine}},
		{name: "nvlink", preset: "nvlink", want: []string{"nvidia.com/gpu.clique"}},
		{name: "topograph", preset: "topograph", want: []string{
			"network.topology.nvidia.com/accelerator", "network.topology.nvidia.com/leaf",
			"network.topology.nvidia.com/spine", "network.topology.nvidia.com/core"}},
		{name: "topograph-v2", preset: "topograph-v2", want: []string{
			"accelerator.topograph.run/domain", "fabric.topograph.run/tier-1",
			"fabric.topograph.run/tier-2", "fabric.topograph.run/tier-3"}},
		{name: "aws", preset: "aws", want: []string{
			"topology.k8s.aws/network-node-layer-3", "topology.k8s.aws/network-node-layer-2",
			"topology.k8s.aws/network-node-layer-1"}},
		{name: "gke", preset: "gke", want: []string{
			"cloud.google.com/gce-topology-host", "cloud.google.com/gce-topology-subblock",
			"cloud.google.com/gce-topology-block"}},
		{name: "coreweave", preset: "coreweave", want: []string{
			"ds.coreweave.com/nvlink.domain", "ib.coreweave.cloud/leafgroup", "ib.coreweave.cloud/superpod"}},
		{name: "explicit list", keys: []string{"example.com/rack", "zone"}, want: []string{"example.com/rack", "zone"}},
		{name: "unknown preset", preset: "nvidai", wantErr: []string{`unknown topology preset "nvidai"`, "nvidia, nvlink"}},
		{name: "both", preset: "aws", keys: []string{"a"}, wantErr: []string{"both set"}},
		{name: "neither", wantErr: []string{"no topology levels"}},
		{name: "empty key", keys: []string{"a", ""}, wantErr: []string{"levels[1]: label key is empty"}},
		{name: "duplicate", keys: []string{"a", "b", "a"}, wantErr: []string{`levels[2] "a": duplicate of levels[0]`}},
		{name: "hostname listed", keys: []string{HostnameKey}, wantErr: []string{`levels[0] "kubernetes.io/hostname": the node level is implicit`}},
		{name: "bad syntax", keys: []string{"ok", "Bad_Prefix.com/x", "x/", "a b"}, wantErr: []string{
			`levels[1] "Bad_Prefix.com/x": prefix`, `levels[2] "x/": name part must be non-empty`, `levels[3] "a b": name part`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			levels, err := ResolveLevels(tc.preset, tc.keys)
			if len(tc.wantErr) > 0 {
				require.Error(t, err)
				for _, s := range tc.wantErr {
					require.ErrorContains(t, err, s)
				}
				return
			}
			require.NoError(t, err)
			var got []string
			for _, lv := range levels {
				got = append(got, lv.Key)
				require.NotEmpty(t, lv.Name, "level %s has no name", lv.Key)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("keys (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestResolveLevelsNamesExplicitKeys(t *testing.T) {
	levels, err := ResolveLevels("", []string{"example.com/leaf", "rack"})
	require.NoError(t, err)
	want := []Level{{Key: "example.com/leaf", Name: "leaf"}, {Key: "rack", Name: "rack"}}
	if diff := cmp.Diff(want, levels); diff != "" {
		t.Errorf("levels (-want,+got):\n%s", diff)
	}
}

func TestPresetReturnsCopy(t *testing.T) {
	a, ok := Preset(DefaultPreset)
	require.True(t, ok)
	a[0].Key = "changed"
	b, _ := Preset(DefaultPreset)
	require.Equal(t, LabelGPUClique, b[0].Key)
}

func TestPresetNames(t *testing.T) {
	want := []string{"aws", "coreweave", "gke", "nvidia", "nvlink", "topograph", "topograph-v2"}
	if diff := cmp.Diff(want, PresetNames()); diff != "" {
		t.Errorf("presets (-want,+got):\n%s", diff)
	}
	for _, name := range PresetNames() {
		levels, _ := Preset(name)
		require.NoError(t, ValidateLevels(levels), "preset %s", name)
	}
}

func TestValidateLevelsAllowsNone(t *testing.T) {
	require.NoError(t, ValidateLevels(nil))
}

func TestLevelRank(t *testing.T) {
	levels, ok := Preset(DefaultPreset)
	require.True(t, ok)
	for key, want := range map[string]int{HostnameKey: 0, LabelGPUClique: 1, LabelLeaf: 2, LabelSpine: 3} {
		got, err := LevelRank(levels, key)
		require.NoError(t, err, key)
		require.Equal(t, want, got, key)
	}
	_, err := LevelRank(levels, "example.com/rack")
	require.EqualError(t, err, `unknown topology level "example.com/rack"; this scheduler knows `+
		LabelSpine+", "+LabelLeaf+", "+LabelGPUClique+", "+HostnameKey)
	require.ErrorIs(t, err, ErrUnknownLevel)
	got, err := LevelRank(nil, HostnameKey)
	require.NoError(t, err, "the node level is there without levels")
	require.Zero(t, got)
}

// TestRailUnit checks the rails' scalable unit: the level named, else the
// leaf, else the second-tightest level, else the only one, else none.
func TestRailUnit(t *testing.T) {
	for _, tc := range []struct {
		name, preset, key, want, wantErr string
		keys                             []string
	}{
		{name: "default preset: the leaf", preset: DefaultPreset, want: LabelLeaf},
		{name: "topograph: the leaf", preset: "topograph", want: LabelLeaf},
		{name: "coreweave: the leaf group", preset: "coreweave", want: "ib.coreweave.cloud/leafgroup"},
		{name: "one level", preset: "nvlink", want: LabelGPUClique},
		{name: "named", preset: DefaultPreset, key: LabelSpine, want: LabelSpine},
		{name: "explicit levels", keys: []string{"example.com/host", "example.com/rack", "example.com/row"}, want: "example.com/rack"},
		{name: "unknown", preset: DefaultPreset, key: "example.com/rack", wantErr: `unknown topology level "example.com/rack"`},
		{name: "the node", preset: DefaultPreset, key: HostnameKey, wantErr: "unknown topology level"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			levels, err := ResolveLevels(tc.preset, tc.keys)
			if err != nil {
				t.Fatal(err)
			}
			got, err := RailUnit(levels, tc.key)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrUnknownLevel) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got.Key != tc.want {
				t.Fatalf("RailUnit = %q, %v; want %q", got.Key, err, tc.want)
			}
		})
	}
	if got, err := RailUnit(nil, ""); err != nil || got.Key != "" {
		t.Fatalf("no levels: %+v, %v; want no unit", got, err)
	}
}
