package placement

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSameLabels says "same" only for one node name and one non-zero
// version: zero is an unknown version, which must be read again.
func TestSameLabels(t *testing.T) {
	n := Node{Name: "node-7", LabelsVersion: 3}
	for _, tc := range []struct {
		name    string
		version uint64
		want    bool
	}{{"node-7", 3, true}, {"node-7", 4, false}, {"node-8", 3, false}, {"node-7", 0, false}} {
		if got := n.SameLabels(tc.name, tc.version); got != tc.want {
			t.Errorf("SameLabels(%q, %d) = %v, want %v", tc.name, tc.version, got, tc.want)
		}
	}
	require.False(t, (&Node{Name: "a"}).SameLabels("a", 0), "an unknown version is never the same")
}

// TestFitsRuleAgrees checks that FitsIn and FitCount are one rule: a
// request fits once exactly when at least one copy is counted, including
// dimensions it does not ask for and overcommitted ones.
func TestFitsRuleAgrees(t *testing.T) {
	values := []int64{-2, 0, 1, 3}
	for _, r0 := range values {
		for _, r1 := range values {
			for _, f0 := range values {
				for _, f1 := range values {
					req, free := Vector{r0, r1}, Vector{f0, f1}
					require.Equal(t, req.FitsIn(free), FitCount(req, free, 1) == 1, "request %v in %v", req, free)
				}
			}
		}
	}
	require.True(t, Vector{0, 2}.FitsIn(Vector{-1, 2}), "a dimension not asked for never stands in the way")
	require.False(t, Vector{1, 2}.FitsIn(Vector{1, 1}))
	require.Equal(t, int64(2), FitCount(Vector{1, 2}, Vector{5, 4}, 8))
}
