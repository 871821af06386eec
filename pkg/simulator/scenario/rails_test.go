package scenario

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
)

const withRails = `
name: rails
seed: 12
fabric:
  spines: 1
  leavesPerSpine: 2
  nodesPerLeaf: 4
  gpusPerNode: 8
  gpuSource: dra
  rails: {}
workload:
  gangs:
    - {name: gpus, count: 1, pods: 2, gpusPerPod: 4, gpuRequest: claim}
    - {name: nics, count: 1, pods: 2, gpusPerPod: 2, gpuRequest: claim-with-nics, railAlignment: required}
  jobs:
    - {name: fixed, pods: 2, gpusPerPod: 4, gpuRequest: claim-with-nics, railAlignment: none}
`

func TestParseRailsDefaults(t *testing.T) {
	s, err := Parse([]byte(withRails))
	require.NoError(t, err)
	require.True(t, s.Fabric.HasRails())
	require.Equal(t, &Rails{NICOrder: NICOrderShuffled, Seed: ptr.To[int64](12)}, s.Fabric.Rails, "NICs shuffled from the scenario's seed")

	type claims struct {
		gpus, nics bool
		alignment  string
	}
	got := map[string]claims{}
	for _, j := range Expand(s) {
		got[j.Name] = claims{j.ClaimsGPUs(), j.ClaimsNICs(), j.RailAlignment}
	}
	require.Equal(t, map[string]claims{
		"gpus-0": {gpus: true},
		"nics-0": {gpus: true, nics: true, alignment: RailAlignmentRequired},
		"fixed":  {gpus: true, nics: true, alignment: RailAlignmentNone},
	}, got)
}

func TestValidateRails(t *testing.T) {
	for name, tc := range map[string]struct{ from, to, want string }{
		"rails need DRA nodes": {"gpuSource: dra", "gpuSource: device-plugin", "fabric.rails: Invalid value"},
		"NICs need rails":      {"  rails: {}\n", "", "no node publishes dra.net NICs"},
		"NIC order":            {"rails: {}", "rails: {nicOrder: byName}", `fabric.rails.nicOrder: Unsupported value: "byName"`},
		"rail alignment":       {"railAlignment: required", "railAlignment: always", `workload.gangs[1].railAlignment: Unsupported value: "always"`},
		"job rail alignment":   {"railAlignment: none", "railAlignment: never", `workload.jobs[0].railAlignment: Unsupported value: "never"`},
		"at most 64 rails":     {"gpusPerNode: 8", "gpusPerNode: 72", "fabric.gpusPerNode: Invalid value: 72"},
	} {
		t.Run(name, func(t *testing.T) {
			yaml := strings.Replace(withRails, tc.from, tc.to, 1)
			require.NotEqual(t, withRails, yaml)
			_, err := Parse([]byte(yaml))
			require.ErrorContains(t, err, tc.want)
		})
	}
}
