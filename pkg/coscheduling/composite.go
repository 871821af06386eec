package coscheduling

import (
	"context"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Admission units. The plugin gathers, plans, holds and releases one unit
// at a time, and the ledger keeps its state (claims, reservations, the head
// hold, backoff, gated members) under the unit's key:
//   - a gang (a PodGroup of either API) is its own unit;
//   - a native PodGroup under a gang CompositePodGroup belongs to the unit
//     of the highest gang composite above it (gang.RootOf): the whole tree
//     starts together, at least minGroupCount children each with at least
//     its own quorum (gang.TreeQuorumOf, gang.Admit), in one plan whose
//     hierarchy (gang.Tree.Hierarchy) holds the composite's topology for the
//     whole and each child's for itself;
//   - under basic composites only, each PodGroup is its own unit, as
//     kube-scheduler lets such children go independently.
//
// A unit rooted at a composite has a Spec of its own (gang.Tree.Spec): its
// Events go to the composite, its quorum counts children.

// unitOf returns the key of the admission unit the pod belongs to, if it
// belongs to a gang: the one answer every extension point keys its state by.
func (pl *Plugin) unitOf(pod *v1.Pod) (gang.Key, bool) {
	key, ok := gang.Of(pod)
	if !ok {
		return key, false
	}
	return pl.unitOfGang(key), true
}

// unitOfGang returns the unit of the gang key names. A PodGroup whose
// hierarchy cannot be read (a missing parent, a cycle) is its own unit
// until it can: spec then holds its members back with an Event that names
// the fix.
func (pl *Plugin) unitOfGang(key gang.Key) gang.Key {
	if key.API != gang.Native {
		return key
	}
	root, err := pl.sources.RootOf(key)
	if err != nil {
		return key
	}
	return root
}

// compositeSpec reads a composite unit: its tree and the Spec the plugin
// admits it as. A tree that cannot be honoured gets an Event on its root
// composite, with the fix, and the status to reject with.
func (pl *Plugin) compositeSpec(pod *v1.Pod, key gang.Key) (*gang.Tree, *gang.Spec, *fwk.Status) {
	tree, err := pl.sources.Tree(key)
	if err != nil {
		return nil, nil, pl.badHierarchy(pod, key, nil, err)
	}
	return tree, tree.Spec(), nil
}

// checkParent checks the hierarchy above a native PodGroup that names a
// parent but is its own unit: either only basic composites are above it,
// or its hierarchy is broken, which its members must not run past.
func (pl *Plugin) checkParent(pod *v1.Pod, spec *gang.Spec) *fwk.Status {
	if spec.Parent == "" {
		return nil
	}
	if _, err := pl.sources.RootOf(spec.Key); err != nil {
		return pl.badHierarchy(pod, spec.Key, spec.Ref, err)
	}
	return nil
}

// badHierarchy records why a hierarchy cannot be admitted, on the object
// that names the fix (ref; else the composite key names, else the pod),
// and returns the status to reject its members with. Nothing is lost: the
// members wait, and the change that fixes the hierarchy releases them.
func (pl *Plugin) badHierarchy(pod *v1.Pod, key gang.Key, ref *v1.ObjectReference, err error) *fwk.Status {
	reason := ReasonInvalidPodGroup
	switch {
	case errors.Is(err, gang.ErrMissingParent), apierrors.IsNotFound(err):
		reason = ReasonPodGroupNotFound
	case errors.Is(err, gang.ErrNotWatched):
		reason = ReasonNativePodGroupsIgnored
	case !errors.Is(err, gang.ErrInvalidHierarchy):
		return fwk.AsStatus(err)
	}
	if ref == nil && key.API == gang.Composite {
		if c, cerr := pl.sources.Composite(key); cerr == nil {
			ref = c.Ref
		}
	}
	msg := fmt.Sprintf("%v; until then the members of %s wait", err, key)
	if ref != nil {
		pl.events.Record("hierarchy/"+string(ref.UID)+"/"+reason, ref, pod, v1.EventTypeWarning, reason, msg)
	} else {
		pl.events.pod(pod, v1.EventTypeWarning, reason, "%s", msg)
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("hierarchy of %s: %v", key, err))
}

// treeMembers lists the live members of every PodGroup of a tree, in tree
// order and by rank within each PodGroup.
func (pl *Plugin) treeMembers(tree *gang.Tree) ([]*v1.Pod, error) {
	var out []*v1.Pod
	for _, i := range tree.Leaves() {
		ms, err := gang.Members(pl.podIndex, tree.Nodes[i].Key)
		if err != nil {
			return nil, err
		}
		gang.SortByRank(ms)
		out = append(out, ms...)
	}
	return out, nil
}

// byLeaf splits a unit's members by the PodGroup each belongs to.
func byLeaf(members []*v1.Pod) map[gang.Key][]*v1.Pod {
	out := map[gang.Key][]*v1.Pod{}
	for _, p := range members {
		if k, ok := gang.Of(p); ok {
			out[k] = append(out[k], p)
		}
	}
	return out
}

// treeQuorum is TreeQuorumOf over the unit's tree: each PodGroup counted
// from its own members (and its own succeeded ones), with the reservations
// the unit's attempt made.
func (pl *Plugin) treeQuorum(unit gang.Key, tree *gang.Tree, members []*v1.Pod) []gang.GroupQuorum {
	of := byLeaf(members)
	return gang.TreeQuorumOf(tree, func(leaf gang.Key) gang.Census { return pl.censusOf(unit, leaf, of[leaf]) })
}

// quorum is the unit's quorum, from pkg/gang's rules: QuorumOf for a gang,
// TreeQuorumOf at the root for a composite (whose Need, Missing and Absent
// count children). A composite whose tree cannot be read has none.
func (pl *Plugin) quorum(spec *gang.Spec, members []*v1.Pod) gang.GroupQuorum {
	if spec.Key.API != gang.Composite {
		c := pl.census(spec.Key, members)
		return gang.GroupQuorum{Quorum: gang.QuorumOf(spec.MinMember, c), Need: spec.MinMember, Census: c}
	}
	tree, err := pl.sources.Tree(spec.Key)
	if err != nil {
		return gang.GroupQuorum{Quorum: gang.Quorum{Missing: spec.MinMember, Absent: spec.MinMember}, Need: spec.MinMember}
	}
	return pl.treeQuorum(spec.Key, tree, members)[0]
}

// toPlan returns the members to plan for the unit's next attempt, in rank
// order within each PodGroup: for a gang the next Missing pending members
// (for a segmented gang, those of its first whole segments: startSegments);
// for a composite, the pending members that bring each PodGroup gang.Admit
// chose to its own quorum. only, if set, narrows a composite's PodGroups to
// the one a member of a running composite belongs to. The status says what
// the unit still waits for.
func (pl *Plugin) toPlan(spec *gang.Spec, members []*v1.Pod, q gang.GroupQuorum, only *gang.Key) ([]*v1.Pod, *fwk.Status) {
	key := spec.Key
	if batch, status, ok := pl.startSegments(spec, members, q.Missing); ok {
		return batch, status
	}
	if key.API != gang.Composite {
		pending := pl.pending(key, members)
		if len(pending) < int(q.Missing) {
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
				fmt.Sprintf("waiting for members of PodGroup %s: %d more must be placed but %d are pending", key, q.Missing, len(pending)))
		}
		gang.SortByRank(pending)
		return pending[:q.Missing], nil
	}
	tree, err := pl.sources.Tree(key)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	gq := pl.treeQuorum(key, tree, members)
	adm := gang.Admit(tree, gq)
	if !adm.Ready {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, waitingForChildren(spec, gq[0]))
	}
	of := byLeaf(pl.pending(key, members))
	var out []*v1.Pod
	for _, i := range adm.Plan {
		n := &tree.Nodes[i]
		if only != nil && n.Key != *only {
			continue
		}
		pending := of[n.Key]
		if len(pending) < int(gq[i].Missing) {
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
				fmt.Sprintf("waiting for members of PodGroup %s under %s: %d more must be placed but %d are pending", n.Key, key, gq[i].Missing, len(pending)))
		}
		gang.SortByRank(pending)
		out = append(out, pending[:gq[i].Missing]...)
	}
	return out, nil
}

// waitingForChildren says what a composite unit waits for.
func waitingForChildren(spec *gang.Spec, q gang.GroupQuorum) string {
	present, _ := q.Counted(q.Need)
	return fmt.Sprintf("waiting for the PodGroups under CompositePodGroup %s: %d of minGroupCount %d have their members (%d PodGroups in all)",
		spec.Key, present, q.Need, q.Children.Total)
}

// shapeTree is shapeRequest for a composite unit: one hierarchy for the
// whole tree (gang.Tree.Hierarchy), with each PodGroup's own leaf built by
// gangHierarchy (its policy, its segments, its sharers), so that the
// composite's topology holds for the whole and each child's for itself.
// PodGroups with members placed already are in it too, so that their
// anchors stay in their own subgroup's domain.
func (pl *Plugin) shapeTree(spec *gang.Spec, members []*v1.Pod, d *dra.PassDemand, req *placement.Request, nodeInfos []fwk.NodeInfo) *fwk.Status {
	tree, err := pl.sources.Tree(spec.Key)
	if err != nil {
		return fwk.AsStatus(err)
	}
	req.Policy = *spec.Topology
	all, anchorOf, err := pl.anchorRequest(spec.Key, members, req, nodeInfos)
	if err != nil {
		return fwk.AsStatus(err)
	}
	of := byLeaf(all)
	var plan []int
	for _, i := range tree.Leaves() {
		if slices.ContainsFunc(of[tree.Nodes[i].Key], func(p *v1.Pod) bool { return planned(p, members) || anchored(p, anchorOf) }) {
			plan = append(plan, i)
		}
	}
	var status *fwk.Status
	req.Hierarchy = tree.Hierarchy(plan, func(i int) placement.Subgroup {
		leaf := tree.Nodes[i].Spec
		mine := of[leaf.Key]
		gang.SortByRank(mine)
		policy := pl.policyOf(leaf, mine)
		seg, st := pl.segmentsOf(leaf, mine, policy)
		if st != nil {
			status = cmpStatus(status, st)
			return placement.Subgroup{Name: leaf.Key.String()}
		}
		h, err := gangHierarchy(leaf.Key.String(), seg, policy, mine, members, anchorOf, d)
		if err != nil {
			pl.events.gang(spec, nil, v1.EventTypeWarning, ReasonInvalidPodGroup, "%v", err)
			status = cmpStatus(status, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gang %s: %v", leaf.Key, err)))
		}
		if h == nil {
			h = flatLeaf(leaf.Key.String(), policy, mine, members, anchorOf)
		}
		return *h
	})
	return status
}

// cmpStatus keeps the first failure.
func cmpStatus(first, next *fwk.Status) *fwk.Status {
	if first != nil {
		return first
	}
	return next
}

// planned reports whether p is among the members a request plans.
func planned(p *v1.Pod, members []*v1.Pod) bool {
	return slices.ContainsFunc(members, func(q *v1.Pod) bool { return q.UID == p.UID })
}

// anchored reports whether p is a placed member the request anchors.
func anchored(p *v1.Pod, anchorOf map[types.UID]int) bool {
	_, ok := anchorOf[p.UID]
	return ok
}

// flatLeaf is the subgroup of a PodGroup without segments or sharers: its
// planned members and its anchors under its own policy.
func flatLeaf(name string, policy placement.Policy, mine, members []*v1.Pod, anchorOf map[types.UID]int) *placement.Subgroup {
	g := &placement.Subgroup{Name: name, Policy: policy}
	for _, p := range mine {
		if i := slices.IndexFunc(members, func(q *v1.Pod) bool { return q.UID == p.UID }); i >= 0 {
			g.Members = append(g.Members, i)
		}
		if a, ok := anchorOf[p.UID]; ok {
			g.Anchors = append(g.Anchors, a)
		}
	}
	slices.Sort(g.Members)
	slices.Sort(g.Anchors)
	return g
}

// joining returns the members to plan for pod of a running unit: the pod
// alone (a replacement, an elastic extra, next to its placed siblings), its
// whole segment when that has not started (joinSegment), or,
// in a running composite, the members that bring the pod's PodGroup to its
// own quorum when it has not started yet: a child that joins a running
// composite late still starts whole.
func (pl *Plugin) joining(spec *gang.Spec, members []*v1.Pod, pod *v1.Pod) ([]*v1.Pod, *fwk.Status) {
	own, _ := gang.Of(pod)
	if batch, status, ok := pl.joinSegment(spec, members, pod); ok {
		return batch, status
	}
	if spec.Key.API != gang.Composite {
		return []*v1.Pod{pod}, nil
	}
	tree, err := pl.sources.Tree(spec.Key)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	gq := pl.treeQuorum(spec.Key, tree, members)
	leaf := slices.IndexFunc(tree.Nodes, func(n gang.Node) bool { return n.Key == own })
	if leaf < 0 || gq[leaf].Placed {
		return []*v1.Pod{pod}, nil
	}
	batch, status := pl.toPlan(spec, members, gq[0], &own)
	if status == nil && len(batch) == 0 {
		present, _ := gq[leaf].Counted(gq[leaf].Need)
		status = fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("waiting for members of PodGroup %s under running %s: %d/%d present", own, spec.Key, present, gq[leaf].Need))
	}
	return batch, status
}

// waitForChildren holds a composite unit's member until minGroupCount of
// its children gathered, each with its own quorum. A composite with fewer
// children than minGroupCount gets a Warning that names the fix: it can
// never start until one is made.
func (pl *Plugin) waitForChildren(ctx context.Context, pod *v1.Pod, spec *gang.Spec, q gang.GroupQuorum) *fwk.Status {
	msg := waitingForChildren(spec, q)
	if q.Children.Total < q.Need {
		pl.events.gang(spec, nil, v1.EventTypeWarning, ReasonInvalidPodGroup,
			"CompositePodGroup %s has %d PodGroups or composites under it but spec.schedulingPolicy.gang.minGroupCount %d: create the missing children "+
				"(each naming it in spec.parentCompositePodGroupName), or lower minGroupCount; until then none of its members start",
			spec.Key.Name, q.Children.Total, q.Need)
	} else {
		pl.events.gang(spec, pod, v1.EventTypeNormal, ReasonWaitingForMembers, "%s", msg)
	}
	klog.FromContext(ctx).V(5).Info("Composite has no quorum yet", "pod", klog.KObj(pod), "composite", spec.Key, "children", q.Children.Gathered, "minGroupCount", q.Need)
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
}

// ownerOf names the pod's admission unit in the ledger's preemptions
// (ledger.GangOwner), or the pod itself outside gangs: a composite
// preempts, and waits for its victims, as one.
func (pl *Plugin) ownerOf(pod *v1.Pod) string {
	if key, ok := pl.unitOf(pod); ok {
		return ledger.GangOwner(key)
	}
	return ledger.PodOwner(pod)
}

// reportLostChild is reportLostMember for a running composite: its quorum
// counts children at their own quorum, against minGroupCount.
func (pl *Plugin) reportLostChild(spec *gang.Spec, pod *v1.Pod, how string, q gang.GroupQuorum) {
	_, placed := q.Counted(q.Need)
	if q.Placed {
		pl.events.gang(spec, pod, v1.EventTypeNormal, ReasonMemberLost,
			"member %s on node %s %s; %d of minGroupCount %d child groups still have their quorum placed", pod.Name, pod.Spec.NodeName, how, placed, q.Need)
		return
	}
	pl.events.gang(spec, pod, v1.EventTypeWarning, ReasonMemberLost,
		"member %s on node %s %s: the composite runs below minGroupCount with %d of %d child groups at quorum (%d members running, %d waiting); replacements schedule next to it as they appear",
		pod.Name, pod.Spec.NodeName, how, placed, q.Need, q.Census.Bound+q.Census.Reserved, q.Census.Waiting)
}

// childReady reports whether a member of a running composite may bind now:
// its PodGroup has its own quorum placed, or is running already (a
// replacement binds next to its bound siblings, as in a running gang).
// Until then a child that joins late waits in Permit for its siblings, as
// the first children did for the whole tree.
func (pl *Plugin) childReady(unit gang.Key, members []*v1.Pod, pod *v1.Pod) bool {
	tree, err := pl.sources.Tree(unit)
	if err != nil {
		return true
	}
	own, _ := gang.Of(pod)
	leaf := slices.IndexFunc(tree.Nodes, func(n gang.Node) bool { return n.Key == own })
	if leaf < 0 {
		return true
	}
	q := pl.treeQuorum(unit, tree, members)[leaf]
	return q.Placed || q.Census.Bound > 0
}
