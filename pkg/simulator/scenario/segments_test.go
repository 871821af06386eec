package scenario

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// segmented is a scenario with one gang class and one job, both in
// segments; tests edit its text.
const segmented = `
name: seg
fabric: {spines: 1, leavesPerSpine: 2, nodesPerLeaf: 4, gpusPerNode: 8, cliqueSize: 2}
workload:
  gangs:
    - name: g
      count: 2
      pods: {choices: [4, 8]}
      gpusPerPod: 4
      topology: {level: leaf, required: true}
      segments: {size: 4, level: clique}
  jobs:
    - {name: e, pods: 12, gpusPerPod: 4, topology: {level: spine}, segments: {size: 4, level: clique, minCount: 2}}
`

func TestSegments(t *testing.T) {
	s, err := Parse([]byte(segmented))
	require.NoError(t, err)
	jobs := Expand(s)
	require.Len(t, jobs, 3)
	for _, j := range jobs {
		require.NotNil(t, j.Segments, j.Name)
		switch j.Name {
		case "e":
			require.Equal(t, 3, j.Segments.Count(j.Pods))
			require.Equal(t, 8, j.Quorum(), "two whole segments of 4")
			require.Equal(t, 2, j.SegmentOf(11))
		default:
			require.Equal(t, j.Pods, j.Quorum(), "every segment by default")
			require.Equal(t, 1, j.SegmentOf(4))
		}
	}
	require.Equal(t, 4, (&Job{Pods: 4}).Quorum(), "a gang without segments needs every member")
}

func TestSegmentErrors(t *testing.T) {
	tests := []struct {
		name, from, to string
		want           []string
	}{
		{"size does not divide a drawn count", "choices: [4, 8]", "choices: [4, 6]", []string{"workload.gangs[0].segments.size", "does not divide the gang's 6 members"}},
		{"looser than the gang", "segments: {size: 4, level: clique}", "segments: {size: 4, level: spine}", []string{"workload.gangs[0].segments.level", "looser than the gang's level leaf"}},
		{"unknown level", "segments: {size: 4, level: clique}", "segments: {size: 4, level: rack}", []string{"workload.gangs[0].segments.level", `"rack"`}},
		{"no size", "segments: {size: 4, level: clique}", "segments: {level: clique}", []string{"workload.gangs[0].segments.size", "must be at least 1"}},
		{"minimum above the segments", "minCount: 2", "minCount: 4", []string{"workload.jobs[0].segments.minCount", "between 1 and the 3 segments"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text := replaceOnce(t, segmented, tc.from, tc.to)
			_, err := Parse([]byte(text))
			require.Error(t, err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func replaceOnce(t *testing.T, s, from, to string) string {
	t.Helper()
	i := strings.Index(s, from)
	require.GreaterOrEqual(t, i, 0, "%q not in the scenario", from)
	return s[:i] + to + s[i+len(from):]
}
