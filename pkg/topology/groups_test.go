package topology

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/placement/placementtest"
)

// TestPlanGroupsMatchesExhaustiveSearch extends the exhaustive oracle to
// groups of nodes a gang must not mix (uniform GPU products, drivers,
// capacity types). On small random clusters whose nodes carry random group
// labels, the planner must never put the gang's bound members in two
// groups, and must match the best single-group optimum: the least spans
// over all groups, loosest level first, and among the groups and domains
// that allow them one with the least room.
func TestPlanGroupsMatchesExhaustiveSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(2026, 11))
	levels := []string{scheduling.HostnameKey, cliqueKey, leafKey, spineKey, ""}
	for i := range 400 {
		req := randomRequest(rng)
		if rng.IntN(3) > 0 {
			req.Policy = placement.Policy{Level: levels[rng.IntN(4)], Required: rng.IntN(2) == 0}
		}
		req.Groups = randomGroups(rng, req)
		t.Run(fmt.Sprintf("case-%d", i), func(t *testing.T) {
			// The oracle: the exhaustive optimum of each group alone.
			type groupBest struct {
				k    int
				sub  *placement.Request
				best *optimum
			}
			var winners []groupBest
			for k := range req.Groups.Names {
				sub := req.InGroup(k)
				b := exhaustive(sub)
				switch {
				case b == nil:
				case len(winners) == 0 || lexLess(b.spans, winners[0].best.spans):
					winners = []groupBest{{k, sub, b}}
				case equalInts(b.spans, winners[0].best.spans):
					winners = append(winners, groupBest{k, sub, b})
				}
			}

			res, err := newTestPlanner(t).PlanDetailed(t.Context(), req)
			if len(winners) == 0 {
				var fe *placement.FitError
				require.ErrorAs(t, err, &fe, "no group holds the gang, so the planner must fail")
				require.Contains(t, fe.Reason, "none of the", "the failure names the groups")
				return
			}
			require.NoError(t, err, "the optimum is %v in group %d", winners[0].best.spans, winners[0].k)
			requireValid(t, req, res.Plan)

			group := -1
			for m, n := range res.Plan.NodeOf {
				if !req.Members[m].Accelerated {
					continue
				}
				if group < 0 {
					group = req.Groups.Of[n]
				}
				require.Equal(t, group, req.Groups.Of[n], "member %s is in group %d, another member in group %d: the plan mixes groups\nrequest: %s",
					req.Members[m].Name, req.Groups.Of[n], group, describeGroups(req))
			}
			require.Equal(t, req.Groups.Names[group], res.Group)

			got := labelSpans(req, res.Plan.NodeOf)
			if diff := cmp.Diff(winners[0].best.spans, got); diff != "" {
				t.Fatalf("spans [spine leaf clique node] (-best single-group optimum,+planner):\n%s\nrequest: %s", diff, describeGroups(req))
			}

			// Least room among the optimal (group, domain) pairs at the
			// chosen level.
			l := chosenLevel(got, req.Policy.Level)
			var mine *groupBest
			for i := range winners {
				if winners[i].k == group {
					mine = &winners[i]
				}
			}
			require.NotNil(t, mine, "group %d admits no optimal placement; optimal groups: %v", group, winners)
			chosen := domainOf(req, res.Plan.NodeOf[firstBound(req)], l)
			require.Contains(t, mine.best.domains[l], chosen, "the chosen domain admits no optimal placement in its group")
			myRoom := roomOf(mine.sub, l, chosen)
			for _, w := range winners {
				for d := range w.best.domains[l] {
					require.LessOrEqual(t, myRoom, roomOf(w.sub, l, d),
						"domain %v of group %d has less room than the chosen %v of group %d and allows the same spans", d, w.k, chosen, group)
				}
			}
		})
	}
}

// randomGroups splits req's nodes into two or three groups: at random, or
// along a topology level (a GPU product per leaf, capacity type per
// clique), as real fleets tend to be.
func randomGroups(rng *rand.Rand, req *placement.Request) *placement.Groups {
	n := 2 + rng.IntN(2)
	g := &placement.Groups{Of: make([]int, len(req.Nodes)), Rule: "one test label"}
	for k := range n {
		g.Names = append(g.Names, fmt.Sprintf("g%d", k))
	}
	along := []string{"", cliqueKey, leafKey}[rng.IntN(3)]
	of := map[string]int{}
	for i := range req.Nodes {
		if along == "" {
			g.Of[i] = rng.IntN(n)
			continue
		}
		d := domainOf(req, i, levelIndex(along))
		if _, ok := of[d]; !ok {
			of[d] = rng.IntN(n)
		}
		g.Of[i] = of[d]
	}
	return g
}

func describeGroups(req *placement.Request) string {
	s := describeRequest(req)
	for i, n := range req.Nodes {
		s += fmt.Sprintf("  node %s in group %d\n", n.Name, req.Groups.Of[i])
	}
	return s
}

// The planner prefers the group whose plan is tightest, then the one with
// the least room, and never takes the roomy group when a tighter one holds
// the gang; a running gang's new members stay in their group.
func TestPlanGroups(t *testing.T) {
	// Two leaves of four nodes each; leaf l0 is H100, leaf l1 A100, as
	// GPU products usually follow the racks they were bought with.
	nodes := placementtest.MakeFabric().LeavesPerSpine(2).NodesPerLeaf(4).CliqueSize(2).Obj()
	groupOf := func(name string) int {
		if name[4] == '0' { // s0-l0-...
			return 0
		}
		return 1
	}
	groups := func() *placement.Groups {
		g := &placement.Groups{Names: []string{"product=H100", "product=A100"}, Rule: "one GPU product"}
		for _, n := range nodes {
			g.Of = append(g.Of, groupOf(n.Name))
		}
		return g
	}
	tests := []struct {
		name      string
		free      map[string]int64
		workers   int
		anchors   []string
		policy    placement.Policy
		wantGroup string
		wantErr   string
	}{
		{
			name: "both groups hold the gang: the one with less room wins", workers: 2,
			free:      map[string]int64{"s0-l0-n0": 0, "s0-l0-n1": 0},
			wantGroup: "product=H100",
		},
		{
			// H100 has two free nodes in two NVLink cliques, A100 three,
			// two of them in one clique: A100 holds the pair in one
			// clique, a lower level than H100 can offer, so it wins
			// although it has more room.
			name: "a tighter plan wins over less room", workers: 2,
			free:      map[string]int64{"s0-l0-n0": 0, "s0-l0-n3": 0, "s0-l1-n0": 0},
			wantGroup: "product=A100",
		},
		{
			name: "a group that does not hold the gang is never mixed in", workers: 4,
			free:      map[string]int64{"s0-l0-n0": 0},
			wantGroup: "product=A100",
		},
		{
			name: "no group holds it", workers: 4,
			free:    map[string]int64{"s0-l0-n0": 0, "s0-l1-n3": 0},
			wantErr: "the gang's accelerated members must all run on nodes of one GPU product, and none of the 2 such groups of nodes holds them: product=H100 fits 3 of 4",
		},
		{
			name: "new members of a running gang stay in its group", workers: 1,
			anchors:   []string{"s0-l1-n0", "s0-l1-n1"},
			free:      map[string]int64{"s0-l1-n0": 0, "s0-l1-n1": 0, "s0-l0-n0": 0, "s0-l0-n1": 0, "s0-l0-n2": 0},
			wantGroup: "product=A100",
		},
		{
			name: "and wait rather than leave it", workers: 2,
			anchors: []string{"s0-l1-n0", "s0-l1-n1"},
			free:    map[string]int64{"s0-l1-n0": 0, "s0-l1-n1": 0, "s0-l1-n2": 0},
			wantErr: "(1 tried): product=A100 fits 1 of 2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := make([]placement.Node, len(nodes))
			index := map[string]int{}
			for i, n := range nodes {
				n.Free = n.Free.Clone()
				if f, ok := tt.free[n.Name]; ok {
					n.Free[1] = f
				}
				ns[i] = n
				index[n.Name] = i
			}
			req := makeRequest("ns/gang").nodeObjs(ns).workers(tt.workers, 8).obj()
			req.Groups = groups()
			req.Policy = tt.policy
			for _, a := range tt.anchors {
				req.Anchors = append(req.Anchors, index[a])
			}
			res, err := newTestPlanner(t).PlanDetailed(t.Context(), req)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantGroup, res.Group)
			require.Contains(t, res.Plan.Summary, "group "+tt.wantGroup)
			for _, n := range res.Plan.NodeOf {
				require.Equal(t, tt.wantGroup, req.Groups.Names[groupOf(ns[n].Name)], "member on %s", ns[n].Name)
			}
		})
	}
}

// Greedy, the topology-blind yardstick, keeps groups apart too.
func TestGreedyKeepsGroupsApart(t *testing.T) {
	nodes := placementtest.MakeFabric().LeavesPerSpine(2).NodesPerLeaf(2).Obj()
	req := makeRequest("ns/gang").nodeObjs(nodes).workers(2, 8).members(makeMember("launcher").gpus(0)).obj()
	req.Groups = &placement.Groups{Of: []int{0, 1, 1, 0}, Names: []string{"a", "b"}, Rule: "one label"}
	req.Nodes[0].Free[1] = 0 // group a has one free node
	plan, err := placementtest.Greedy{}.Plan(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, 1, req.Groups.Of[plan.NodeOf[0]])
	require.Equal(t, 1, req.Groups.Of[plan.NodeOf[1]])
	require.Contains(t, plan.Summary, "in group b")

	req.Nodes[1].Free[1] = 0 // now neither group holds two
	_, err = placementtest.Greedy{}.Plan(t.Context(), req)
	var fe *placement.FitError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, 2, fe.Placed, "one worker and the launcher")
	require.Contains(t, fe.Reason, "none of the 2 such groups of nodes holds them: a fits 2 of 3; b fits 2 of 3")
}
