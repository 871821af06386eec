package topology

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
)

// The heap hands out candidates in the order a sort gives, and rest
// lists what is left in that order, for any prefix taken.
func TestCandidateHeapOrdersLikeSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 3))
	for range 500 {
		n := rng.IntN(40)
		bound := make([]uint64, 64)
		for i := range bound {
			bound[i] = uint64(rng.IntN(5))
		}
		cands := rng.Perm(64)[:n]
		c32 := make([]int32, n)
		for i, k := range cands {
			c32[i] = int32(k)
		}
		compare := func(a, b int32) int {
			if c := cmp.Compare(bound[a], bound[b]); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		}
		want := slices.Clone(c32)
		slices.SortFunc(want, compare)
		h := newCandidateHeap(c32, compare)
		stop := rng.IntN(n + 1)
		got := make([]int32, 0, n)
		for range stop {
			if h.peek() != want[len(got)] {
				t.Fatalf("peek %d, want %d", h.peek(), want[len(got)])
			}
			got = append(got, h.pop())
		}
		got = append(got, h.rest()...)
		if diff := gocmp.Diff(want, got); diff != "" {
			t.Fatalf("heap order differs from the sort (-sort,+heap):\n%s", diff)
		}
		if h.len() != n-stop {
			t.Fatalf("%d left after %d pops of %d", h.len(), stop, n)
		}
	}
}
