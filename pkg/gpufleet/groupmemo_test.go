package gpufleet

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/fleet"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// TestGroupingsFollowNodeChanges changes random nodes, a few at a time, as
// the scheduler does (a new labels map, with the same labels or others;
// nodes that come and go; other policies in between), and checks after
// each step that the memo's groups are those made from scratch. A memo that
// misses a changed node, or keeps groups when a key moved, fails. Every
// step's nodes come with a labels epoch of their own, asked twice: the
// second time from the memo alone.
func TestGroupingsFollowNodeChanges(t *testing.T) {
	opts := fleet.DefaultOptions()
	policies := []fleet.Requirements{
		requirements(t, nil), // one product, driver major.minor and capacity type
		requirements(t, map[string]string{scheduling.AnnotationUniform: scheduling.LabelGPUProduct, scheduling.AnnotationCapacityType: scheduling.CapacityTypeAny}),
	}
	randomLabels := func(r *rand.Rand) map[string]string {
		l := gfd([]string{h100, a100}[r.IntN(2)], []string{"550.54.15", "535.104.05", "550.90.07"}[r.IntN(3)], "12.4", "9.0")
		if r.IntN(4) == 0 {
			l[scheduling.LabelKarpenterCapacityType] = "spot"
		}
		return l
	}
	for seed := range uint64(20) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 1))
			cache := newNodeCache(&opts, nil)
			memo := newGroupings()
			nodes := make([]placement.Node, 40+r.IntN(40))
			for i := range nodes {
				nodes[i] = placement.Node{Name: fmt.Sprintf("n%03d", i), Labels: randomLabels(r)}
			}
			for step := range 200 {
				switch op := r.IntN(10); {
				case op < 5: // a node gets other labels
					i := r.IntN(len(nodes))
					nodes[i].Labels = randomLabels(r)
				case op < 8: // a node object is replaced, same labels
					i := r.IntN(len(nodes))
					nodes[i].Labels = maps.Clone(nodes[i].Labels)
				case op < 9 && len(nodes) > 2: // a node goes
					i := r.IntN(len(nodes))
					cache.forget(nodes[i].Name)
					nodes = append(nodes[:i:i], nodes[i+1:]...)
				default: // a node comes, at the end (names stay sorted)
					nodes = append(nodes, placement.Node{Name: fmt.Sprintf("m%03d", step), Labels: randomLabels(r)})
				}
				nodes = append([]placement.Node(nil), nodes...) // the caller builds a new slice each plan
				req := policies[r.IntN(len(policies))]
				epoch := uint64(step + 1)
				want := (&cycleState{req: req, nodes: newNodeCache(&opts, nil), groupings: newGroupings()}).NodeGroups(nodes, 0)
				for range 2 {
					got := (&cycleState{req: req, nodes: cache, groupings: memo}).NodeGroups(nodes, epoch)
					require.Empty(t, cmp.Diff(want, got), "step %d: groups from the memo differ from scratch (-want,+got)", step)
				}
			}
		})
	}
}

// TestGroupingsShareNothingWritable checks that a caller that replaces a
// field of the groups it got does not change what the next caller gets.
func TestGroupingsShareNothingWritable(t *testing.T) {
	opts := fleet.DefaultOptions()
	nodes := []placement.Node{
		{Name: "a", Labels: gfd(h100, "550.54.15", "12.4", "9.0")},
		{Name: "b", Labels: gfd(a100, "550.54.15", "12.4", "8.0")},
	}
	s := &cycleState{req: requirements(t, nil), nodes: newNodeCache(&opts, nil), groupings: newGroupings()}
	first := s.NodeGroups(nodes, 0)
	require.NotNil(t, first)
	first.Rule = "changed by a caller"
	require.NotEqual(t, first.Rule, s.NodeGroups(nodes, 0).Rule)
}

// requirements parses a gang's annotations.
func requirements(t *testing.T, annotations map[string]string) fleet.Requirements {
	t.Helper()
	r, err := fleet.ParseRequirements(annotations, nil)
	require.NoError(t, err)
	return r
}
