package topology

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// jointTestLevels are the nvidia preset's levels, tightest first.
func jointTestLevels(t *testing.T) []scheduling.Level {
	t.Helper()
	levels, ok := scheduling.Preset("nvidia")
	if !ok || len(levels) != 3 {
		t.Fatalf("the nvidia preset has levels %v, want clique, leaf and spine", levels)
	}
	return levels
}

// jointNode is a node of a test fabric: its place, and its free GPUs out of
// 8.
type jointNode struct {
	spine, leaf, clique string
	free                int64
}

func jointRequest(levels []scheduling.Level, nodes []jointNode, gpus []int64) *placement.Request {
	req := &placement.Request{Gang: "ns/g", Resources: []string{"nvidia.com/gpu"}}
	for i, n := range nodes {
		labels := map[string]string{levels[2].Key: n.spine, levels[1].Key: n.leaf}
		if n.clique != "" {
			labels[levels[0].Key] = n.clique
		}
		req.Nodes = append(req.Nodes, placement.Node{
			Name: fmt.Sprintf("n%d", i), Labels: labels,
			Allocatable: placement.Vector{8}, Free: placement.Vector{n.free},
		})
	}
	for i, g := range gpus {
		req.Members = append(req.Members, placement.Member{Name: fmt.Sprintf("ns/m%d", i), Rank: i, Request: placement.Vector{g}, Accelerated: true})
	}
	return req
}

// jointBruteForce tries every assignment of members to nodes that fits and
// returns the least spans, [spine, leaf, clique, node] compared in that
// order, or nil when none fits. Domains are told apart by label tuples
// here, independently of Tree.
func jointBruteForce(nodes []jointNode, gpus []int64) []int {
	var best []int
	free := make([]int64, len(nodes))
	for i, n := range nodes {
		free[i] = n.free
	}
	nodeOf := make([]int, len(gpus))
	var try func(m int)
	try = func(m int) {
		if m == len(gpus) {
			spines, leaves, cliques, used := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[int]bool{}
			for _, n := range nodeOf {
				nd := nodes[n]
				spines[nd.spine] = true
				leaves[nd.spine+"/"+nd.leaf] = true
				// A node with no clique label is a clique of its own.
				clique := nd.spine + "/" + nd.leaf + "/" + nd.clique
				if nd.clique == "" {
					clique = fmt.Sprint("node ", n)
				}
				cliques[clique] = true
				used[n] = true
			}
			spans := []int{len(spines), len(leaves), len(cliques), len(used)}
			if best == nil || jointLexLess(spans, best) {
				best = spans
			}
			return
		}
		for n := range nodes {
			if free[n] >= gpus[m] {
				free[n] -= gpus[m]
				nodeOf[m] = n
				try(m + 1)
				free[n] += gpus[m]
			}
		}
	}
	try(0)
	return best
}

func jointLexLess(a, b []int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

func jointSpanList(spans []LevelSpan) []int {
	out := make([]int, len(spans))
	for i, s := range spans {
		out[i] = s.Domains
	}
	return out
}

// randomJointFabric draws 1-2 spines of 1-3 leaves of 1-2 nodes, cliques
// drawn from two per leaf (some nodes unlabelled), and free GPUs per node.
// Leaf and clique values repeat under different parents.
func randomJointFabric(rng *rand.Rand) []jointNode {
	var nodes []jointNode
	for s := range 1 + rng.IntN(2) {
		for l := range 1 + rng.IntN(3) {
			for range 1 + rng.IntN(2) {
				clique := fmt.Sprint("c", rng.IntN(2))
				if rng.IntN(5) == 0 {
					clique = ""
				}
				nodes = append(nodes, jointNode{spine: fmt.Sprint("s", s), leaf: fmt.Sprint("l", l), clique: clique, free: int64(rng.IntN(9))})
			}
		}
	}
	return nodes
}

// On every small fabric, the joint bound of a gang of one shape is the
// least span vector of all placements, and that of a gang of two shapes
// compares no higher than it; a gang that fits nowhere is a FitError.
func TestJointLowerBoundMatchesExhaustiveSearch(t *testing.T) {
	levels := jointTestLevels(t)
	rng := rand.New(rand.NewPCG(12, 2026))
	for i := range 300 {
		nodes := randomJointFabric(rng)
		n := 1 + rng.IntN(4)
		gpus := make([]int64, n)
		one := rng.IntN(3) > 0
		for m := range gpus {
			gpus[m] = []int64{1, 2, 4, 8}[rng.IntN(4)]
			if one && m > 0 {
				gpus[m] = gpus[0]
			}
		}
		t.Run(fmt.Sprintf("case-%d", i), func(t *testing.T) {
			req := jointRequest(levels, nodes, gpus)
			tree, err := BuildTree(levels, req.Nodes, 1)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tree.JointLowerBound(req)
			best := jointBruteForce(nodes, gpus)
			singleFits := true
			for _, g := range gpus {
				total := int64(0)
				for _, nd := range nodes {
					total += nd.free / g
				}
				singleFits = singleFits && total >= int64(jointCountOf(gpus, g))
			}
			if !singleFits {
				var fe *placement.FitError
				if !errors.As(err, &fe) {
					t.Fatalf("the cluster cannot hold the gang: error %v, want a FitError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("fabric %+v, gpus %v: %v", nodes, gpus, err)
			}
			if best == nil {
				// Each shape fits alone but not all together: the bound
				// still holds, vacuously.
				return
			}
			if one {
				if diff := cmp.Diff(best, jointSpanList(got)); diff != "" {
					t.Fatalf("[spine leaf clique node] (-exhaustive,+bound), fabric %+v, gpus %v:\n%s", nodes, gpus, diff)
				}
			} else if jointLexLess(best, jointSpanList(got)) {
				t.Fatalf("bound %v beats the optimum %v, fabric %+v, gpus %v", jointSpanList(got), best, nodes, gpus)
			}
		})
	}
}

func jointCountOf(gpus []int64, g int64) int {
	n := 0
	for _, x := range gpus {
		if x == g {
			n++
		}
	}
	return n
}

// The case that per-level bounds get wrong: eight one-node members fit in
// three leaves only across both spines, while one spine needs four leaves.
// LowerBound says one spine and three leaves, which no placement meets
// together; the joint bound says one spine and four leaves.
func TestJointLowerBoundCrossingSpines(t *testing.T) {
	levels := jointTestLevels(t)
	var nodes []jointNode
	for l, free := range []int{2, 2, 2, 2} {
		for n := range free {
			nodes = append(nodes, jointNode{spine: "s0", leaf: fmt.Sprint("l", l), clique: fmt.Sprint("c", n), free: 8})
		}
	}
	for l, free := range []int{3, 3} {
		for n := range free {
			nodes = append(nodes, jointNode{spine: "s1", leaf: fmt.Sprint("l", l), clique: fmt.Sprint("c", n), free: 8})
		}
	}
	gpus := []int64{8, 8, 8, 8, 8, 8, 8, 8}
	req := jointRequest(levels, nodes, gpus)
	tree, err := BuildTree(levels, req.Nodes, 1)
	if err != nil {
		t.Fatal(err)
	}
	perLevel, err := tree.LowerBound(req)
	if err != nil {
		t.Fatal(err)
	}
	joint, err := tree.JointLowerBound(req)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{1, 3, 8, 8}, jointSpanList(perLevel)); diff != "" {
		t.Errorf("LowerBound [spine leaf clique node] (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{1, 4, 8, 8}, jointSpanList(joint)); diff != "" {
		t.Errorf("JointLowerBound [spine leaf clique node] (-want,+got):\n%s", diff)
	}
	if got, want := joint[1].Name, perLevel[1].Name; got != want {
		t.Errorf("level names differ: %s and %s", got, want)
	}
}

// Members not bound by topology are not counted; a gang of none spans
// nothing.
func TestJointLowerBoundIgnoresLooseMembers(t *testing.T) {
	levels := jointTestLevels(t)
	req := jointRequest(levels, []jointNode{{spine: "s0", leaf: "l0", clique: "c0", free: 8}}, []int64{4})
	req.Members[0].Accelerated = false
	tree, err := BuildTree(levels, req.Nodes, 1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tree.JointLowerBound(req)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{0, 0, 0, 0}, jointSpanList(got)); diff != "" {
		t.Errorf("spans (-want,+got):\n%s", diff)
	}
}
