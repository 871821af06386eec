package topology

import (
	"fmt"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// NodeFit orders the nodes of a request by the planner's best fit for one
// pod: the order in which the planner itself would try them for a gang of
// that pod alone. A node with less room for the pod comes first, then one
// in the fuller clique, the fuller leaf and so on up to the cluster, then
// tree order (Tree.compareFit, the one domain order). Packing pods in this
// order fills what is already broken into and keeps whole domains whole at
// every level.
//
// A NodeFit belongs to its caller: it reads the request's free vectors once,
// when it is made.
type NodeFit struct {
	u *usage
}

// NodeFit counts the room for req's accelerated members, which must all ask
// for the same vector (one pod, or identical pods), on every node of req and
// in every domain above them. Room counts free capacity only, whatever a
// member's Eligible says is left out: a domain's free GPUs make it less
// whole whether or not this pod may use them.
func (p *Planner) NodeFit(req *placement.Request) (*NodeFit, error) {
	t := p.Tree(req)
	u, err := shapesOf(t, req, false)
	if err != nil {
		return nil, err
	}
	if len(u.bound) != 1 {
		return nil, fmt.Errorf("node fit of %s: %d shapes of accelerated members, want 1", req.Gang, len(u.bound))
	}
	u.bound[0].eligible = nil
	u.countSlots(0, int32(len(t.node)), nil)
	return &NodeFit{u: u}, nil
}

// Room is how many of the pods fit on node i (an index into the request's
// nodes) in its free capacity.
func (f *NodeFit) Room(i int) int64 {
	return f.u.room[0][f.u.tree.pos[i]]
}

// Compare orders nodes i and j (indices into the request's nodes) by best
// fit: negative when i comes first. It is a total order.
func (f *NodeFit) Compare(i, j int) int {
	t := f.u.tree
	return f.u.compareFit(0, t.pos[i], t.pos[j])
}
