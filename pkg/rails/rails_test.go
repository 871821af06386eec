package rails

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/placement/placementtest"
	"github.com/gpu-gang/gpu-gang/pkg/topology"
)

// fabric is a small cluster whose nodes have one GPU per rail, some of
// them taken.
type fabric struct {
	nodes []placement.Node
	free  []capacity.RailSet
	rails int
}

// randomFabric builds spines×leaves×nodes nodes of rails GPUs (one per
// rail), each rail free with probability 1/2 (whole nodes free an eighth of
// the time), from seed.
func randomFabric(seed uint64, spines, leaves, perLeaf, rails int) fabric {
	rng := rand.New(rand.NewPCG(seed, 31))
	f := fabric{rails: rails, nodes: placementtest.MakeFabric().Spines(spines).LeavesPerSpine(leaves).NodesPerLeaf(perLeaf).Obj()}
	for i := range f.nodes {
		var s capacity.RailSet
		whole := rng.IntN(8) == 0
		for r := range rails {
			if whole || rng.IntN(2) == 0 {
				s |= 1 << r
			}
		}
		f.free = append(f.free, s)
		f.nodes[i].Allocatable = placement.Vector{64000, int64(rails)}
		f.nodes[i].Free = placement.Vector{64000, int64(s.Len())}
	}
	return f
}

func (f fabric) gang(size int) *Gang {
	g := &Gang{Size: size, Class: make([]int32, len(f.free))}
	index := map[Class]int32{}
	for n, s := range f.free {
		var c Class
		for r := range f.rails {
			if s.Has(r) {
				c.Free[r] = 1
			}
		}
		c.Used = s.Len() < f.rails
		k, ok := index[c]
		if !ok {
			k = int32(len(g.Classes))
			g.Classes = append(g.Classes, c)
			index[c] = k
		}
		g.Class[n] = k
	}
	return g
}

func request(f fabric, members, size int, policy placement.Policy) *placement.Request {
	req := &placement.Request{Gang: "default/g", Resources: placementtest.Resources, Nodes: f.nodes, Policy: policy}
	for i := range members {
		req.Members = append(req.Members, placement.Member{
			Name: fmt.Sprintf("default/g-%d", i), Rank: i, Request: placement.Vector{1000, int64(size)}, Accelerated: true,
		})
	}
	return req
}

// withUnits makes every leaf of f a scalable unit of g.
func (f fabric) withUnits(g *Gang) *Gang {
	g.Unit = make([]int32, len(f.nodes))
	index := map[string]int32{}
	for n, node := range f.nodes {
		leaf := node.Labels[scheduling.LabelLeaf]
		u, ok := index[leaf]
		if !ok {
			u = int32(len(g.Units))
			g.Units = append(g.Units, leaf)
			index[leaf] = u
		}
		g.Unit[n] = u
	}
	return g
}

// alignedExists is the oracle: members aligned members fit, one per node
// (one GPU per rail), all in one domain of level when it is not empty,
// every unit's members on one rail set of size rails free on their nodes.
// Without units (unit empty), that is one set for all; with units (a
// leaf level), each leaf may use its own set: a leaf holds as many
// members as nodes share its best set.
func alignedExists(f fabric, members, size int, level, unit string) bool {
	var all []int
	for r := range f.rails {
		all = append(all, r)
	}
	// best[d][u] is the most nodes of unit u in domain d sharing one set.
	best := map[string]map[string]int{}
	combinations(all, size, func(s capacity.RailSet) {
		count := map[[2]string]int{}
		for n, free := range f.free {
			if free.Contains(s) {
				d, u := "", ""
				if level != "" {
					d = f.nodes[n].Labels[level]
				}
				if unit != "" {
					u = f.nodes[n].Labels[unit]
				}
				count[[2]string{d, u}]++
			}
		}
		for k, c := range count {
			if best[k[0]] == nil {
				best[k[0]] = map[string]int{}
			}
			best[k[0]][k[1]] = max(best[k[0]][k[1]], c)
		}
	})
	for _, units := range best {
		held := 0
		for _, c := range units {
			held += c
		}
		if held >= members {
			return true
		}
	}
	return false
}

// TestPlanFindsAnAlignedPlacementWheneverOneExists checks the planner
// against an exhaustive oracle on small random fabrics, with the whole
// gang one unit and with every leaf a unit: whenever an aligned placement
// exists (in one leaf when the gang requires it), the plan exists, puts
// every member on a node with its set free, at most one per node, members
// of a unit on one set, and keeps the topology policy; when none exists,
// it fails.
func TestPlanFindsAnAlignedPlacementWheneverOneExists(t *testing.T) {
	planner, err := topology.NewPlanner(mustPreset(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	found, cases, perUnit := 0, 0, 0
	for seed := range uint64(400) {
		rails := []int{4, 8}[seed%2]
		f := randomFabric(seed, 1+int(seed%2), 2, 3, rails)
		size := 1 + int(seed/2)%(rails/2)
		members := 2 + int(seed/3)%7
		var policy placement.Policy
		if seed%3 == 0 {
			policy = placement.Policy{Level: scheduling.LabelLeaf, Required: true}
		}
		required := ""
		if policy.Required {
			required = policy.Level
		}
		unit := ""
		if seed%4 < 2 {
			unit = scheduling.LabelLeaf
		}
		want := alignedExists(f, members, size, required, unit)
		if want && !alignedExists(f, members, size, required, "") {
			perUnit++ // only with a set of its own per leaf
		}
		g := f.gang(size)
		if unit != "" {
			f.withUnits(g)
		}
		g.Aligned = make([]bool, members)
		for i := range g.Aligned {
			g.Aligned[i] = true
		}
		req := request(f, members, size, policy)
		plan, sets, err := g.Plan(ctx, planner, req)
		cases++
		if !want {
			if err == nil {
				t.Fatalf("seed %d: planned on rails %v though no aligned placement exists: %v", seed, sets, plan.NodeOf)
			}
			continue
		}
		if err != nil {
			t.Fatalf("seed %d: %d members of %d rails: an aligned placement exists, the planner found none: %v", seed, members, size, err)
		}
		found++
		perNode := map[int]int{}
		domains := map[string]bool{}
		unitSet := map[string]capacity.RailSet{}
		for i, n := range plan.NodeOf {
			set := sets[i]
			if set.Len() != size {
				t.Fatalf("seed %d: member %d on rail set %v, want %d rails", seed, i, set, size)
			}
			u := f.nodes[n].Labels[unit]
			if prev, ok := unitSet[u]; ok && prev != set {
				t.Fatalf("seed %d: members in unit %q on rails %v and %v", seed, u, prev, set)
			}
			unitSet[u] = set
			if !f.free[n].Contains(set) {
				t.Fatalf("seed %d: member %d on node %s whose free rails %v lack %v", seed, i, f.nodes[n].Name, f.free[n], set)
			}
			perNode[n]++
			if perNode[n] > 1 {
				t.Fatalf("seed %d: two members on node %s, which has one GPU per rail", seed, f.nodes[n].Name)
			}
			if required != "" {
				domains[f.nodes[n].Labels[required]] = true
			}
		}
		if len(domains) > 1 {
			t.Fatalf("seed %d: required %s spans %v", seed, required, domains)
		}
	}
	t.Logf("%d of %d cases had an aligned placement, %d only with a set per leaf", found, cases, perUnit)
	if found < cases/4 || perUnit < 10 {
		t.Fatalf("only %d of %d cases had an aligned placement, %d only per unit: the fabrics test too little", found, cases, perUnit)
	}
}

// TestCandidatesPreferRailsOfUsedNodes checks that a gang goes to the
// free rails of nodes already in use, leaving whole nodes whole.
func TestCandidatesPreferRailsOfUsedNodes(t *testing.T) {
	f := fabric{rails: 8, free: []capacity.RailSet{0xF0, 0xF0, 0xFF, 0xFF}}
	g := f.gang(4)
	got := g.Candidates(nil, 2)
	if len(got) == 0 || got[0].Set != 0xF0 {
		t.Fatalf("first candidate %v, want rails 4-7 of the half-used nodes", got)
	}
	if got[0].UsedNodes != 2 || got[0].Slots != 4 {
		t.Fatalf("candidate %+v, want 2 used nodes and 4 slots", got[0])
	}
}

func mustPreset(t testing.TB) []scheduling.Level {
	t.Helper()
	levels, ok := scheduling.Preset(scheduling.DefaultPreset)
	if !ok {
		t.Fatal("no default preset")
	}
	return levels
}

// TestMostAlignsWhatOneSetHolds checks the preferred fallback: with rails
// 0-3 free on three nodes and 4-7 on two, a gang of four aligns three
// members on rails 0-3 and places the fourth elsewhere.
func TestMostAlignsWhatOneSetHolds(t *testing.T) {
	planner, err := topology.NewPlanner(mustPreset(t))
	if err != nil {
		t.Fatal(err)
	}
	f := fabric{rails: 8, free: []capacity.RailSet{0x0F, 0x0F, 0x0F, 0xF0, 0xF0},
		nodes: placementtest.MakeFabric().NodesPerLeaf(5).Obj()}
	for i := range f.nodes {
		f.nodes[i].Free = placement.Vector{64000, 4}
	}
	g := f.gang(4)
	g.Aligned = []bool{true, true, true, true}
	req := request(f, 4, 4, placement.Policy{})
	if _, _, err := g.Plan(context.Background(), planner, req); err == nil {
		t.Fatal("no set holds four members, yet Plan planned")
	}
	plan, sets, err := g.Most(context.Background(), planner, req)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sets, []capacity.RailSet{0x0F, 0x0F, 0x0F, 0}) {
		t.Fatalf("rails per member %v, want the first three on rails 0-3", sets)
	}
	for i := range 3 {
		if n := plan.NodeOf[i]; !f.free[n].Contains(sets[i]) {
			t.Fatalf("member %d on node %d without rails 0-3 free", i, n)
		}
	}
}

// TestNarrowCapsMembersOfEveryKind checks that a node takes no more
// aligned members than its slots when the members are of different kinds
// (each its own eligibility, as members whose claims pin them are), which a
// per-kind cap would not say: four members on four whole nodes of one GPU
// per rail go one per node.
func TestNarrowCapsMembersOfEveryKind(t *testing.T) {
	planner, err := topology.NewPlanner(mustPreset(t))
	if err != nil {
		t.Fatal(err)
	}
	f := fabric{rails: 8, free: []capacity.RailSet{0xFF, 0xFF, 0xFF, 0xFF}, nodes: placementtest.MakeFabric().NodesPerLeaf(4).Obj()}
	g := f.gang(4)
	g.Aligned = []bool{true, true, true, true}
	req := request(f, 4, 4, placement.Policy{})
	for i := range req.Members {
		req.Members[i].Eligible = []bool{true, true, true, true} // a slice of its own
	}
	plan, _, err := g.Plan(context.Background(), planner, req)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for i, n := range plan.NodeOf {
		if seen[n] {
			t.Fatalf("member %d shares node %d: plan %v", i, n, plan.NodeOf)
		}
		seen[n] = true
	}
}
