package topology

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// TestPlanMatchesExhaustiveSearch checks the planner against every possible
// placement on many small random clusters: three label tiers, partly used
// nodes, one or two request shapes, eligibility masks, and every policy.
// Domains are identified here by label tuples, independently of Tree, and
// label values repeat under different parents, so that only structured
// domain keys pass. The planner must reach the least spans, compared from
// the loosest level down, and among the domains of the chosen level that
// allow them take one with the least room.
func TestPlanMatchesExhaustiveSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(2024, 11))
	// Levels by index: 0 node, 1 clique, 2 leaf, 3 spine, 4 cluster.
	levels := []string{scheduling.HostnameKey, cliqueKey, leafKey, spineKey, ""}
	for i := range 400 {
		req := randomRequest(rng)
		if rng.IntN(3) > 0 {
			req.Policy = placement.Policy{Level: levels[rng.IntN(4)], Required: rng.IntN(2) == 0}
		}
		t.Run(fmt.Sprintf("case-%d", i), func(t *testing.T) {
			best := exhaustive(req)
			res, err := newTestPlanner(t).PlanDetailed(t.Context(), req)
			if best == nil {
				var fe *placement.FitError
				require.ErrorAs(t, err, &fe, "no placement exists, so the planner must fail")
				return
			}
			require.NoError(t, err, "the optimum is %v", best.spans)
			requireValid(t, req, res.Plan)
			got := labelSpans(req, res.Plan.NodeOf)
			if diff := cmp.Diff(best.spans, got); diff != "" {
				t.Fatalf("spans [spine leaf clique node] (-optimum,+planner):\n%s\nrequest: %s", diff, describeRequest(req))
			}
			require.Equal(t, got, spanCounts(res.Spans), "Result.Spans disagrees with the plan")
			require.True(t, res.Exact)

			// Best fit at the chosen level.
			l := chosenLevel(best.spans, req.Policy.Level)
			require.Equal(t, levels[l], res.Level, "chosen level")
			chosen := domainOf(req, res.Plan.NodeOf[firstBound(req)], l)
			require.Contains(t, best.domains[l], chosen, "the chosen domain admits no optimal placement")
			for d := range best.domains[l] {
				require.LessOrEqual(t, roomOf(req, l, chosen), roomOf(req, l, d),
					"domain %v has less room than the chosen %v and allows the same spans", d, chosen)
			}
		})
	}
}

// randomRequest draws a cluster of at most 9 nodes and a gang of at most 6
// bound members, sometimes with a launcher.
func randomRequest(rng *rand.Rand) *placement.Request {
	var nodes []*nodeWrapper
	for len(nodes) == 0 || len(nodes) > 9 {
		nodes = nodes[:0]
		spines := 1 + rng.IntN(2)
		for s := range spines {
			for l := range 1 + rng.IntN(2) {
				for c := range 1 + rng.IntN(2) {
					for range 1 + rng.IntN(2) {
						w := makeNode(fmt.Sprintf("n%d", len(nodes))).
							spine(fmt.Sprintf("s%d", s)).leaf(fmt.Sprintf("l%d", l)).clique(fmt.Sprintf("c.%d", c))
						w.freeGPUs([]int64{0, 2, 4, 6, 8, 8, 8}[rng.IntN(7)])
						w.freeMilliCPU([]int64{8000, 16000, 64000}[rng.IntN(3)])
						nodes = append(nodes, w)
					}
				}
			}
		}
	}
	rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	r := makeRequest("ns/gang").nodes(nodes...)
	shapes := 1 + rng.IntN(2)
	total := 1 + rng.IntN(6)
	var elig []bool
	if shapes == 2 && rng.IntN(3) == 0 {
		elig = make([]bool, len(nodes))
		for i := range elig {
			elig[i] = rng.IntN(4) > 0
		}
	}
	gpus := []int64{1, 2, 4, 8}
	cpus := []int64{1000, 6000}
	req := [2][2]int64{}
	for s := range shapes {
		req[s] = [2]int64{cpus[rng.IntN(2)], gpus[rng.IntN(4)]}
	}
	if shapes == 2 && req[0] == req[1] {
		req[1][1] = 3
	}
	// Sometimes members of the first shape exclude each other, up to a
	// cap per node, as members with hostname anti-affinity do.
	perNode := 0
	if rng.IntN(3) == 0 {
		perNode = 1 + rng.IntN(2)
	}
	for i := range total {
		s := i % shapes
		m := makeMember(fmt.Sprintf("w-%d", i)).gpus(req[s][1]).milliCPU(req[s][0])
		if s == 1 {
			m.eligible(elig)
		} else {
			m.m.MaxPerNode = perNode
		}
		r.members(m)
	}
	if rng.IntN(4) == 0 {
		r.members(makeMember("launcher").gpus(0).milliCPU(100))
	}
	return r.obj()
}

// optimum is the best placement the exhaustive search found.
type optimum struct {
	// spans are domains used per level: spine, leaf, clique, node.
	spans []int
	// domains[l] holds each domain of level l (0 node .. 4 cluster) that
	// contains some optimal placement.
	domains [5]map[string]bool
}

// exhaustive tries every way to spread the bound members over the nodes
// (members of one shape are interchangeable, so it spreads counts) and
// returns the lexicographically least spans that the policy allows, or nil.
func exhaustive(req *placement.Request) *optimum {
	type shapeT struct {
		request placement.Vector
		elig    []bool
		perNode int
		n       int
	}
	var shapes []shapeT
	for _, m := range req.Members {
		if !m.Accelerated {
			continue
		}
		found := false
		for i := range shapes {
			if shapes[i].request[0] == m.Request[0] && shapes[i].request[1] == m.Request[1] {
				shapes[i].n++
				found = true
			}
		}
		if !found {
			shapes = append(shapes, shapeT{request: m.Request, elig: m.Eligible, perNode: m.MaxPerNode, n: 1})
		}
	}
	need := make([]int, len(shapes))
	for i, s := range shapes {
		need[i] = s.n
	}
	requiredLevel := -1
	if req.Policy.Required && req.Policy.Level != "" {
		requiredLevel = levelIndex(req.Policy.Level)
	}
	var best *optimum
	counts := make([][]int, len(req.Nodes)) // counts[node][shape]
	var rec func(n int)
	rec = func(n int) {
		if n == len(req.Nodes) {
			for _, k := range need {
				if k > 0 {
					return
				}
			}
			var used []int
			for i, c := range counts {
				for _, k := range c {
					if k > 0 {
						used = append(used, i)
						break
					}
				}
			}
			spans := spansOfNodes(req, used)
			if requiredLevel >= 0 && spans[3-requiredLevel] != 1 {
				return
			}
			switch {
			case best == nil || lexLess(spans, best.spans):
				best = &optimum{spans: spans}
				for l := range best.domains {
					best.domains[l] = map[string]bool{}
				}
			case !equalInts(spans, best.spans):
				return
			}
			for l := range best.domains {
				if l == 4 || spans[3-l] == 1 {
					best.domains[l][domainOf(req, used[0], l)] = true
				}
			}
			return
		}
		counts[n] = make([]int, len(shapes))
		var try func(s int, free placement.Vector)
		try = func(s int, free placement.Vector) {
			if s == len(shapes) {
				rec(n + 1)
				return
			}
			try(s+1, free)
			if shapes[s].elig != nil && !shapes[s].elig[n] {
				return
			}
			f := free.Clone()
			most := need[s]
			if shapes[s].perNode > 0 {
				most = min(most, shapes[s].perNode)
			}
			for k := 1; k <= most; k++ {
				f.Sub(shapes[s].request)
				if f[0] < 0 || f[1] < 0 {
					break
				}
				counts[n][s], need[s] = k, need[s]-k
				try(s+1, f)
				counts[n][s], need[s] = 0, need[s]+k
			}
		}
		try(0, req.Nodes[n].Free)
	}
	rec(0)
	return best
}

func equalInts(a, b []int) bool { return cmp.Equal(a, b) }

// levelIndex maps a policy key to 0 node .. 3 spine.
func levelIndex(key string) int {
	switch key {
	case cliqueKey:
		return 1
	case leafKey:
		return 2
	case spineKey:
		return 3
	}
	return 0
}

// domainOf names the level-l domain of node n by its label tuple.
func domainOf(req *placement.Request, n, l int) string {
	lb := req.Nodes[n].Labels
	switch l {
	case 0:
		return req.Nodes[n].Name
	case 1:
		return fmt.Sprintf("%q", []string{lb[spineKey], lb[leafKey], lb[cliqueKey]})
	case 2:
		return fmt.Sprintf("%q", []string{lb[spineKey], lb[leafKey]})
	case 3:
		return fmt.Sprintf("%q", []string{lb[spineKey]})
	}
	return "cluster"
}

// spansOfNodes counts the domains per level, spine first, that hold nodes.
func spansOfNodes(req *placement.Request, nodes []int) []int {
	spans := make([]int, 4)
	for l := 3; l >= 0; l-- {
		seen := map[string]bool{}
		for _, n := range nodes {
			seen[domainOf(req, n, l)] = true
		}
		spans[3-l] = len(seen)
	}
	return spans
}

// labelSpans counts the domains per level that a plan's bound members use.
func labelSpans(req *placement.Request, nodeOf []int) []int {
	var nodes []int
	for i, n := range nodeOf {
		if req.Members[i].Accelerated {
			nodes = append(nodes, n)
		}
	}
	return spansOfNodes(req, nodes)
}

// chosenLevel is the level the planner must settle on: the lowest, from the
// policy's level up, where the optimum uses one domain.
func chosenLevel(spans []int, policy string) int {
	for l := levelIndex(policy); l <= 3; l++ {
		if spans[3-l] == 1 {
			return l
		}
	}
	return 4
}

func firstBound(req *placement.Request) int {
	for i, m := range req.Members {
		if m.Accelerated {
			return i
		}
	}
	return -1
}

// roomOf is how many members of each bound shape, each alone, fit in
// domain d of level l, summed over shapes: the planner's best-fit key.
func roomOf(req *placement.Request, l int, d string) int64 {
	var room int64
	seen := map[string]bool{}
	for _, m := range req.Members {
		key := fmt.Sprint(m.Request, m.Eligible)
		if !m.Accelerated || seen[key] {
			continue
		}
		seen[key] = true
		for n := range req.Nodes {
			if domainOf(req, n, l) == d && m.EligibleOn(n) {
				limit := int64(maxNodeSlots)
				if m.MaxPerNode > 0 {
					limit = int64(m.MaxPerNode)
				}
				room += fitCount(m.Request, req.Nodes[n].Free, limit)
			}
		}
	}
	return room
}

func describeRequest(req *placement.Request) string {
	s := fmt.Sprintf("policy %+v\n", req.Policy)
	for i, n := range req.Nodes {
		s += fmt.Sprintf("  node %s %s free %v\n", n.Name, domainOf(req, i, 1), n.Free)
	}
	for _, m := range req.Members {
		s += fmt.Sprintf("  member %s %v eligible %v per node %d\n", m.Name, m.Request, m.Eligible, m.MaxPerNode)
	}
	return s
}
