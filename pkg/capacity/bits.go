package capacity

import "math/bits"

// Bits is a set of device positions on one node: bit i stands for the
// node's i-th device in Inventory order. Nodes rarely publish more than 64
// devices, so most sets are one word.
type Bits []uint64

// set adds position i.
func (b *Bits) set(i int) {
	w := i / 64
	for len(*b) <= w {
		*b = append(*b, 0)
	}
	(*b)[w] |= 1 << (i % 64)
}

// Has reports whether position i is in the set.
func (b Bits) Has(i int) bool {
	w := i / 64
	return w < len(b) && b[w]&(1<<(i%64)) != 0
}

// Count is how many positions the set holds.
func (b Bits) Count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

// CountWithout is how many positions of b are not in o.
func (b Bits) CountWithout(o Bits) int {
	n := 0
	for i, w := range b {
		if i < len(o) {
			w &^= o[i]
		}
		n += bits.OnesCount64(w)
	}
	return n
}

// Intersects reports whether b and o share a position.
func (b Bits) Intersects(o Bits) bool {
	for i := range min(len(b), len(o)) {
		if b[i]&o[i] != 0 {
			return true
		}
	}
	return false
}

// Or returns the union of b and o as a new set.
func (b Bits) Or(o Bits) Bits {
	if len(o) > len(b) {
		b, o = o, b
	}
	out := make(Bits, len(b))
	copy(out, b)
	for i, w := range o {
		out[i] |= w
	}
	return out
}

// trim returns b without its trailing empty words, so that equal sets
// compare equal whatever their length.
func (b Bits) trim() Bits {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b
}
