package placement

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

func TestInGroup(t *testing.T) {
	shared := []bool{true, false, true, true}
	req := &Request{
		Resources: []string{"nvidia.com/gpu"},
		Nodes:     make([]Node, 4),
		Members: []Member{
			{Name: "a", Accelerated: true, Eligible: shared},
			{Name: "b", Accelerated: true, Eligible: shared},
			{Name: "c", Accelerated: true},
			{Name: "d", Accelerated: true},
			{Name: "launcher", Eligible: shared},
		},
		Anchors: []int{0, 1, 2},
		Groups:  &Groups{Of: []int{0, 1, 0, 1}, Names: []string{"x", "y"}},
	}
	sub := req.InGroup(0)
	require.Nil(t, sub.Groups, "the copy is one group")
	if diff := cmp.Diff([]bool{true, false, true, false}, sub.Members[0].Eligible); diff != "" {
		t.Errorf("narrowed eligibility (-want,+got):\n%s", diff)
	}
	require.Same(t, &sub.Members[0].Eligible[0], &sub.Members[1].Eligible[0], "members that shared a slice share its narrowed copy")
	if diff := cmp.Diff([]bool{true, false, true, false}, sub.Members[2].Eligible); diff != "" {
		t.Errorf("a nil slice narrows to the group (-want,+got):\n%s", diff)
	}
	require.Same(t, &sub.Members[2].Eligible[0], &sub.Members[3].Eligible[0])
	require.Same(t, &shared[0], &sub.Members[4].Eligible[0], "loose members are not grouped")
	require.Equal(t, []int{0, 2}, sub.Anchors, "anchors outside the group are dropped")
	require.Equal(t, []bool{true, false, true, true}, shared, "the request is not modified")
	require.NotNil(t, req.Groups)
}

// TestInGroupAtMatchesNarrowingEveryNode checks InGroupAt, given a group's
// nodes in a random order, against narrowing each member's eligibility
// node by node, on random requests: members with and without eligibility,
// shared slices, loose members, anchors.
func TestInGroupAtMatchesNarrowingEveryNode(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 7))
	for round := range 200 {
		n, groups := 1+r.IntN(40), 1+r.IntN(4)
		req := &Request{Nodes: make([]Node, n), Groups: &Groups{Of: make([]int, n), Names: make([]string, groups)}}
		for i := range n {
			req.Groups.Of[i] = r.IntN(groups)
		}
		shared := [][]bool{nil}
		for range 2 {
			e := make([]bool, n)
			for i := range e {
				e[i] = r.IntN(3) > 0
			}
			shared = append(shared, e)
		}
		for m := range 1 + r.IntN(6) {
			req.Members = append(req.Members, Member{Name: fmt.Sprint(m), Accelerated: r.IntN(4) > 0, Eligible: shared[r.IntN(len(shared))]})
		}
		for range r.IntN(3) {
			req.Anchors = append(req.Anchors, r.IntN(n))
		}
		for k := range groups {
			var in []int
			for i, g := range req.Groups.Of {
				if g == k {
					in = append(in, i)
				}
			}
			r.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
			got := req.InGroupAt(k, in, nil)
			for m, member := range req.Members {
				want := member.Eligible
				if member.Accelerated {
					want = make([]bool, n)
					for i := range want {
						want[i] = (member.Eligible == nil || member.Eligible[i]) && req.Groups.Of[i] == k
					}
				}
				if diff := cmp.Diff(want, got.Members[m].Eligible); diff != "" {
					t.Fatalf("round %d, group %d, member %d (-want,+got):\n%s", round, k, m, diff)
				}
			}
			var anchors []int
			for _, a := range req.Anchors {
				if req.Groups.Of[a] == k {
					anchors = append(anchors, a)
				}
			}
			require.Equal(t, anchors, got.Anchors, "round %d, group %d", round, k)
			require.Nil(t, got.Groups)
		}
	}
}

func TestAnchorGroup(t *testing.T) {
	g := &Groups{Of: []int{0, 1, 1, 2}, Names: []string{"x", "y", "z"}}
	require.Equal(t, -1, (&Request{Groups: g}).AnchorGroup(), "no anchors")
	require.Equal(t, -1, (&Request{Anchors: []int{1}}).AnchorGroup(), "no groups")
	require.Equal(t, 1, (&Request{Groups: g, Anchors: []int{0, 1, 2}}).AnchorGroup(), "most anchors")
	require.Equal(t, 0, (&Request{Groups: g, Anchors: []int{3, 0}}).AnchorGroup(), "the lower group on a tie")
}

func TestGroupsValidate(t *testing.T) {
	require.NoError(t, (*Groups)(nil).Validate(3))
	require.False(t, (*Groups)(nil).Split())
	require.False(t, (&Groups{Of: []int{0, 0}, Names: []string{"x"}}).Split())
	require.ErrorContains(t, (&Groups{Of: []int{0}, Names: []string{"x", "y"}}).Validate(2), "groups cover 1 nodes, want 2")
	require.ErrorContains(t, (&Groups{Of: []int{0, 2}, Names: []string{"x", "y"}}).Validate(2), "node 1 is in group 2; there are 2 groups")
}

func TestNoGroupFits(t *testing.T) {
	g := &Groups{Names: []string{"a", "b", "c", "d", "e"}, Rule: "one GPU product", Relax: "example.com/mix: true lets it mix them"}
	err := g.NoGroupFits(4, []*FitError{
		{Placed: 1, Wanted: 4, Reason: "ra"},
		{Placed: 3, Wanted: 4, Reason: "rb"},
		nil,
		{Placed: 3, Wanted: 4, Reason: "rd"},
		{Placed: 0, Wanted: 4, Reason: "re"},
	})
	require.Equal(t, 3, err.Placed)
	require.Equal(t, 4, err.Wanted)
	require.Equal(t, "the gang's accelerated members must all run on nodes of one GPU product, and none of the 5 such groups of nodes holds them (4 tried): "+
		"b fits 3 of 4; d fits 3 of 4; a fits 1 of 4; and 1 more; example.com/mix: true lets it mix them", err.Reason)
}
