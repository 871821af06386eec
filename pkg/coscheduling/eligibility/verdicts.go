package eligibility

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/gpu-gang/gpu-gang/pkg/contract"
)

// Most of what Filter costs a plan is spent again on nodes that did not
// change since the last plan of the same template. Some Filter
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

// VerdictCache keeps, per template, the nodes its static Filter plugins
// let it use. Safe for concurrent use.
type VerdictCache struct {
	mu sync.Mutex
	// filters are the profile's Filter plugins, nil when the handle does
	// not say (no verdict is kept then).
	filters []string
	byKey   map[VerdictKey][]stamp
}

// VerdictKey is a template as its static Filter plugins see it: the pod's
// signature, the plugins it runs, and what GPUFleet's PreFilter read.
type VerdictKey struct {
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

func newVerdictCache(handle fwk.Handle) *VerdictCache {
	v := &VerdictCache{byKey: map[VerdictKey][]stamp{}}
	if l, ok := handle.(interface{ ListPlugins() *config.Plugins }); ok {
		if ps := l.ListPlugins(); ps != nil {
			for _, p := range ps.Filter.Enabled {
				v.filters = append(v.filters, p.Name)
			}
		}
	}
	return v
}

// KeyOf returns t's key, and false when a Filter plugin t runs is not
// static, or the inputs it reads cannot be told.
func (v *VerdictCache) KeyOf(t *Template) (VerdictKey, bool) {
	if t.State == nil || v.filters == nil {
		return VerdictKey{}, false
	}
	skip := t.State.GetSkipFilterPlugins()
	k := VerdictKey{sig: t.Sig}
	for _, name := range v.filters { // in the profile's order
		if skip.Has(name) {
			continue
		}
		inputsKey, ok := contract.NodeOnlyFilter(name)
		if !ok {
			return VerdictKey{}, false
		}
		k.runs += name + ","
		if inputsKey == "" {
			continue
		}
		in, err := contract.ReadFilterInputs(t.State, inputsKey)
		if err != nil {
			return VerdictKey{}, false
		}
		k.inputs = in
	}
	return k, true
}

// Verdicts returns the runner's kept verdicts, made on first use.
func (r *Runner) Verdicts() *VerdictCache {
	r.keptVerdictsOnce.Do(func() { r.keptVerdicts = newVerdictCache(r.handle) })
	return r.keptVerdicts
}

// FilterKnown is Filter, less the nodes whose
// kept verdict still holds for a template, which it marks eligible; it
// keeps the new passes. only selects the nodes as there. gens, when not
// nil, are nodeInfos' generations as the node view read them in this
// cycle (Snapshot.Nodes): the kept verdicts are checked against them, not
// against every NodeInfo loaded again.
func (r *Runner) FilterKnown(ctx context.Context, templates []*Template, nodeInfos []fwk.NodeInfo, gens []int64, only Selection) {
	for _, t := range templates {
		if !t.Pending {
			continue
		}
		vs := r.Verdicts()
		key, ok := vs.KeyOf(t)
		if !ok {
			r.Filter(ctx, []*Template{t}, nodeInfos, only)
			continue
		}
		// When every selected node is known, as between plans where nothing
		// changed, there is nothing to Filter or keep.
		unknown, need := vs.known(key, t, nodeInfos, gens, only)
		if !need {
			continue
		}
		r.Filter(ctx, []*Template{t}, nodeInfos, Where(unknown, true))
		vs.keep(key, t, nodeInfos, Where(unknown, true))
	}
}

// known marks eligible for t the selected nodes on which its kept verdict
// holds, and returns the selected nodes on which none does (unknown, nil
// when every one is known), and whether there are any (need: Filter must
// run). Nodes the gang's lessons exclude, or a PreFilter plugin left out,
// are never known: Filter says why. gens are nodeInfos' generations now,
// or nil to read them.
//
// It runs on every node of every plan: the loop reads each node's stamp and
// generation, and calls out only where the template's lessons, its PreFilter
// nodes or its pins concern the node.
func (v *VerdictCache) known(key VerdictKey, t *Template, nodeInfos []fwk.NodeInfo, gens []int64, only Selection) (unknown []bool, need bool) {
	if gens == nil {
		gens = make([]int64, len(nodeInfos))
		readGenerations(nodeInfos, gens)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	stamps := v.byKey[key]
	kept := len(stamps) == len(nodeInfos)
	plain := t.Excluded.Len() == 0 && t.Nodes == nil && len(t.Pins) == 0
	for i, ni := range nodeInfos {
		if !only.Has(i) {
			continue
		}
		if !kept || stamps[i].gen != gens[i] || stamps[i].ni != ni || !plain && !t.keepsVerdict(ni.Node()) {
			if unknown == nil {
				unknown = make([]bool, len(nodeInfos))
			}
			unknown[i], need = true, true
			continue
		}
		t.Eligible[i] = true
	}
	return unknown, need
}

// keepsVerdict reports whether a kept verdict on node may stand for t:
// neither the gang's lessons, a PreFilter plugin nor an allocated claim
// (Template.PinnedAway) leave the node out.
func (t *Template) keepsVerdict(node *v1.Node) bool {
	if t.Excluded.Has(node.Name) || (t.Nodes != nil && !t.Nodes.Has(node.Name)) {
		return false
	}
	return len(t.Pins) == 0 || t.PinnedAway(node) == nil
}

// keep stamps the nodes filtered now (ran) with t's verdict: a pass is
// kept, anything else forgotten.
func (v *VerdictCache) keep(key VerdictKey, t *Template, nodeInfos []fwk.NodeInfo, ran Selection) {
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
		if !ran.Has(i) {
			continue
		}
		if t.Eligible[i] {
			stamps[i] = stamp{ni: ni, gen: ni.GetGeneration()}
		} else {
			stamps[i] = stamp{}
		}
	}
}
