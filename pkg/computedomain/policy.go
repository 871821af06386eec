package computedomain

import (
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// CliqueLevel is the level a ComputeDomain's gang must sit inside.
const CliqueLevel = scheduling.LabelGPUClique

// OneCliqueOnly says whether p keeps a gang inside one clique: a required
// level no looser than the clique. With a looser required level, it
// returns that level, which a spanning gang stays inside one domain of.
func OneCliqueOnly(p placement.Policy, levels []scheduling.Level) (bool, string) {
	if !p.Required {
		return false, ""
	}
	clique, err1 := scheduling.LevelRank(levels, CliqueLevel)
	own, err2 := scheduling.LevelRank(levels, p.Level)
	if err1 != nil || err2 != nil {
		// An unknown level is reported when the gang is planned.
		return false, ""
	}
	if own <= clique {
		return true, ""
	}
	return false, p.Level
}

// WithinClique tightens p to the clique level unless it already requires
// a level no looser than the clique.
func WithinClique(p placement.Policy, levels []scheduling.Level) placement.Policy {
	if p.Required {
		clique, err1 := scheduling.LevelRank(levels, CliqueLevel)
		own, err2 := scheduling.LevelRank(levels, p.Level)
		if err1 == nil && err2 == nil && own <= clique {
			return p
		}
	}
	return placement.Policy{Level: CliqueLevel, Required: true}
}

// LargestClique returns how many nodes the largest clique has, and how
// many cliques there are; nodes without the clique label are in none.
func LargestClique(nodes []placement.Node) (largest, cliques int) {
	count := map[string]int{}
	for _, n := range nodes {
		if c := n.Labels[CliqueLevel]; c != "" {
			count[c]++
		}
	}
	for _, n := range count {
		largest = max(largest, n)
	}
	return largest, len(count)
}

// CliqueRoom counts how many of the members ms (in rank order) a first fit
// places on nodes (indices into req.Nodes), each node's free capacity
// (whole: its allocatable) and each kind's cap per node respected; kind
// gives each member's kind. It reads req and writes nothing of it.
func CliqueRoom(req *placement.Request, nodes []int, ms []int, kind map[int]int, whole bool) int {
	free := make([]placement.Vector, len(nodes))
	for j, i := range nodes {
		if whole {
			free[j] = req.Nodes[i].Allocatable.Clone()
		} else {
			free[j] = req.Nodes[i].Free.Clone()
		}
	}
	type perNode struct{ node, kind int }
	count := map[perNode]int{}
	placed := 0
	for _, m := range ms {
		member := &req.Members[m]
		for j, i := range nodes {
			key := perNode{j, kind[m]}
			if !member.EligibleOn(i) || !member.Request.FitsIn(free[j]) || member.MaxPerNode > 0 && count[key] >= member.MaxPerNode {
				continue
			}
			free[j].Sub(member.Request)
			count[key]++
			placed++
			break
		}
	}
	return placed
}
