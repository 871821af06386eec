package eligibility

import (
	"slices"
	"sync"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// roomy says, node by node, whether one member of req fits in the node's
// free capacity: every resource the member asks for is there. A member that
// asks for nothing fits everywhere.
func roomy(req *placement.Request) []bool {
	out := make([]bool, len(req.Nodes))
	shapes := shapesOf(req)
	for i := range req.Nodes {
		out[i] = roomyOn(shapes, req.Nodes[i].Free)
	}
	return out
}

// shapesOf lists the distinct requests of req's members.
func shapesOf(req *placement.Request) []placement.Vector {
	var shapes []placement.Vector
	for i := range req.Members {
		r := req.Members[i].Request
		if !slices.ContainsFunc(shapes, func(s placement.Vector) bool { return slices.Equal(s, r) }) {
			shapes = append(shapes, r)
		}
	}
	return shapes
}

// roomyOn reports whether one of shapes fits in free once.
func roomyOn(shapes []placement.Vector, free placement.Vector) bool {
	for _, r := range shapes {
		if r.FitsIn(free) {
			return true
		}
	}
	return false
}

// roomyMemo keeps roomy's answer per node from one plan to the next, with
// the free vector it was read from (reading every node's vector
// again cost a plan a memory load per node). A node is read again when its
// vector is another one: the node view never writes a vector it lent
// (placement.Request.StableFree), so the same vector holds the same
// capacity; the memo holds the vectors, so their memory is not reused.
// All of it starts over when the members ask for other shapes or the
// nodes are others in number. Safe for concurrent use.
type roomyMemo struct {
	mu sync.Mutex
	// leased is set while a plan reads room (lend); no one writes the
	// memo meanwhile.
	leased bool
	shapes []placement.Vector
	free   []placement.Vector
	room   []bool
}

// Roomy says, node by node, whether one member of req fits in the node's
// free capacity (roomy), kept from one plan to the next: see roomyMemo.lend.
// The answer is the snapshot's own until done is called, and must not be
// written.
func (v *Snapshot) Roomy(req *placement.Request) (room []bool, done func()) {
	return v.room.lend(req)
}

// lend is roomy(req), read again only on nodes whose vector changed, when
// req's vectors are never written and no other plan holds the memo;
// otherwise roomy itself. The answer is the memo's own until done is
// called, and must not be written.
func (m *roomyMemo) lend(req *placement.Request) (room []bool, done func()) {
	if !req.StableFree {
		return roomy(req), func() {}
	}
	shapes := shapesOf(req)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.leased {
		return roomy(req), func() {}
	}
	if len(m.room) != len(req.Nodes) || !slices.EqualFunc(m.shapes, shapes, slices.Equal) {
		m.shapes = make([]placement.Vector, len(shapes))
		for i, r := range shapes {
			m.shapes[i] = slices.Clone(r)
		}
		m.free, m.room = make([]placement.Vector, len(req.Nodes)), make([]bool, len(req.Nodes))
	}
	for i := range req.Nodes {
		f := req.Nodes[i].Free
		if m.free[i] != nil && len(f) == len(m.free[i]) && (len(f) == 0 || &f[0] == &m.free[i][0]) {
			continue
		}
		m.free[i], m.room[i] = f, roomyOn(shapes, f)
	}
	m.leased = true
	return m.room, func() {
		m.mu.Lock()
		m.leased = false
		m.mu.Unlock()
	}
}
