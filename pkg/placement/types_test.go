package placement

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLabelsIDIsTheMapsIdentity checks LabelsID against reflect's pointer of
// the map: one map reads alike through any node holding it, another map
// with the same contents does not, and no map is nil.
func TestLabelsIDIsTheMapsIdentity(t *testing.T) {
	m := map[string]string{"a": "b"}
	same, other, none := Node{Labels: m}, Node{Labels: map[string]string{"a": "b"}}, Node{}
	n := Node{Labels: m}
	require.Equal(t, reflect.ValueOf(m).UnsafePointer(), n.LabelsID())
	require.Equal(t, n.LabelsID(), same.LabelsID())
	require.NotEqual(t, n.LabelsID(), other.LabelsID())
	require.Nil(t, none.LabelsID())
}

// NamedAs compares names, whether their bytes are shared or not.
func TestNodeNamedAs(t *testing.T) {
	n := Node{Name: "node-7"}
	apart := strings.Clone("node-7")
	for _, tc := range []struct {
		name string
		want bool
	}{{n.Name, true}, {apart, true}, {"node-8", false}, {"node-77", false}, {"", false}} {
		if got := n.NamedAs(tc.name); got != tc.want {
			t.Errorf("NamedAs(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}
