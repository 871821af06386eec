package placementtest

import (
	"fmt"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Resources are the dimensions of the nodes MakeFabric builds: cpu in
// millicores, then GPUs.
var Resources = []string{"cpu", "nvidia.com/gpu"}

// FabricWrapper builds a regular cluster with chained setters: spines of
// leaves of nodes, cliques of consecutive nodes in a leaf, labelled with the
// default preset's labels (scheduling.DefaultPreset). Each node has 64
// cores and 8 GPUs, all free.
type FabricWrapper struct {
	spines, leaves, nodes, clique int
}

// MakeFabric starts a fabric of one spine, one leaf and one node per leaf,
// each node a clique of its own.
func MakeFabric() *FabricWrapper { return &FabricWrapper{spines: 1, leaves: 1, nodes: 1, clique: 1} }

// Spines sets the number of spines.
func (f *FabricWrapper) Spines(n int) *FabricWrapper { f.spines = n; return f }

// LeavesPerSpine sets the number of leaves under each spine.
func (f *FabricWrapper) LeavesPerSpine(n int) *FabricWrapper { f.leaves = n; return f }

// NodesPerLeaf sets the number of nodes under each leaf.
func (f *FabricWrapper) NodesPerLeaf(n int) *FabricWrapper { f.nodes = n; return f }

// CliqueSize sets how many consecutive nodes of a leaf share an NVLink
// clique.
func (f *FabricWrapper) CliqueSize(n int) *FabricWrapper { f.clique = n; return f }

// Obj returns the nodes, spine by spine and leaf by leaf: spine s<i>, leaf
// s<i>-l<j>, clique s<i>-l<j>-c<k> and node s<i>-l<j>-n<m>. Every call
// returns fresh nodes.
func (f *FabricWrapper) Obj() []placement.Node {
	var out []placement.Node
	for s := range f.spines {
		for l := range f.leaves {
			leaf := fmt.Sprintf("s%d-l%d", s, l)
			for n := range f.nodes {
				out = append(out, placement.Node{
					Name: fmt.Sprintf("%s-n%d", leaf, n),
					Labels: map[string]string{
						scheduling.LabelSpine:     fmt.Sprintf("s%d", s),
						scheduling.LabelLeaf:      leaf,
						scheduling.LabelGPUClique: fmt.Sprintf("%s-c%d", leaf, n/f.clique),
					},
					Allocatable: placement.Vector{64000, 8},
					Free:        placement.Vector{64000, 8},
				})
			}
		}
	}
	return out
}
