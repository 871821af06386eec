package placement

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// hierarchyRequest is a request of n members and the given anchors.
func hierarchyRequest(n int, anchors []int, root *Subgroup) *Request {
	req := &Request{Gang: "ns/g", Anchors: anchors, Hierarchy: root}
	for i := range n {
		req.Members = append(req.Members, Member{Name: fmt.Sprint("ns/m", i), Rank: i})
	}
	return req
}

func TestValidateHierarchy(t *testing.T) {
	leaf := func(name string, members ...int) Subgroup { return Subgroup{Name: name, Members: members} }
	deep := leaf("5", 0)
	for i := 4; i >= 0; i-- {
		deep = Subgroup{Name: fmt.Sprint(i), Children: []Subgroup{deep}}
	}
	tests := []struct {
		name    string
		req     *Request
		wantErr []string
	}{
		{name: "no hierarchy", req: hierarchyRequest(2, nil, nil)},
		{
			name: "segments",
			req: hierarchyRequest(4, nil, &Subgroup{Children: []Subgroup{
				{Name: "a", Policy: Policy{Level: "l", Required: true}, Members: []int{0, 1}},
				{Name: "b", Members: []int{2, 3}},
			}}),
		},
		{
			name: "a root that is a leaf, anchored",
			req:  hierarchyRequest(1, []int{7}, &Subgroup{Members: []int{0}, Anchors: []int{0}}),
		},
		{
			name: "members twice, out of range and missing",
			req: hierarchyRequest(3, nil, &Subgroup{Children: []Subgroup{
				leaf("a", 0, 1), leaf("b", 1, 5),
			}}),
			wantErr: []string{
				`hierarchy.children[1] ("b"): member 1 is also in hierarchy.children[0] ("a"); each is in exactly one subgroup`,
				`hierarchy.children[1] ("b"): member 5 does not exist; the request has 3`,
				`member 2 (ns/m2) is in no subgroup`,
			},
		},
		{
			name: "anchors in no subgroup",
			req:  hierarchyRequest(1, []int{3, 4}, &Subgroup{Children: []Subgroup{{Name: "a", Members: []int{0}, Anchors: []int{1}}}}),
			wantErr: []string{
				`anchor 0 (node 3) is in no subgroup`,
			},
		},
		{
			name: "members beside children, and an empty leaf",
			req: hierarchyRequest(2, nil, &Subgroup{Members: []int{0}, Children: []Subgroup{
				leaf("a", 1), {Name: "b"},
			}}),
			wantErr: []string{
				`hierarchy: has both children and members or anchors; only leaves hold members`,
				`hierarchy.children[1] ("b"): has no members, anchors or children; leave out subgroups with nothing to place`,
			},
		},
		{
			name: "required without a level, and a root policy that disagrees",
			req: func() *Request {
				req := hierarchyRequest(1, nil, &Subgroup{Policy: Policy{Level: "x"}, Children: []Subgroup{
					{Name: "a", Policy: Policy{Required: true}, Members: []int{0}},
				}})
				req.Policy = Policy{Level: "y"}
				return req
			}(),
			wantErr: []string{
				`hierarchy: the root's policy {Level:x Required:false} differs from the gang's {Level:y Required:false}; leave it empty`,
				`hierarchy.children[0] ("a"): a required policy needs a level`,
			},
		},
		{
			name:    "too deep",
			req:     hierarchyRequest(1, nil, &deep),
			wantErr: []string{`hierarchy.children[0].children[0].children[0].children[0].children[0] ("5"): the hierarchy nests 6 levels deep; at most 5`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.req.ValidateHierarchy()
			if len(tc.wantErr) == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			if diff := cmp.Diff(tc.wantErr, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("errors (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestSubgroups(t *testing.T) {
	req := hierarchyRequest(5, []int{9, 9}, &Subgroup{Name: "job", Children: []Subgroup{
		{Name: "a", Children: []Subgroup{
			{Name: "a0", Members: []int{3}, Anchors: []int{1}},
			{Members: []int{0, 1}},
		}},
		{Name: "b", Members: []int{4, 2}, Anchors: []int{0}},
	}})
	require.NoError(t, req.ValidateHierarchy())
	refs := req.Subgroups()
	type row struct {
		Label            string
		Parent, Depth    int
		Members, Anchors []int
	}
	var got []row
	for _, r := range refs {
		got = append(got, row{r.Label(), r.Parent, r.Depth, r.Members, r.Anchors})
	}
	want := []row{
		{"job", -1, 0, []int{0, 1, 2, 3, 4}, []int{0, 1}},
		{"a", 0, 1, []int{0, 1, 3}, []int{1}},
		{"a0", 1, 2, []int{3}, []int{1}},
		{"hierarchy.children[0].children[1]", 1, 2, []int{0, 1}, nil},
		{"b", 0, 1, []int{2, 4}, []int{0}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("subgroups (-want,+got):\n%s", diff)
	}
	require.Same(t, &req.Hierarchy.Children[1], refs[4].Subgroup)
	require.Nil(t, hierarchyRequest(1, nil, nil).Subgroups())
}
