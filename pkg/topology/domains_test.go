package topology

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/placement/placementtest"
)

// TestTreeDomains checks the exported view of a tree against the node
// labels it was built from, with the nodes shuffled so that depth-first
// positions and request indices differ.
func TestTreeDomains(t *testing.T) {
	nodes := placementtest.MakeFabric().Spines(2).LeavesPerSpine(2).NodesPerLeaf(4).CliqueSize(2).Obj()
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

// TestHomes checks the home domains on random anchors: each nests in the
// one above, and no sibling holds more anchors.
func TestHomes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	nodes := placementtest.MakeFabric().Spines(3).LeavesPerSpine(3).NodesPerLeaf(4).CliqueSize(2).Obj()
	tr, err := BuildTree(nvidiaLevels(), nodes, 1)
	require.NoError(t, err)
	for range 200 {
		anchors := make([]int, 1+rng.IntN(6))
		for i := range anchors {
			anchors[i] = rng.IntN(len(nodes))
		}
		home := tr.Homes(anchors)
		require.Len(t, home, tr.top()+1)
		count := func(l int, k int32) int {
			n := 0
			for _, a := range anchors {
				if tr.anc[l][tr.pos[a]] == k {
					n++
				}
			}
			return n
		}
		for l := tr.top() - 1; l >= 0; l-- {
			parent := tr.dom[l+1][home[l+1]]
			k := int32(home[l])
			require.True(t, k >= parent.first && k < parent.end, "level %d: home %d is not a child of the home above", l, k)
			for c := parent.first; c < parent.end; c++ {
				require.LessOrEqual(t, count(l, c), count(l, k), "level %d, anchors %v: sibling %d holds more anchors", l, anchors, c)
			}
		}
	}
}
