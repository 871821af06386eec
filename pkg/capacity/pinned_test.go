package capacity

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An allocated claim asks for no more devices, but the reader keeps the
// nodes its allocation reaches: the pod may run only there.
func TestReaderKeepsAllocatedClaimsNodes(t *testing.T) {
	// byName is a term per node, as drivers write it (a field selector
	// takes one value).
	byName := func(names ...string) *v1.NodeSelector {
		out := &v1.NodeSelector{}
		for _, n := range names {
			out.NodeSelectorTerms = append(out.NodeSelectorTerms, v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{{
				Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{n}}}})
		}
		return out
	}
	byLabel := &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{
		Key: "rack", Operator: v1.NodeSelectorOpIn, Values: []string{"r1"}}}}}}
	nodes := []*v1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "n0", Labels: map[string]string{"rack": "r0"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"rack": "r1"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n2", Labels: map[string]string{"rack": "r1"}}},
	}
	tests := []struct {
		name     string
		selector *v1.NodeSelector
		// wantReach are the nodes that reach the claim; nil for no pin.
		wantReach []string
		wantNodes string
	}{
		{name: "one node", selector: byName("n1"), wantReach: []string{"n1"}, wantNodes: "node n1"},
		{name: "two nodes", selector: byName("n1", "n2"), wantReach: []string{"n1", "n2"}, wantNodes: "nodes n1, n2"},
		{name: "a label", selector: byLabel, wantReach: []string{"n1", "n2"}, wantNodes: "the nodes its allocation's nodeSelector selects"},
		{name: "network-attached devices", selector: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			allocated := claim("ns", "shared", gpuDriver, 1)
			allocated.Status.Allocation = &resourceapi.AllocationResult{NodeSelector: tt.selector}
			pending := claim("ns", "own", gpuDriver, 2)
			pd, err := newObjects([]*resourceapi.DeviceClass{gpuClass(false)}, allocated, pending).reader().
				Pod(podWithClaims("ns", "p", "shared", "own"))
			require.NoError(t, err)
			require.Len(t, pd.Claims, 1, "the allocated claim asks for nothing more")
			require.Equal(t, "own", pd.Claims[0].Name.Name)
			if tt.wantReach == nil {
				require.Empty(t, pd.Pinned)
				return
			}
			require.Len(t, pd.Pinned, 1)
			pin := pd.Pinned[0]
			require.Equal(t, "ns/shared", pin.Name.String())
			var reach []string
			for _, n := range nodes {
				if pin.Reaches(n) {
					reach = append(reach, n.Name)
				}
			}
			if diff := cmp.Diff(tt.wantReach, reach); diff != "" {
				t.Errorf("nodes that reach the claim (-want,+got):\n%s", diff)
			}
			require.Equal(t, tt.wantNodes, pin.Nodes())
			require.Equal(t, "ResourceClaim ns/shared is allocated to devices of "+tt.wantNodes, pin.Describe())
		})
	}
}
