package topology

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// TestTreeDomains checks the exported view of a tree against the node
// labels it was built from, with the nodes shuffled so that depth-first
// positions and request indices differ.
func TestTreeDomains(t *testing.T) {
	nodes := makeFabric().withSpines(2).withLeavesPerSpine(2).withNodesPerLeaf(4).withCliqueSize(2).obj()
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	tr, err := BuildTree(nvidiaLevels(), nodes, 1)
	require.NoError(t, err)

	require.Equal(t, 5, tr.NumLevels())
	require.Equal(t, scheduling.HostnameKey, tr.LevelAt(0).Key)
	require.Equal(t, "leaf", tr.LevelAt(2).Name)
	require.Equal(t, scheduling.Level{Name: "cluster"}, tr.LevelAt(4))
	for l, key := range []string{scheduling.HostnameKey, cliqueKey, leafKey, spineKey} {
		got, err := tr.LevelIndex(key)
		require.NoError(t, err)
		require.Equal(t, l, got)
	}
	_, err = tr.LevelIndex("example.com/rack")
	require.ErrorIs(t, err, ErrUnknownLevel)

	wantCount := []int{16, 8, 4, 2, 1}
	for l, n := range wantCount {
		require.Equal(t, n, tr.NumDomainsAt(l), "domains of level %d", l)
	}

	// Positions and indices are inverse maps.
	for i := range nodes {
		require.Equal(t, i, tr.NodeAt(tr.PositionOf(i)))
	}
	// Each domain is a contiguous range whose nodes share its labels, and
	// DomainAt maps each of its positions back to it.
	keyOf := map[int]string{1: cliqueKey, 2: leafKey, 3: spineKey}
	for l := range tr.NumLevels() {
		covered := 0
		for k := range tr.NumDomainsAt(l) {
			lo, hi := tr.DomainRange(l, k)
			require.Less(t, lo, hi)
			require.Equal(t, covered, lo, "level %d domains tile the positions in order", l)
			covered = hi
			first := nodes[tr.NodeAt(lo)]
			for p := lo; p < hi; p++ {
				require.Equal(t, k, tr.DomainAt(l, p))
				if key, ok := keyOf[l]; ok {
					require.Equal(t, first.Labels[key], nodes[tr.NodeAt(p)].Labels[key])
				}
			}
			switch l {
			case 0:
				require.Equal(t, first.Name, tr.DomainName(l, k))
			case 4:
				require.Equal(t, "the cluster", tr.DomainName(l, k))
				require.Empty(t, tr.DomainPath(l, k))
			default:
				require.Equal(t, first.Labels[keyOf[l]], tr.DomainName(l, k))
				path := tr.DomainPath(l, k)
				require.Len(t, path, 4-l)
				require.Equal(t, PathElem{Key: keyOf[l], Value: first.Labels[keyOf[l]]}, path[len(path)-1])
			}
		}
		require.Equal(t, len(nodes), covered)
	}

	require.True(t, tr.BuiltFrom(nodes))
	other := append([]placement.Node(nil), nodes...)
	other[0], other[1] = other[1], other[0]
	require.False(t, tr.BuiltFrom(other))
}

func TestFitCount(t *testing.T) {
	free := placement.Vector{16000, 8}
	require.Equal(t, int64(2), FitCount(placement.Vector{1000, 4}, free, 10))
	require.Equal(t, int64(1), FitCount(placement.Vector{1000, 4}, free, 1))
	require.Equal(t, int64(0), FitCount(placement.Vector{1000, 9}, free, 10))
	require.Equal(t, int64(10), FitCount(placement.Vector{0, 0}, free, 10))
}

// TestHomesMatchesPlanner checks Tree.Homes against the planner's own
// choice of home domains on random anchors.
func TestHomesMatchesPlanner(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	nodes := makeFabric().withSpines(3).withLeavesPerSpine(3).withNodesPerLeaf(4).withCliqueSize(2).obj()
	tr, err := BuildTree(nvidiaLevels(), nodes, 1)
	require.NoError(t, err)
	for range 200 {
		anchors := make([]int, 1+rng.IntN(6))
		for i := range anchors {
			anchors[i] = rng.IntN(len(nodes))
		}
		req := makeRequest("ns/gang").nodeObjs(nodes).workers(1, 8).obj()
		req.Anchors = anchors
		u, err := newUsage(tr, req)
		require.NoError(t, err)
		want := u.homes()
		got := tr.Homes(anchors)
		require.Len(t, got, len(want))
		for l := range want {
			require.Equal(t, int(want[l]), got[l], "level %d, anchors %v", l, anchors)
		}
	}
}
