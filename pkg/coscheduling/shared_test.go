package coscheduling

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
)

// TestSharersGroupMembersLinkedByClaims checks the groups PassDemand.Sharers makes:
// members linked through any chain of shared claims form one group, in
// rank order, with every claim they share, sorted; claims of one member
// alone make no group, and a gang without shared claims has none.
func TestSharersGroupMembersLinkedByClaims(t *testing.T) {
	claim := func(name string) capacity.ClaimDemand {
		return capacity.ClaimDemand{Name: types.NamespacedName{Namespace: "ns", Name: name}, UID: types.UID("uid-" + name)}
	}
	member := func(claims ...string) *capacity.PodDevices {
		pd := &capacity.PodDevices{}
		for _, c := range claims {
			pd.Claims = append(pd.Claims, claim(c))
		}
		return pd
	}
	name := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: n} }

	d := &dra.PassDemand{Gang: &capacity.Demand{}, Pods: []*capacity.PodDevices{
		member("a", "own-0"), member("own-1"), member("a"), nil, member("c", "b"), member("b"), member("c"),
	}}
	groups, claims := d.Sharers()
	require.Equal(t, [][]int{{0, 2}, {4, 5, 6}}, groups)
	require.Equal(t, [][]types.NamespacedName{{name("a")}, {name("b"), name("c")}}, claims)

	d = &dra.PassDemand{Gang: &capacity.Demand{}, Pods: []*capacity.PodDevices{member("own-0"), member("own-1"), nil}}
	groups, claims = d.Sharers()
	require.Empty(t, groups)
	require.Empty(t, claims)
}
