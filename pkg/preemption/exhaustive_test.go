package preemption

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/topology"
)

// TestDecideMatchesExhaustiveSearch checks the engine against every victim
// set on many small random clusters: three label tiers, gangs and plain pods
// of mixed priorities, start times and sizes, elastic gangs with kept
// members, pods on no candidate node, PDBs shared across units, one or two
// request shapes with a launcher or per-node caps, replacements anchored
// near running members, every policy, and preemptionPolicy Never.
//
// The oracle shares nothing with the engine but the planner: it tries every
// subset of the candidate evictions, plans the preemptor on the capacity
// each frees with the real topology planner, reads the landing level from
// node labels, scores the set by the cost order as the package doc states
// it, and keeps the least. The engine must return exactly that set, the
// same plan and the same cost, and say it is exact.
func TestDecideMatchesExhaustiveSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(2026, 9))
	planner, err := topology.NewPlanner(nvidiaLevels())
	require.NoError(t, err)
	counts := map[string]int{}
	for i := range 1000 {
		req := randomCase(rng)
		// Node names repeat from case to case but labels do not: a new
		// generation keeps the shared planner from reusing a stale tree.
		req.NodeGeneration = uint64(i + 1)
		t.Run(fmt.Sprintf("case-%d", i), func(t *testing.T) {
			want := exhaustive(t, planner, req)
			counts[want.outcome()]++
			if want.reason == "" && len(req.Anchors) > 0 {
				counts["anchored"]++
			}
			if want.reason == "" && slices.ContainsFunc(req.Members, func(m placement.Member) bool { return m.MaxPerNode > 0 }) {
				counts["per-node cap"]++
			}
			got, err := NewEngine(planner, planner).Decide(t.Context(), req)
			if want.reason != "" {
				var np *NoPreemptionError
				require.ErrorAs(t, err, &np, "the oracle finds no preemption (%s)\n%s", want.reason, describeCase(req))
				require.Equal(t, want.reason, np.Reason, "%s\n%s", np.Message, describeCase(req))
				return
			}
			require.NoError(t, err, "the oracle evicts %v\n%s", want.victims, describeCase(req))
			if diff := gocmp.Diff(want.victims, victimNames(req, got)); diff != "" {
				t.Fatalf("victim pods (-oracle,+engine):\n%s\noracle cost %+v\nengine cost %+v\n%s",
					diff, want.cost, got.Cost, describeCase(req))
			}
			require.Equal(t, want.cost, got.Cost)
			require.Equal(t, want.plan.NodeOf, got.Plan.NodeOf)
			require.Equal(t, want.levelKey, got.Domain.Level, "landing level")
			require.True(t, got.Exact)
			requireWholeUnits(t, req, got)
		})
	}
	// The random cases must exercise every outcome, or the test proves
	// less than it claims.
	t.Logf("outcomes: %v", counts)
	for _, o := range []string{"victims", "elastic", "violation", "required", "launcher", "anchored", "per-node cap",
		string(ReasonFits), string(ReasonNoCandidates), string(ReasonNoVictimSet), string(ReasonPolicyNever)} {
		require.Positive(t, counts[o], "no random case had outcome %q", o)
	}
}

// requireWholeUnits checks that every victim is a whole unit, or elastic
// members within the unit's surplus and never a kept pod.
func requireWholeUnits(t *testing.T, req *Request, d *Decision) {
	t.Helper()
	for _, v := range d.Victims {
		un := req.Units[v.Unit]
		require.Less(t, un.Priority, req.Priority, "victim %s has no lower priority", un.Name)
		switch v.Kind {
		case WholeGang, PlainPod:
			require.Len(t, v.Pods, len(un.Pods), "%s is not evicted whole", un.Name)
		case ElasticMembers:
			require.LessOrEqual(t, len(v.Pods), un.Surplus, "%s loses more members than its surplus", un.Name)
			for _, i := range v.Pods {
				require.False(t, un.Pods[i].Keep, "%s's kept pod goes alone", un.Name)
			}
		}
	}
}

// oracleResult is the least victim set the exhaustive search found.
type oracleResult struct {
	// reason is set when nothing should be evicted.
	reason   Reason
	victims  []string
	cost     Cost
	plan     *placement.Plan
	levelKey string
	// flags for coverage.
	elastic, launcher, required bool
}

func (o *oracleResult) outcome() string {
	switch {
	case o.reason != "":
		return string(o.reason)
	case o.cost.Violations > 0:
		return "violation"
	case o.elastic:
		return "elastic"
	case o.launcher:
		return "launcher"
	case o.required:
		return "required"
	}
	return "victims"
}

// oracleItem is one candidate eviction as the oracle sees it.
type oracleItem struct {
	unit int
	pod  int // -1 for the whole unit
	// rank is the item's place in the canonical order.
	rank int
}

// exhaustive tries every subset of the candidate evictions.
func exhaustive(t *testing.T, planner *topology.Planner, req *Request) *oracleResult {
	t.Helper()
	if req.PreemptionPolicy == v1.PreemptNever {
		return &oracleResult{reason: ReasonPolicyNever}
	}
	var items []oracleItem
	for u, un := range req.Units {
		if un.Priority >= req.Priority {
			continue
		}
		items = append(items, oracleItem{unit: u, pod: -1})
		if un.Surplus > 0 {
			for i, pd := range un.Pods {
				if !pd.Keep && pd.Node >= 0 {
					items = append(items, oracleItem{unit: u, pod: i})
				}
			}
		}
	}
	// The canonical order, as the package doc states it.
	gpusOf := func(it oracleItem) int64 {
		var g int64
		for i, pd := range req.Units[it.unit].Pods {
			if it.pod < 0 || it.pod == i {
				g += pd.GPUs
			}
		}
		return g
	}
	// workOf is the GPU-seconds evicting it loses: its GPUs times the whole
	// seconds its unit has run.
	workOf := func(it oracleItem) int64 {
		un := req.Units[it.unit]
		if un.Started.IsZero() {
			return 0
		}
		return gpusOf(it) * max(0, int64(req.Now.Sub(un.Started)/time.Second))
	}
	unmovableOf := func(it oracleItem) int64 {
		if req.Units[it.unit].Movable {
			return 0
		}
		return workOf(it)
	}
	order := slices.Clone(items)
	slices.SortFunc(order, func(a, b oracleItem) int {
		ua, ub := req.Units[a.unit], req.Units[b.unit]
		if c := cmp.Compare(boolRank(a.pod < 0), boolRank(b.pod < 0)); c != 0 {
			return c
		}
		if c := cmp.Compare(ua.Priority, ub.Priority); c != 0 {
			return c
		}
		if c := cmp.Compare(unmovableOf(a), unmovableOf(b)); c != 0 {
			return c
		}
		if c := cmp.Compare(workOf(a), workOf(b)); c != 0 {
			return c
		}
		if c := cmp.Compare(gpusOf(a), gpusOf(b)); c != 0 {
			return c
		}
		if c := strings.Compare(ua.Name, ub.Name); c != 0 {
			return c
		}
		return cmp.Compare(a.pod, b.pod)
	})
	for r, it := range order {
		i := slices.IndexFunc(items, func(x oracleItem) bool { return x.unit == it.unit && x.pod == it.pod })
		items[i].rank = r
	}

	bound := 0
	for _, m := range req.Members {
		if m.Accelerated {
			bound++
		}
	}
	start := map[string]int{"": 0, scheduling.HostnameKey: 0, cliqueKey: 1, leafKey: 2, spineKey: 3}[req.Policy.Level]

	var best *oracleResult
	var bestRanks []int
	var bestCost Cost
	for mask := range 1 << len(items) {
		var chosen []oracleItem
		whole := map[int]bool{}
		alone := map[int]int{}
		for i, it := range items {
			if mask&(1<<i) == 0 {
				continue
			}
			chosen = append(chosen, it)
			if it.pod < 0 {
				whole[it.unit] = true
			} else {
				alone[it.unit]++
			}
		}
		valid := true
		for u, n := range alone {
			if whole[u] || n > req.Units[u].Surplus {
				valid = false
			}
		}
		if !valid {
			continue
		}
		// Free what the set evicts and plan.
		freed := req.Request
		freed.Nodes = slices.Clone(req.Nodes)
		counts := make([]int, len(req.PDBs))
		var c Cost
		c.MaxPriority = math.MinInt32
		for _, it := range chosen {
			un := req.Units[it.unit]
			for i, pd := range un.Pods {
				if it.pod >= 0 && it.pod != i {
					continue
				}
				if pd.Node >= 0 {
					freed.Nodes[pd.Node].Free = freed.Nodes[pd.Node].Free.Clone()
					freed.Nodes[pd.Node].Free.Add(pd.Request)
				}
				for _, b := range pd.PDBs {
					counts[b]++
				}
			}
			if it.pod < 0 {
				c.Gangs++
			} else {
				c.Elastic++
			}
			c.MaxPriority = max(c.MaxPriority, un.Priority)
			c.SumPriority += int64(un.Priority)
			c.UnmovableGPUSeconds += unmovableOf(it)
			c.WorkLostGPUSeconds += workOf(it)
			c.GPUs += gpusOf(it)
		}
		for b, n := range counts {
			c.Violations += max(0, n-req.PDBs[b].Allowed)
		}
		plan, err := planner.Plan(t.Context(), &freed)
		if err != nil {
			var fe *placement.FitError
			require.True(t, errors.As(err, &fe), "planner: %v", err)
			continue
		}
		level := 4
		if bound > 0 {
			level = landingLevel(req, plan, start)
			if len(req.Anchors) > 0 {
				level = nearLevel(req, plan)
			}
		}
		c.Level = level
		ranks := make([]int, len(chosen))
		for i, it := range chosen {
			ranks[i] = it.rank
		}
		slices.Sort(ranks)
		if best != nil {
			if x := slices.Compare(costTuple(c), costTuple(bestCost)); x > 0 || x == 0 && slices.Compare(ranks, bestRanks) >= 0 {
				continue
			}
		}
		best, bestRanks, bestCost = &oracleResult{plan: plan}, ranks, c
		for _, it := range chosen {
			un := req.Units[it.unit]
			for i, pd := range un.Pods {
				if it.pod < 0 || it.pod == i {
					best.victims = append(best.victims, pd.Name)
				}
			}
			best.elastic = best.elastic || it.pod >= 0
		}
		slices.Sort(best.victims)
		keys := []string{scheduling.HostnameKey, cliqueKey, leafKey, spineKey, ""}
		if bound > 0 {
			best.levelKey = keys[level]
		} else {
			best.levelKey = keys[landingLevel(req, plan, 0)]
		}
		best.launcher = bound > 0 && bound < len(req.Members)
		best.required = req.Policy.Required && req.Policy.Level != ""
	}
	switch {
	case best == nil && len(items) == 0:
		return &oracleResult{reason: ReasonNoCandidates}
	case best == nil:
		return &oracleResult{reason: ReasonNoVictimSet}
	case bestCost.Gangs+bestCost.Elastic == 0:
		return &oracleResult{reason: ReasonFits}
	}
	best.cost = bestCost
	return best
}

// costTuple lists a Cost's fields in the order the package doc compares
// them.
func costTuple(c Cost) []int64 {
	return []int64{int64(c.Violations), int64(c.Level), int64(c.Gangs), int64(c.Elastic),
		int64(c.MaxPriority), c.SumPriority, c.UnmovableGPUSeconds, c.WorkLostGPUSeconds, c.GPUs}
}

// landingLevel is the lowest level from start up (0 node, 1 clique, 2 leaf,
// 3 spine, 4 cluster) at which the plan's members share one domain, read
// from labels: members bound by topology when there are any, else all.
func landingLevel(req *Request, plan *placement.Plan, start int) int {
	var nodes []int
	for i, n := range plan.NodeOf {
		if req.Members[i].Accelerated {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 {
		nodes = plan.NodeOf
	}
	key := func(n, l int) string {
		lb := req.Nodes[n].Labels
		switch l {
		case 0:
			return req.Nodes[n].Name
		case 1:
			return lb[spineKey] + "/" + lb[leafKey] + "/" + lb[cliqueKey]
		case 2:
			return lb[spineKey] + "/" + lb[leafKey]
		case 3:
			return lb[spineKey]
		}
		return ""
	}
	for l := start; l < 4; l++ {
		same := true
		for _, n := range nodes[1:] {
			same = same && key(n, l) == key(nodes[0], l)
		}
		if same {
			return l
		}
	}
	return 4
}

// nearLevel is, for a request with anchors, the lowest level whose home
// domain holds every member bound by topology. Homes are read from labels:
// from the cluster down, the child of the home above that holds most
// anchors, the first in natural order of its label value on ties.
func nearLevel(req *Request, plan *placement.Plan) int {
	key := func(n, l int) []string {
		lb := req.Nodes[n].Labels
		return []string{lb[spineKey], lb[leafKey], lb[cliqueKey], req.Nodes[n].Name}[:4-l]
	}
	home := make([][]string, 5)
	home[4] = nil
	for l := 3; l >= 0; l-- {
		var children [][]string
		for n := range req.Nodes {
			k := key(n, l)
			if slices.Equal(k[:len(k)-1], home[l+1]) && !slices.ContainsFunc(children, func(c []string) bool { return slices.Equal(c, k) }) {
				children = append(children, k)
			}
		}
		slices.SortFunc(children, func(a, b []string) int { return naturalCompare(a[len(a)-1], b[len(b)-1]) })
		most := -1
		for _, c := range children {
			count := 0
			for _, a := range req.Anchors {
				if slices.Equal(key(a, l), c) {
					count++
				}
			}
			if count > most {
				home[l], most = c, count
			}
		}
	}
	for l := 0; l < 4; l++ {
		in := true
		for i, n := range plan.NodeOf {
			if req.Members[i].Accelerated && !slices.Equal(key(n, l), home[l]) {
				in = false
			}
		}
		if in {
			return l
		}
	}
	return 4
}

// naturalCompare orders "n2" before "n10": the test's names are a letter
// and a number.
func naturalCompare(a, b string) int {
	na, _ := strconv.Atoi(a[1:])
	nb, _ := strconv.Atoi(b[1:])
	if c := strings.Compare(a[:1], b[:1]); c != 0 {
		return c
	}
	return cmp.Compare(na, nb)
}
