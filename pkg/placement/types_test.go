package placement

import (
	"reflect"
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
