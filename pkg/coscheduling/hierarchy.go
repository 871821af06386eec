package coscheduling

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// Hierarchies that change under an attempt. A unit rooted at a composite
// (composite.go) decides which members count together from the objects
// above their PodGroups. When one of those goes (a composite at any level,
// or a child PodGroup), or comes back as a new object of the same name,
// the members below it no longer belong to the unit that reserved for
// them: the pod alone can no longer say where its reservation counts. The
// ledger can (ledger.Ledger.Holders, by the pods' UIDs), and the units it
// names give back everything at once: waiting members are rejected and
// return their nodes, the plan's slots and any head hold end, and the
// members go back through PreEnqueue, where the hierarchy as it is now
// decides again.

// onCompositeChanged lets the members of the hierarchy a composite belongs
// to be looked at again: held ones through PreEnqueue (under the root's
// unit, and under each PodGroup's own, where a missing parent kept them),
// and unschedulable ones through a new cycle, since the queue hears no
// composite events.
func (pl *Plugin) onCompositeChanged(c *gang.CompositeSpec) {
	root, err := pl.sources.RootOf(c.Key)
	if err != nil {
		root = c.Key
	}
	pl.releaseGated(root)
	if tree, err := pl.sources.Tree(root); err == nil {
		for _, i := range tree.Leaves() {
			pl.releaseGated(tree.Nodes[i].Key)
		}
	}
	pl.activate(root)
}

// onCompositeUpdated is onCompositeChanged, after ending what units hold
// for the members below a composite whose place in the hierarchy changed
// under them: a new object of the same name (deleted and re-created while
// the informer was not watching), another parent, another policy.
func (pl *Plugin) onCompositeUpdated(old, c *gang.CompositeSpec) {
	if old.UID != c.UID || old.Parent != c.Parent || old.Gang != c.Gang {
		pl.hierarchyChanged(c.Key, fmt.Sprintf("%s above its members was re-created or changed its parent or policy", c.Key))
	}
	pl.onCompositeChanged(c)
}

// onCompositeDeleted ends what every unit holds for the members below a
// deleted composite, at any level: the unit it was the root of, or the one
// above it. Its members go back through PreEnqueue, where their PodGroups
// now name a missing parent.
func (pl *Plugin) onCompositeDeleted(c *gang.CompositeSpec) {
	pl.hierarchyChanged(c.Key, fmt.Sprintf("%s in its hierarchy was deleted", c.Key))
	pl.releaseGated(c.Key)
	pl.gangDeleted(c.Key)
}

// childDeleted ends what a unit holds for the members of a deleted
// PodGroup that named a parent: the composite above counted them, and they
// no longer have a gang. Their siblings give back their nodes and the tree
// plans again.
func (pl *Plugin) childDeleted(s *gang.Spec) {
	if s.Parent == "" {
		return
	}
	pl.releaseHolders([]gang.Key{s.Key}, fmt.Sprintf("PodGroup %s under it was deleted", s.Key))
}

// hierarchyChanged ends what units hold for the members of the PodGroups
// below the composite key names, which need not exist any more.
func (pl *Plugin) hierarchyChanged(key gang.Key, why string) {
	leaves, err := pl.sources.PodGroupsUnder(key)
	if err != nil {
		pl.logger.Error(err, "Cannot list the PodGroups under a changed composite; their units keep what they hold until their attempts end", "composite", key)
		return
	}
	pl.releaseHolders(leaves, why)
}

// releaseHolders ends, for each unit that holds something for a member of
// the PodGroups leaves names (ledger.Ledger.Holders), its attempt in flight
// and its head hold, and lets its members be looked at again.
func (pl *Plugin) releaseHolders(leaves []gang.Key, why string) {
	var uids []types.UID
	for _, leaf := range leaves {
		members, err := gang.Members(pl.podIndex, leaf)
		if err != nil {
			continue
		}
		for _, p := range members {
			uids = append(uids, p.UID)
		}
	}
	if len(uids) == 0 {
		return
	}
	ctx := klog.NewContext(context.Background(), pl.logger)
	for _, unit := range pl.ledger.Holders(uids) {
		pl.failGang(ctx, unit, ReasonGangRejected, why, false)
		pl.ledger.Head.Clear(unit)
		pl.releaseGated(unit)
		pl.activateBlocked()
		pl.activate(unit)
	}
}
