package coscheduling

import (
	"context"
	"sync"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/gpu-gang/gpu-gang/pkg/contract"
)

// Most of what Filter costs a plan is spent again on nodes that did not
// change since the last plan of the same template (issue 18). Some Filter
// plugins judge a node by the pod and the node's NodeInfo alone: the node
// object (labels, taints, spec) and the pods on it, all of which move the
// scheduler cache's generation for the node. Their verdict on a node holds
// for as long as that generation does. So when every Filter plugin a
// template runs is one of those (contract.NodeOnlyFilter), the verdicts that let the
// template use a node are kept per template and node, stamped with the
// NodeInfo and its generation, and the node is not Filtered again until
// the stamp moves. Only passes are kept: a node that turns a template away
// is Filtered each time, so that the explanation counts its reason.

// maxVerdictKeys bounds the templates kept: each costs a stamp per node
// (24 bytes: some 8 MB for 16 templates on 20,000 nodes). When a new one
// would pass it, all are dropped, and the templates planned next fill it
// again.
const maxVerdictKeys = 16

// verdicts keeps, per template, the nodes its static Filter plugins let it
// use. Safe for concurrent use.
type verdicts struct {
	mu sync.Mutex
	// filters are the profile's Filter plugins, nil when the handle does
	// not say (no verdict is kept then).
	filters []string
	byKey   map[verdictKey][]stamp
}

// verdictKey is a template as its static Filter plugins see it: the pod's
// signature, the plugins it runs, and what GPUFleet's PreFilter read.
type verdictKey struct {
	sig    string
	runs   string
	inputs any
}

// stamp is a node on which a template passed Filter, as the NodeInfo was
// then; the zero stamp knows nothing.
type stamp struct {
	ni  fwk.NodeInfo
	gen int64
}

func newVerdicts(handle fwk.Handle) *verdicts {
	v := &verdicts{byKey: map[verdictKey][]stamp{}}
	if l, ok := handle.(interface{ ListPlugins() *config.Plugins }); ok {
		if ps := l.ListPlugins(); ps != nil {
			for _, p := range ps.Filter.Enabled {
				v.filters = append(v.filters, p.Name)
			}
		}
	}
	return v
}

// keyOf returns t's key, and false when a Filter plugin t runs is not
// static, or the inputs it reads cannot be told.
func (v *verdicts) keyOf(t *template) (verdictKey, bool) {
	if t.state == nil || v.filters == nil {
		return verdictKey{}, false
	}
	skip := t.state.GetSkipFilterPlugins()
	k := verdictKey{sig: t.sig}
	for _, name := range v.filters { // in the profile's order
		if skip.Has(name) {
			continue
		}
		inputsKey, ok := contract.NodeOnlyFilter(name)
		if !ok {
			return verdictKey{}, false
		}
		k.runs += name + ","
		if inputsKey == "" {
			continue
		}
		in, err := contract.ReadFilterInputs(t.state, inputsKey)
		if err != nil {
			return verdictKey{}, false
		}
		k.inputs = in
	}
	return k, true
}

// verdictsOf returns the plugin's verdicts, made on first use.
func (pl *Plugin) verdictsOf() *verdicts {
	pl.verdictsOnce.Do(func() { pl.verdicts = newVerdicts(pl.handle) })
	return pl.verdicts
}

// filterKnown is the plugin's filterTemplates, less the nodes whose
// kept verdict still holds for a template, which it marks eligible; it
// keeps the new passes. only selects the nodes as there. gens, when not
// nil, are nodeInfos' generations as the node view read them in this
// cycle (eligibility.Snapshot.Nodes): the kept verdicts are checked against them, not
// against every NodeInfo loaded again.
func (pl *Plugin) filterKnown(ctx context.Context, templates []*template, nodeInfos []fwk.NodeInfo, gens []int64, only func(i int) bool) {
	for _, t := range templates {
		if !t.pending {
			continue
		}
		vs := pl.verdictsOf()
		key, ok := vs.keyOf(t)
		if !ok {
			pl.filterTemplates(ctx, []*template{t}, nodeInfos, only)
			continue
		}
		// When every selected node is known, as between plans where nothing
		// changed, there is nothing to Filter or keep.
		known, need := vs.known(key, t, nodeInfos, gens, only)
		if !need {
			continue
		}
		unknown := func(i int) bool { return (only == nil || only(i)) && !known[i] }
		pl.filterTemplates(ctx, []*template{t}, nodeInfos, unknown)
		vs.keep(key, t, nodeInfos, unknown)
	}
}

// known marks eligible for t the selected nodes on which its kept verdict
// holds, and returns which they are, and whether some selected node is not
// among them (need: Filter must run). Nodes the gang's lessons exclude, or
// a PreFilter plugin left out, are never known: filterTemplates says why.
// gens are nodeInfos' generations now, or nil to read them.
func (v *verdicts) known(key verdictKey, t *template, nodeInfos []fwk.NodeInfo, gens []int64, only func(i int) bool) (out []bool, need bool) {
	out = make([]bool, len(nodeInfos))
	v.mu.Lock()
	defer v.mu.Unlock()
	stamps := v.byKey[key]
	kept := len(stamps) == len(nodeInfos)
	for i, ni := range nodeInfos {
		if only != nil && !only(i) {
			continue
		}
		if !kept || !v.holds(stamps[i], t, ni, gens, i) {
			need = true
			continue
		}
		out[i], t.eligible[i] = true, true
	}
	return out, need
}

// holds reports whether stamp s, kept for t on node i (ni), still holds:
// the NodeInfo and its generation (gens[i], or read when gens is nil) are
// those it was stamped with, and neither the gang's lessons, a PreFilter
// plugin nor an allocated claim (template.pinnedAway) leave the node out.
func (v *verdicts) holds(s stamp, t *template, ni fwk.NodeInfo, gens []int64, i int) bool {
	if s.ni != ni || gens != nil && s.gen != gens[i] || gens == nil && s.gen != ni.GetGeneration() {
		return false
	}
	if t.excluded.Len() > 0 || t.nodes != nil {
		name := ni.Node().Name
		if t.excluded.Has(name) || (t.nodes != nil && !t.nodes.Has(name)) {
			return false
		}
	}
	return len(t.pins) == 0 || t.pinnedAway(ni.Node()) == nil
}

// keep stamps the nodes filtered now (ran) with t's verdict: a pass is
// kept, anything else forgotten.
func (v *verdicts) keep(key verdictKey, t *template, nodeInfos []fwk.NodeInfo, ran func(i int) bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	stamps := v.byKey[key]
	if len(stamps) != len(nodeInfos) {
		if _, ok := v.byKey[key]; !ok && len(v.byKey) >= maxVerdictKeys {
			clear(v.byKey)
		}
		stamps = make([]stamp, len(nodeInfos))
		v.byKey[key] = stamps
	}
	for i, ni := range nodeInfos {
		if !ran(i) {
			continue
		}
		if t.eligible[i] {
			stamps[i] = stamp{ni: ni, gen: ni.GetGeneration()}
		} else {
			stamps[i] = stamp{}
		}
	}
}
