package preemption

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/topology"
)

// The engine against what it is given, rather than what it decides: input
// order, bad input, a planner that rejects every plan, cancellation and
// the work budget.

// TestDecideIgnoresInputOrder shuffles units and nodes (moving pods and
// anchors with their nodes): the decision must not move. It also checks that Decide
// leaves the request as it found it.
func TestDecideIgnoresInputOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	// The headline's four gangs tie on everything but their names.
	bases := []*Request{
		makePreemptor("ns/big").workers(8, 8).on(headline()),
		makePreemptor("ns/mid").workers(4, 8).on(headline()),
	}
	for range 100 {
		bases = append(bases, randomCase(rng))
	}
	for i, base := range bases {
		pristine := cloneRequest(base)
		want, wantErr := newTestEngine(t).Decide(t.Context(), base)
		if diff := cmp.Diff(pristine, base); diff != "" {
			t.Fatalf("case %d: Decide wrote its request (-before,+after):\n%s", i, diff)
		}
		for range 3 {
			req := shuffled(rng, base)
			got, err := newTestEngine(t).Decide(t.Context(), req)
			if wantErr != nil {
				require.EqualError(t, err, wantErr.Error(), "case %d", i)
				continue
			}
			require.NoError(t, err, "case %d", i)
			require.Equal(t, victimNames(base, want), victimNames(req, got), "case %d", i)
			require.Equal(t, planNodes(base, want), planNodes(req, got), "case %d", i)
			require.Equal(t, want.Domain, got.Domain, "case %d", i)
			require.Equal(t, want.Cost, got.Cost, "case %d", i)
		}
	}
}

// shuffled is req with its units and nodes in a random order.
func shuffled(rng *rand.Rand, req *Request) *Request {
	out := cloneRequest(req)
	rng.Shuffle(len(out.Units), func(a, b int) { out.Units[a], out.Units[b] = out.Units[b], out.Units[a] })
	perm := rng.Perm(len(out.Nodes)) // node i moves to perm[i]
	nodes := make([]placement.Node, len(out.Nodes))
	for i, n := range out.Nodes {
		nodes[perm[i]] = n
	}
	out.Nodes = nodes
	for u := range out.Units {
		for i := range out.Units[u].Pods {
			if n := out.Units[u].Pods[i].Node; n >= 0 {
				out.Units[u].Pods[i].Node = perm[n]
			}
		}
	}
	for i, a := range out.Anchors {
		out.Anchors[i] = perm[a]
	}
	return out
}

// cloneRequest deep-copies what Decide reads. Random cases have no
// eligibility masks.
func cloneRequest(req *Request) *Request {
	out := *req
	out.Nodes = slices.Clone(req.Nodes)
	for i := range out.Nodes {
		out.Nodes[i].Free = out.Nodes[i].Free.Clone()
		out.Nodes[i].Allocatable = out.Nodes[i].Allocatable.Clone()
	}
	out.Members = slices.Clone(req.Members)
	for i := range out.Members {
		out.Members[i].Request = out.Members[i].Request.Clone()
	}
	out.Units = slices.Clone(req.Units)
	for u := range out.Units {
		out.Units[u].Pods = slices.Clone(out.Units[u].Pods)
		for i := range out.Units[u].Pods {
			pd := &out.Units[u].Pods[i]
			pd.Request = pd.Request.Clone()
			pd.PDBs = slices.Clone(pd.PDBs)
		}
	}
	out.PDBs = slices.Clone(req.PDBs)
	out.Anchors = slices.Clone(req.Anchors)
	return &out
}

// planNodes names the node of each member.
func planNodes(req *Request, d *Decision) []string {
	out := make([]string, len(d.Plan.NodeOf))
	for i, n := range d.Plan.NodeOf {
		out[i] = req.Nodes[n].Name
	}
	return out
}

// victimNames names the evicted pods, sorted.
func victimNames(req *Request, d *Decision) []string {
	var out []string
	for _, v := range d.Victims {
		for _, i := range v.Pods {
			out = append(out, req.Units[v.Unit].Pods[i].Name)
		}
	}
	slices.Sort(out)
	return out
}

func TestDecideBadInput(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(r *Request)
		wantErr string
	}{
		{"no members", func(r *Request) { r.Members = nil }, "has no members"},
		{"no clock", func(r *Request) { r.Now = time.Time{} }, "Now is not set"},
		{"duplicate unit", func(r *Request) { r.Units = append(r.Units, r.Units[0]) }, "unit names must be unique"},
		{"node out of range", func(r *Request) { r.Units[0].Pods[0].Node = 99 }, "node index 99 is outside the 16 nodes"},
		{"short vector", func(r *Request) { r.Units[0].Pods[0].Request = placement.Vector{1} }, "request vector has 1 dimensions, want 2"},
		{"surplus takes every pod", func(r *Request) { r.Units[0].Surplus = 4 }, "surplus 4 must be at least 0 and below its 4 pods"},
		{"plain pod with two pods", func(r *Request) { r.Units[0].Kind = KindPod }, "exactly one pod, not 4"},
		{"bad PDB index", func(r *Request) { r.Units[0].Pods[0].PDBs = []int{3} }, "PDB index 3 is outside the 0 budgets"},
		{"bad policy", func(r *Request) { r.PreemptionPolicy = "Sometimes" }, `unknown preemptionPolicy "Sometimes"`},
		{"bad anchor", func(r *Request) { r.Anchors = []int{16} }, "anchor 16 is not a node index"},
		{"negative cap", func(r *Request) { r.Members[0].MaxPerNode = -1 }, "MaxPerNode is -1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := makePreemptor("ns/big").workers(8, 8).on(headline())
			req.Units = slices.Clone(req.Units)
			req.Units[0].Pods = slices.Clone(req.Units[0].Pods)
			tc.mutate(req)
			_, err := newTestEngine(t).Decide(t.Context(), req)
			require.ErrorContains(t, err, tc.wantErr)
			var np *NoPreemptionError
			require.False(t, errors.As(err, &np), "bad input is an error, not a decision")
		})
	}
	t.Run("unknown level", func(t *testing.T) {
		req := makePreemptor("ns/big").workers(8, 8).policy("example.com/rack", true).on(headline())
		_, err := newTestEngine(t).Decide(t.Context(), req)
		require.ErrorIs(t, err, topology.ErrUnknownLevel)
	})
}

// failingPlanner refuses every plan, as a planner would that disagrees with
// the search's slot counts.
type failingPlanner struct{}

func (failingPlanner) Plan(context.Context, *placement.Request) (*placement.Plan, error) {
	return nil, &placement.FitError{Wanted: 1, Reason: "no"}
}

func TestDecideEvictsNothingThePlannerRejects(t *testing.T) {
	tp, err := topology.NewPlanner(nvidiaLevels())
	require.NoError(t, err)
	req := makePreemptor("ns/big").workers(8, 8).on(headline())
	_, err = NewEngine(failingPlanner{}, tp).Decide(t.Context(), req)
	var np *NoPreemptionError
	require.ErrorAs(t, err, &np)
	require.Equal(t, ReasonNotVerified, np.Reason)
	require.Contains(t, np.Message, "evicting nothing")
}

func TestDecideCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	req := makePreemptor("ns/big").workers(8, 8).on(headline())
	_, err := newTestEngine(t).Decide(ctx, req)
	require.ErrorIs(t, err, context.Canceled)
}

func TestDecideOverBudgetStillDecides(t *testing.T) {
	req := makePreemptor("ns/big").workers(64, 8).on(fullCluster(rand.New(rand.NewPCG(3, 3)), 2, 4))
	e := newTestEngine(t)
	exact, err := e.Decide(t.Context(), req)
	require.NoError(t, err)
	require.True(t, exact.Exact)

	e.budget = 1
	d, err := e.Decide(t.Context(), req)
	require.NoError(t, err)
	require.False(t, d.Exact)
	requirePlanUsesFreedCapacity(t, req, d)
	require.Equal(t, exact.Cost.Level, d.Cost.Level, "the greedy pass keeps the level")
	require.GreaterOrEqual(t, d.Cost.Gangs, exact.Cost.Gangs)
	t.Logf("exact: %s; greedy: %s", exact.Summary, d.Summary)
	require.True(t, strings.HasPrefix(d.Summary, "evicting "))
}
