package topology

import "slices"

// candidateHeap hands out candidate domains in the order of compare, a
// total order, smallest first. pick stops at the first candidate whose
// bound cannot beat the winner, so a heap costs it the candidates once
// plus a logarithm per candidate taken, where sorting them all cost a
// logarithm per candidate (hundreds of leaves at 20,000 nodes).
type candidateHeap struct {
	k       []int32
	compare func(a, b int32) int
}

// newCandidateHeap heaps a copy of cands.
func newCandidateHeap(cands []int32, compare func(a, b int32) int) *candidateHeap {
	h := &candidateHeap{k: slices.Clone(cands), compare: compare}
	for i := len(h.k)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
	return h
}

func (h *candidateHeap) len() int { return len(h.k) }

// peek is the smallest candidate left; the heap must not be empty.
func (h *candidateHeap) peek() int32 { return h.k[0] }

// pop removes the smallest candidate left.
func (h *candidateHeap) pop() int32 {
	top, last := h.k[0], len(h.k)-1
	h.k[0] = h.k[last]
	h.k = h.k[:last]
	h.down(0)
	return top
}

// rest returns the candidates left, in order, leaving the heap as it is.
func (h *candidateHeap) rest() []int32 {
	out := slices.Clone(h.k)
	slices.SortFunc(out, h.compare)
	return out
}

func (h *candidateHeap) down(i int) {
	n := len(h.k)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if r := c + 1; r < n && h.compare(h.k[r], h.k[c]) < 0 {
			c = r
		}
		if h.compare(h.k[c], h.k[i]) >= 0 {
			return
		}
		h.k[i], h.k[c] = h.k[c], h.k[i]
		i = c
	}
}
