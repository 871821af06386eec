package gang

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// compositeUnit is a gang composite's tree, admitted as one unit: its
// quorum counts children, each at its own quorum; its first attempt plans
// the children Admit chooses; a child that gathers once the composite runs
// joins it whole.
type compositeUnit struct {
	tree *Tree
	// spec is the tree's (Tree.Spec): the root composite's key, terms and
	// topology, its MinGroupCount as MinMember.
	spec    *Spec
	members []*v1.Pod
}

func (u *compositeUnit) Key() Key                  { return u.spec.Key }
func (u *compositeUnit) Spec() *Spec               { return u.spec }
func (u *compositeUnit) Members() []*v1.Pod        { return u.members }
func (u *compositeUnit) Validate() error           { return nil }
func (u *compositeUnit) Shape(s Shaper) error      { return s.ShapeTree(u.tree) }
func (u *compositeUnit) Quorum(v View) GroupQuorum { return u.treeQuorum(v)[0] }

func (u *compositeUnit) QuorumWith(v View, _ int32) Quorum { return u.Quorum(v).Quorum }

// treeQuorum is TreeQuorumOf over the unit's tree: each PodGroup counted
// from its own members (and its own succeeded ones), with the reservations
// the unit's attempt made.
func (u *compositeUnit) treeQuorum(v View) []GroupQuorum {
	of := byLeaf(u.members)
	return TreeQuorumOf(u.tree, func(leaf Key) Census { return v.Census(leaf, of[leaf]) })
}

// byLeaf splits a unit's members by the PodGroup each belongs to.
func byLeaf(members []*v1.Pod) map[Key][]*v1.Pod {
	out := map[Key][]*v1.Pod{}
	for _, p := range members {
		if k, ok := Of(p); ok {
			out[k] = append(out[k], p)
		}
	}
	return out
}

// leafOf returns the index in the tree of the PodGroup pod belongs to, or
// -1.
func (u *compositeUnit) leafOf(pod *v1.Pod) (Key, int) {
	own, _ := Of(pod)
	return own, slices.IndexFunc(u.tree.Nodes, func(n Node) bool { return n.Key == own })
}

// NextBatch: the pending members that bring each PodGroup Admit chose to
// its own quorum. The composite's quorum is counted afresh, child by child.
func (u *compositeUnit) NextBatch(v View, _ GroupQuorum) ([]*v1.Pod, error) {
	return u.nextBatch(v, nil)
}

// nextBatch is NextBatch narrowed, when only is set, to the PodGroup a
// member of the running composite belongs to.
func (u *compositeUnit) nextBatch(v View, only *Key) ([]*v1.Pod, error) {
	gq := u.treeQuorum(v)
	adm := Admit(u.tree, gq)
	if !adm.Ready {
		return nil, &WaitError{Reason: u.waitingForChildren(gq[0])}
	}
	of := byLeaf(pendingOf(v, u.members))
	var out []*v1.Pod
	for _, i := range adm.Plan {
		n := &u.tree.Nodes[i]
		if only != nil && n.Key != *only {
			continue
		}
		pending := of[n.Key]
		if len(pending) < int(gq[i].Missing) {
			return nil, waitFor("waiting for members of PodGroup %s under %s: %d more must be placed but %d are pending", n.Key, u.spec.Key, gq[i].Missing, len(pending))
		}
		SortByRank(pending)
		out = append(out, pending[:gq[i].Missing]...)
	}
	return out, nil
}

// Joining: a member of a child that has not started brings the child to
// its own quorum; any other joins alone.
func (u *compositeUnit) Joining(v View, pod *v1.Pod) ([]*v1.Pod, error) {
	gq := u.treeQuorum(v)
	own, leaf := u.leafOf(pod)
	if leaf < 0 || gq[leaf].Placed {
		return []*v1.Pod{pod}, nil
	}
	batch, err := u.nextBatch(v, &own)
	if err == nil && len(batch) == 0 {
		present, _ := gq[leaf].Counted(gq[leaf].Need)
		err = waitFor("waiting for members of PodGroup %s under running %s: %d/%d present", own, u.spec.Key, present, gq[leaf].Need)
	}
	return batch, err
}

// Ready: until its PodGroup has its own quorum placed, a child that joins
// late waits for its siblings, as the first children did for the whole
// tree; a replacement binds next to its bound siblings.
func (u *compositeUnit) Ready(v View, pod *v1.Pod) bool {
	_, leaf := u.leafOf(pod)
	if leaf < 0 {
		return true
	}
	q := u.treeQuorum(v)[leaf]
	return q.Placed || q.Census.Bound > 0
}

// VictimUnits: the composite whole when its disruptionMode is all or no
// child is above its MinGroupCount (ChildSurplusOf); otherwise its newest
// placed children above MinGroupCount, each a unit of its own (whose own
// Terms say whether it goes whole), and the rest of the composite as one.
func (u *compositeUnit) VictimUnits(v View, pods []*v1.Pod) map[Key][]*v1.Pod {
	key := u.spec.Key
	out := map[Key][]*v1.Pod{key: pods}
	q := u.treeQuorum(v)
	root := u.tree.Root()
	surplus := ChildSurplusOf(root.Composite, q[0])
	for i := len(root.Children) - 1; i >= 0 && surplus > 0; i-- {
		c := root.Children[i]
		if !q[c].Placed {
			continue
		}
		surplus--
		leaves := subtreeLeaves(u.tree, c)
		var rest, split []*v1.Pod
		for _, p := range out[key] {
			if k, _ := Of(p); slices.Contains(leaves, k) {
				split = append(split, p)
			} else {
				rest = append(rest, p)
			}
		}
		if len(split) == 0 {
			continue
		}
		out[u.tree.Nodes[c].Key] = split
		if out[key] = rest; len(rest) == 0 {
			delete(out, key)
		}
	}
	return out
}

// subtreeLeaves returns the keys of the PodGroups in the subtree of node i.
func subtreeLeaves(t *Tree, i int) []Key {
	if t.Nodes[i].Spec != nil {
		return []Key{t.Nodes[i].Key}
	}
	var out []Key
	for _, c := range t.Nodes[i].Children {
		out = append(out, subtreeLeaves(t, c)...)
	}
	return out
}

// Disruption: a composite goes whole, and began to run when its last
// member did.
func (u *compositeUnit) Disruption(_ View, pods []*v1.Pod) (int32, int) {
	return int32(len(pods)), 0
}

// waitingForChildren says what a composite unit waits for.
func (u *compositeUnit) waitingForChildren(q GroupQuorum) string {
	present, _ := q.Counted(q.Need)
	return fmt.Sprintf("waiting for the PodGroups under CompositePodGroup %s: %d of minGroupCount %d have their members (%d PodGroups in all)",
		u.spec.Key, present, q.Need, q.Children.Total)
}

// Gathering: a composite with fewer children than MinGroupCount can never
// start until one is made.
func (u *compositeUnit) Gathering(q GroupQuorum) Gathering {
	msg := u.waitingForChildren(q)
	if q.Children.Total < q.Need {
		return Gathering{Invalid: true, Status: msg, Event: fmt.Sprintf(
			"CompositePodGroup %s has %d PodGroups or composites under it but spec.schedulingPolicy.gang.minGroupCount %d: create the missing children "+
				"(each naming it in spec.parentCompositePodGroupName), or lower minGroupCount; until then none of its members start",
			u.spec.Key.Name, q.Children.Total, q.Need)}
	}
	return Gathering{Event: msg, Status: msg}
}

func (u *compositeUnit) WaitingToBind(q GroupQuorum) string {
	_, placed := q.Counted(q.Need)
	return fmt.Sprintf("waiting for %s: %d of minGroupCount %d child groups placed whole (%d members placed)", u.spec.Key, placed, q.Need, q.Census.Placed())
}

func (u *compositeUnit) Scheduled(c Census, summary string) string {
	return fmt.Sprintf("child groups placed whole, at least minGroupCount %d; %d members reserved, binding: %s", u.spec.MinMember, c.Placed(), summary)
}

// Lost: the composite's quorum counts children at their own quorum,
// against MinGroupCount.
func (u *compositeUnit) Lost(pod *v1.Pod, how string, q GroupQuorum) (bool, string) {
	_, placed := q.Counted(q.Need)
	if q.Placed {
		return false, fmt.Sprintf("member %s on node %s %s; %d of minGroupCount %d child groups still have their quorum placed", pod.Name, pod.Spec.NodeName, how, placed, q.Need)
	}
	return true, fmt.Sprintf("member %s on node %s %s: the composite runs below minGroupCount with %d of %d child groups at quorum (%d members running, %d waiting); "+
		"replacements schedule next to it as they appear",
		pod.Name, pod.Spec.NodeName, how, placed, q.Need, q.Census.Bound+q.Census.Reserved, q.Census.Waiting)
}

// NoSlot: the pod's PodGroup is not among the children this attempt
// places (MinGroupCount below their number); it joins once the composite
// runs.
func (u *compositeUnit) NoSlot(pod *v1.Pod) string {
	own, _ := Of(pod)
	return fmt.Sprintf("the attempt in flight of %s places other child groups; %s joins once the composite runs", u.spec.Key, own)
}
