package eligibility

import (
	"context"
	"slices"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Running every Filter plugin on every node, for each template, is what a
// plan costs most on a large cluster. Most of those nodes
// cannot take a single member anyway: their free capacity, less what other
// gangs hold and nominated pods ask for, is short of every member's
// request. Whether a member may run on such a node changes no plan: the
// planners count a node's slots only where a member fits (topology's
// fitCount), and place members only there. So a plan is first made with
// Filter run on the roomy nodes alone, the others read as not eligible.
//
// A plan that succeeds that way is the plan the full scan gives: every node
// it uses is roomy, and no node it skipped had a slot to count. When it
// does not succeed, or a template finds no eligible node, the explanation
// and the head hold need every node's verdict (explainIneligible,
// explainNoFit count the capacity that can free up): Filter then runs on
// the rest and the gang is planned again, as if the first pass had been
// whole. Plans that are verified member by member (relational templates)
// learn lessons from each failure and are not pruned: their history would
// differ between the passes.

// RoomyFirst runs the templates' Filter plugins on the roomy nodes of req
// (see Snapshot.Roomy) and returns what runs them on the rest. It runs them on every
// node and returns nil when pruning does not apply: no template left to
// Filter, a template whose plans are verified, or no node to spare. gens
// are nodeInfos' generations now, or nil (FilterKnown). prune false runs Filter on every
// node first, as the plugin's tests compare.
//
// done ends the pass's use of what it found roomy: the caller calls it once
// it no longer calls rest.
func (r *Runner) RoomyFirst(ctx context.Context, snapshot *Snapshot, prune bool, templates []*Template, nodeInfos []fwk.NodeInfo, gens []int64, req *placement.Request) (rest, done func()) {
	if !prune || !prunable(templates) {
		r.FilterKnown(ctx, templates, nodeInfos, gens, All)
		return nil, func() {}
	}
	room, done := snapshot.Roomy(req)
	spare := 0
	for _, ok := range room {
		if !ok {
			spare++
		}
	}
	if spare == 0 {
		r.FilterKnown(ctx, templates, nodeInfos, gens, All)
		return nil, done
	}
	r.FilterKnown(ctx, templates, nodeInfos, gens, Where(room, true))
	return func() {
		r.FilterKnown(ctx, templates, nodeInfos, gens, Where(room, false))
	}, done
}

// prunable reports whether the templates' Filter plugins may run on roomy
// nodes first: some are still to run, and none is verified member by
// member (feasiblePlan).
func prunable(templates []*Template) bool {
	pending := false
	for _, t := range templates {
		if t.Relational {
			return false
		}
		pending = pending || t.Pending
	}
	return pending
}

// SomeIneligible reports whether a template that PreFilter let through has
// no eligible node yet: before that is explained, Filter must have run on
// every node.
func SomeIneligible(templates []*Template) bool {
	for _, t := range templates {
		if t.Rejected == nil && !slices.Contains(t.Eligible, true) {
			return true
		}
	}
	return false
}
