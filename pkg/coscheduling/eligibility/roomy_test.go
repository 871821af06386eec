package eligibility

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// TestRoomyMemoMatchesRoomy is the oracle for roomyMemo: through random
// sequences of plans (nodes whose capacity changes in a new vector, nodes
// given a new vector with the same capacity, members that ask for other
// shapes, clusters that grow or shrink), the memo's answer is roomy's,
// computed afresh.
func TestRoomyMemoMatchesRoomy(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 7))
	vec := func() placement.Vector { return placement.Vector{r.Int64N(3), r.Int64N(9)} }
	for c := range 100 {
		var m roomyMemo
		n := 1 + r.IntN(20)
		req := &placement.Request{StableFree: true, Resources: []string{"cpu", "gpu"}}
		for i := range n {
			req.Nodes = append(req.Nodes, placement.Node{Name: fmt.Sprint("n", i), Free: vec()})
		}
		req.Members = []placement.Member{{Request: vec()}, {Request: vec()}}
		for step := range 15 {
			for i := range req.Nodes {
				switch r.IntN(5) {
				case 0:
					req.Nodes[i].Free = slices.Clone(req.Nodes[i].Free)
				case 1:
					req.Nodes[i].Free = vec()
				}
			}
			if r.IntN(6) == 0 {
				req.Members[r.IntN(2)].Request = vec()
			}
			if r.IntN(10) == 0 {
				req.Nodes = append(req.Nodes, placement.Node{Name: "late", Free: vec()})
			}
			got, done := m.lend(req)
			require.Equal(t, roomy(req), got, "case %d step %d", c, step)
			// Lent, the memo is no one else's: another plan gets a fresh answer.
			other, otherDone := m.lend(req)
			require.Equal(t, roomy(req), other, "case %d step %d: while lent", c, step)
			require.NotSame(t, &got[0], &other[0], "case %d step %d: lent twice", c, step)
			otherDone()
			done()
		}
	}
}
