package topology

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// TestKeptSlotsMatchFreshCount is the oracle for the kept slot counts
// (keptslots.go): on random fabrics split into random groups, through
// random sequences of changes (nodes whose capacity changes in a new
// vector, nodes that get a new vector with the same capacity, eligibility
// flipped in place, new member shapes, new groups), the kept counts of
// every group equal a fresh count, and a Planner that keeps counts plans
// exactly what a fresh Planner plans.
func TestKeptSlotsMatchFreshCount(t *testing.T) {
	rng := rand.New(rand.NewPCG(2026, 18))
	for c := range 150 {
		req := randomRequest(rng)
		req.Groups = randomGroups(rng, req)
		req.StableFree = true
		kept := newTestPlanner(t)
		for step := range 12 {
			if step > 0 {
				changeRequest(rng, req)
			}
			name := fmt.Sprintf("case-%d/step-%d", c, step)
			requireKeptSlots(t, name, kept, req)

			got, gotErr := kept.PlanDetailed(t.Context(), req)
			fresh := *req
			fresh.StableFree = false
			want, wantErr := newTestPlanner(t).PlanDetailed(t.Context(), &fresh)
			require.Equal(t, fmt.Sprint(wantErr), fmt.Sprint(gotErr), "%s: errors differ\n%s", name, describeGroups(req))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("%s: the planner with kept counts planned otherwise (-fresh,+kept):\n%s\n%s", name, diff, describeGroups(req))
			}
		}
	}
}

// requireKeptSlots counts every bound shape of req in every group through
// p's kept counts, as planGroups does, and checks the counts against a
// fresh count on the same nodes.
func requireKeptSlots(t *testing.T, name string, p *Planner, req *placement.Request) {
	t.Helper()
	tr := p.Tree(req)
	lay := p.layouts.of(tr, req.Groups)
	lease := p.kept.lease(lay, req)
	require.NotNil(t, lease, "%s: no other call holds the kept counts", name)
	defer lease.release()
	for k, at := range lay.at {
		sub := req.InGroupAt(k, tr.nodesAt(at), nil)
		want, err := newUsageAt(tr, sub, at, nil)
		require.NoError(t, err)
		sc := &slotScratch{kept: lease, group: k, next: lay.above[k], nextAt: at, nodes: lay.indices[k]}
		// Narrowed into the kept buffers, eligibility reads as narrowed
		// into new slices.
		lent := req.InGroupAt(k, sc.nodes, sc.narrowed(len(req.Nodes)))
		for i := range sub.Members {
			require.Equal(t, sub.Members[i].Eligible, lent.Members[i].Eligible, "%s: group %d: member %d's narrowed eligibility", name, k, i)
		}
		got, err := newUsageAt(tr, lent, at, sc)
		require.NoError(t, err)
		if diff := cmp.Diff(want.slots, got.slots); diff != "" {
			t.Fatalf("%s: group %d: kept slots differ from a fresh count (-fresh,+kept):\n%s\n%s", name, k, diff, describeGroups(req))
		}
	}
}

// changeRequest changes req as a cluster changes between two plans, by
// the rules of placement.Request.StableFree: a vector is never written,
// a node that changes gets a new one.
func changeRequest(rng *rand.Rand, req *placement.Request) {
	for i := range req.Nodes {
		switch rng.IntN(6) {
		case 0: // the same capacity, in a new vector
			req.Nodes[i].Free = slices.Clone(req.Nodes[i].Free)
		case 1: // new capacity
			f := slices.Clone(req.Nodes[i].Free)
			for d := range f {
				f[d] = rng.Int64N(2*f[d] + 9)
			}
			req.Nodes[i].Free = f
		}
	}
	// Eligibility is filled in place (the gang plugin's Filter passes).
	for i := range req.Members {
		if e := req.Members[i].Eligible; e != nil {
			for n := range e {
				if rng.IntN(5) == 0 {
					e[n] = !e[n]
				}
			}
		}
	}
	if rng.IntN(8) == 0 { // a shape asks for something else
		m := &req.Members[rng.IntN(len(req.Members))]
		m.Request = slices.Clone(m.Request)
		m.Request[rng.IntN(len(m.Request))] = rng.Int64N(9)
	}
	if rng.IntN(8) == 0 { // a member gains its own eligibility
		m := &req.Members[rng.IntN(len(req.Members))]
		m.Eligible = make([]bool, len(req.Nodes))
		for n := range m.Eligible {
			m.Eligible[n] = rng.IntN(3) > 0
		}
	}
	if rng.IntN(10) == 0 { // the groups change, in a new slice
		req.Groups = randomGroups(rng, req)
	}
}

// A Request whose vectors may be written in place keeps nothing, and a
// second concurrent call counts afresh.
func TestKeptSlotsLease(t *testing.T) {
	p := newTestPlanner(t)
	req := randomRequest(rand.New(rand.NewPCG(1, 2)))
	req.Groups = randomGroups(rand.New(rand.NewPCG(3, 4)), req)
	lay := p.layouts.of(p.Tree(req), req.Groups)
	require.Nil(t, p.kept.lease(lay, req), "vectors that may change in place are not kept")
	req.StableFree = true
	first := p.kept.lease(lay, req)
	require.NotNil(t, first)
	require.Nil(t, p.kept.lease(lay, req), "one call at a time holds the kept counts")
	first.release()
	require.NotNil(t, p.kept.lease(lay, req), "a released lease can be taken again")
}
