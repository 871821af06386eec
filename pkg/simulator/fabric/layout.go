// Package fabric builds the simulated GPU fabric: node objects labelled with
// a topology preset, the pods that pre-fill it, and the Layout that metrics
// and the report use to count leaves and cliques.
package fabric

import (
	"fmt"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

// Tier indices into Layout.TierKeys and NodeInfo.Domain.
const (
	Clique = iota
	Leaf
	Spine
	numTiers
)

// Layout is the fabric's shape: every node with its clique, leaf and spine.
// It is built once per run and only read afterwards.
type Layout struct {
	// Spec is what the layout was built from; for a layout of real nodes
	// (FromNodes) only Preset is set.
	Spec scenario.Fabric
	// Spines counts the spine domains.
	Spines int
	// Levels are the preset's topology levels, tightest first.
	Levels []scheduling.Level
	// TierKeys[t] is the label key that names tier t's domains, or "" when
	// the preset has no level for the tier.
	TierKeys [numTiers]string
	// Nodes are in fabric order: spine, then leaf, then node.
	Nodes []NodeInfo
	// Leaves[i] and Cliques[i] list node indices; Cliques is empty when
	// the fabric has no cliques.
	Leaves  [][]int
	Cliques [][]int
}

// NodeInfo is one node of the fabric.
type NodeInfo struct {
	// Name is the node's name, such as "s0-l1-n03".
	Name string
	// Domain[t] is the index of the node's domain at tier t in Leaves,
	// Cliques or among spines; -1 for a clique when there are none.
	Domain [numTiers]int
	// Labels are the node's labels: hostname, the preset's levels, and
	// the fleet's GPU labels when the fabric has a fleet.
	Labels map[string]string
	// LeafName names the node's leaf for people: "s0-l1", or the leaf
	// label's value.
	LeafName string
	// GPUs is the node's GPU capacity: gpusPerNode, times the replicas on
	// a node that shares its GPUs; for a real node, its allocatable. A
	// device-plugin node advertises them as nvidia.com/gpu, a DRA node
	// publishes them as the devices of its ResourceSlice.
	GPUs int
	// DRA is set on a node that publishes its GPUs through NVIDIA's DRA
	// driver (one ResourceSlice, see Layout.ResourceSlice) and advertises
	// no nvidia.com/gpu.
	DRA bool
	// Hardware is what the fleet drew for the node's GPUs and driver,
	// whichever labels it wrote for them; a DRA node's devices carry it as
	// attributes.
	Hardware Hardware
	// NICs are the RDMA NICs of a DRA node of a rail-optimized fabric, one
	// per GPU, in the order its NIC slice lists them (Layout.NICSlice);
	// empty for other nodes.
	NICs []NIC
}

// Hardware describes a node's GPUs and driver. Empty fields were not drawn:
// the scenario's fleet sets no products or no drivers.
type Hardware struct {
	// Product is the GPU model as GPU feature discovery writes it
	// (nvidia.com/gpu.product, without the -SHARED suffix), such as
	// NVIDIA-H100-80GB-HBM3.
	Product string
	// Compute is the compute capability, such as "9.0".
	Compute string
	// Driver is the driver version, such as "550.54.15"; CUDA the highest
	// CUDA version it supports, such as "12.4".
	Driver, CUDA string
}

// NewLayout builds the layout of a validated fabric.
func NewLayout(f scenario.Fabric) (*Layout, error) {
	levels, ok := scheduling.Preset(f.Preset)
	if !ok {
		return nil, fmt.Errorf("unknown topology preset %q", f.Preset)
	}
	l := &Layout{Spec: f, Levels: levels, Spines: f.Spines}
	// The preset's levels, tightest first, take the tiers in order; levels
	// beyond the three tiers hold the whole fabric in one domain.
	for t := range numTiers {
		if t < len(levels) {
			l.TierKeys[t] = levels[t].Key
		}
	}
	if f.CliqueSize == 0 {
		l.TierKeys[Clique] = ""
	}
	nodeWidth := len(fmt.Sprint(f.NodesPerLeaf - 1))
	for s := range f.Spines {
		for lf := range f.LeavesPerSpine {
			leafName := fmt.Sprintf("s%d-l%d", s, lf)
			leaf := len(l.Leaves)
			l.Leaves = append(l.Leaves, nil)
			for n := range f.NodesPerLeaf {
				name := fmt.Sprintf("%s-n%0*d", leafName, nodeWidth, n)
				info := NodeInfo{Name: name, GPUs: f.GPUsPerNode, Domain: [numTiers]int{-1, leaf, s}, LeafName: leafName}
				info.Labels = map[string]string{scheduling.HostnameKey: name}
				if f.CliqueSize > 0 {
					if n%f.CliqueSize == 0 {
						l.Cliques = append(l.Cliques, nil)
					}
					info.Domain[Clique] = len(l.Cliques) - 1
					l.Cliques[info.Domain[Clique]] = append(l.Cliques[info.Domain[Clique]], len(l.Nodes))
				}
				values := [numTiers]string{fmt.Sprintf("%s-c%d", leafName, n/max(f.CliqueSize, 1)), leafName, fmt.Sprintf("s%d", s)}
				for t := range numTiers {
					if l.TierKeys[t] != "" {
						info.Labels[l.TierKeys[t]] = values[t]
					}
				}
				for _, lv := range levels[min(len(levels), numTiers):] {
					info.Labels[lv.Key] = "all"
				}
				l.Leaves[leaf] = append(l.Leaves[leaf], len(l.Nodes))
				l.Nodes = append(l.Nodes, info)
			}
		}
	}
	if f.Fleet != nil {
		l.labelFleet(f.Fleet)
	}
	l.pickDRANodes()
	l.pickNICs()
	return l, nil
}

// TotalGPUs is the fabric's nvidia.com/gpu capacity.
func (l *Layout) TotalGPUs() int {
	total := 0
	for _, n := range l.Nodes {
		total += n.GPUs
	}
	return total
}

// Index maps node names to indices in Nodes.
func (l *Layout) Index() map[string]int {
	idx := make(map[string]int, len(l.Nodes))
	for i, n := range l.Nodes {
		idx[n.Name] = i
	}
	return idx
}

// FreeWhole counts the domains in groups (Leaves or Cliques) none of whose
// nodes has a GPU in use, given used GPUs per node.
func FreeWhole(groups [][]int, used []int) int {
	free := 0
	for _, g := range groups {
		whole := true
		for _, n := range g {
			if used[n] > 0 {
				whole = false
				break
			}
		}
		if whole {
			free++
		}
	}
	return free
}
