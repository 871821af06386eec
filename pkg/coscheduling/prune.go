package coscheduling

import (
	"context"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Running every Filter plugin on every node, for each template, is what a
// plan costs most on a large cluster (issue 18). Most of those nodes
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

// roomyFirst runs the templates' Filter plugins on the roomy nodes of req
// (see roomy) and returns what runs them on the rest. It runs them on every
// node and returns nil when pruning does not apply: no template left to
// Filter, a template whose plans are verified, or no node to spare. gens
// are nodeInfos' generations now, or nil (filterKnown).
//
// done ends the pass's use of what it found roomy: the caller calls it once
// it no longer calls rest.
func (pl *Plugin) roomyFirst(ctx context.Context, templates []*template, nodeInfos []fwk.NodeInfo, gens []int64, req *placement.Request) (rest, done func()) {
	if pl.noPrune || !prunable(templates) {
		pl.filterKnown(ctx, templates, nodeInfos, gens, nil)
		return nil, func() {}
	}
	room, done := pl.snapshot.Roomy(req)
	spare := 0
	for _, ok := range room {
		if !ok {
			spare++
		}
	}
	if spare == 0 {
		pl.filterKnown(ctx, templates, nodeInfos, gens, nil)
		return nil, done
	}
	pl.filterKnown(ctx, templates, nodeInfos, gens, func(i int) bool { return room[i] })
	return func() {
		pl.filterKnown(ctx, templates, nodeInfos, gens, func(i int) bool { return !room[i] })
	}, done
}

// prunable reports whether the templates' Filter plugins may run on roomy
// nodes first: some are still to run, and none is verified member by
// member (feasiblePlan).
func prunable(templates []*template) bool {
	pending := false
	for _, t := range templates {
		if t.relational {
			return false
		}
		pending = pending || t.pending
	}
	return pending
}

// someIneligible reports whether a template that PreFilter let through has
// no eligible node yet: before that is explained, Filter must have run on
// every node.
func someIneligible(templates []*template) bool {
	for _, t := range templates {
		if t.rejected == nil && !anyTrue(t.eligible) {
			return true
		}
	}
	return false
}
