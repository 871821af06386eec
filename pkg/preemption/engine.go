package preemption

import (
	"context"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/topology"
)

// TreeSource gives the topology tree of a request's nodes. *topology.Planner
// is one, and shares its cached tree.
type TreeSource interface {
	Tree(req *placement.Request) *topology.Tree
}

// Engine decides gang-aware preemptions. It keeps no state between calls
// beyond what its planner and tree source cache, and is safe for concurrent
// use if they are.
type Engine struct {
	planner placement.Planner
	trees   TreeSource
	// budget bounds each Decide call's search (see defaultBudget).
	budget int64
}

// NewEngine returns an Engine that verifies every decision with planner and
// reads the topology from trees. With a *topology.Planner p, call
// NewEngine(p, p): the tree is then the one p plans on.
func NewEngine(planner placement.Planner, trees TreeSource) *Engine {
	return &Engine{planner: planner, trees: trees, budget: defaultBudget}
}

// Decide chooses the victims whose eviction lets the whole preemptor fit,
// the cheapest in the cost order of the package doc, and plans the preemptor
// on the capacity they free. It fails with a *NoPreemptionError when nothing
// should be evicted (the preemptor fits already, it may not preempt, or no
// set of lower-priority victims makes room the planner agrees with), with an
// error wrapping topology.ErrUnknownLevel when the policy names a level the
// tree lacks, and with other errors for a malformed Request or a cancelled
// context.
func (e *Engine) Decide(ctx context.Context, req *Request) (*Decision, error) {
	if err := validate(req); err != nil {
		return nil, fmt.Errorf("preemption request for %s: %w", req.Gang, err)
	}
	if req.PreemptionPolicy == v1.PreemptNever {
		return nil, &NoPreemptionError{Reason: ReasonPolicyNever,
			Message: fmt.Sprintf("%s has preemptionPolicy %s and evicts nothing", req.Gang, v1.PreemptNever)}
	}
	tree := e.trees.Tree(&req.Request)
	if !tree.BuiltFrom(req.Nodes) {
		return nil, fmt.Errorf("preemption request for %s: the topology tree was built from other nodes than the request's", req.Gang)
	}
	top := tree.NumLevels() - 1
	start := 0
	if req.Policy.Level != "" {
		l, err := tree.LevelIndex(req.Policy.Level)
		if err != nil {
			return nil, err
		}
		start = l
	}
	last := top
	if req.Policy.Required && req.Policy.Level != "" {
		last = start
	}
	p := newProblem(req, tree, e.planner, start, last, e.budget)
	switch {
	case p.looseOnly:
		// The planner places members without accelerators anywhere.
		p.first, p.last = top, top
	case len(req.Anchors) > 0:
		// The planner places replacements in the domain around their
		// running siblings, the tightest first, whatever the policy's
		// level (which, if required, still bounds the search).
		p.homes = tree.Homes(req.Anchors)
		p.first = 0
	}
	ds := &domainSearch{p: p}
	for l := p.first; l <= p.last; l++ {
		if err := p.searchLevel(ctx, ds, l); err != nil {
			return nil, err
		}
		if p.best != nil && p.best.cost.violations == 0 {
			break // any set at a looser level costs more
		}
	}
	switch {
	case p.best == nil && len(p.items) == 0:
		return nil, &NoPreemptionError{Reason: ReasonNoCandidates,
			Message: fmt.Sprintf("%s does not fit and no running pod has a priority below its %d", req.Gang, req.Priority)}
	case p.best == nil:
		return nil, &NoPreemptionError{Reason: ReasonNoVictimSet, Message: p.noVictimSet()}
	case len(p.best.items) == 0:
		return nil, &NoPreemptionError{Reason: ReasonFits,
			Message: fmt.Sprintf("%s fits without evicting anything", req.Gang)}
	}
	return p.decide(ctx, klog.FromContext(ctx))
}

// noVictimSet explains why no set works.
func (p *problem) noVictimSet() string {
	where := "any domain"
	switch {
	case p.first == p.top:
		where = "the cluster"
	case p.homes != nil:
		where = "the domains around its running members"
	case p.first == p.last:
		where = "any " + p.tree.LevelAt(p.first).Name + " (" + p.req.Policy.Level + " is required)"
	}
	return fmt.Sprintf("evicting pods of priority below %d would not make room for %s in %s", p.req.Priority, p.req.Gang, where)
}

// decide verifies the best set with the planner and describes it.
func (p *problem) decide(ctx context.Context, logger klog.Logger) (*Decision, error) {
	best := p.best
	plan, err := p.planner.Plan(ctx, p.freedRequest(best.items))
	if err != nil {
		var fe *placement.FitError
		if errors.As(err, &fe) {
			return nil, &NoPreemptionError{Reason: ReasonNotVerified,
				Message: fmt.Sprintf("the planner would not place %s even after the chosen evictions (%v); evicting nothing", p.req.Gang, err)}
		}
		return nil, fmt.Errorf("verifying the preemption plan for %s: %w", p.req.Gang, err)
	}
	level, dl, dk := p.landing(plan)
	c := best.cost
	c.level = int64(level)
	d := &Decision{
		Victims: p.victims(best.items),
		Plan:    plan,
		Domain: Domain{
			Level:     p.tree.LevelAt(dl).Key,
			LevelName: p.tree.LevelAt(dl).Name,
			Name:      p.tree.DomainName(dl, dk),
			Path:      p.tree.DomainPath(dl, dk),
		},
		Cost:  c.export(),
		Exact: !p.aborted,
	}
	d.Summary = p.summary(d)
	logger.V(4).Info("Preemption decided", "preemptor", p.req.Gang, "victims", d.Summary,
		"cost", d.Cost, "exact", d.Exact, "work", p.work)
	return d, nil
}

// planCost is what one planner call costs per node, in search steps: about
// a millisecond at 5,000 nodes, some 30,000 branch-and-bound steps.
const planCost = 6

// verify plans the preemptor on the capacity the items ids free and reports
// the level it lands at, and whether that is no looser than level l.
func (p *problem) verify(ctx context.Context, ids []int32, l int) (int, bool, error) {
	p.work += planCost * int64(len(p.req.Nodes))
	plan, err := p.planner.Plan(ctx, p.freedRequest(ids))
	if err != nil {
		var fe *placement.FitError
		if errors.As(err, &fe) {
			return 0, false, nil
		}
		return 0, false, err
	}
	level, _, _ := p.landing(plan)
	return level, level <= l, nil
}

// freedRequest is the preemptor's placement request with the pods of items
// ids gone. It copies the node list and the free vectors it changes; the
// Request's own are never written.
func (p *problem) freedRequest(ids []int32) *placement.Request {
	r := p.req.Request
	r.Nodes = slices.Clone(r.Nodes)
	copied := make(map[int]bool)
	for _, id := range ids {
		it := &p.items[id]
		un := &p.req.Units[it.unit]
		for i := range un.Pods {
			if it.pod >= 0 && int32(i) != it.pod {
				continue
			}
			n := un.Pods[i].Node
			if n < 0 {
				continue
			}
			if !copied[n] {
				r.Nodes[n].Free = r.Nodes[n].Free.Clone()
				copied[n] = true
			}
			r.Nodes[n].Free.Add(un.Pods[i].Request)
		}
	}
	return &r
}

// landing reads where plan puts the preemptor: the level its cost counts
// (that of the tightest domain, from the policy's level up, holding every
// member bound by topology; for a request with anchors, the tightest home
// domain holding them; the cluster when none is bound) and the tightest
// domain, from the same level up, holding the members the search fitted,
// named by level and index.
func (p *problem) landing(plan *placement.Plan) (costLevel, level, dom int) {
	var pos []int
	for i, n := range plan.NodeOf {
		if p.looseOnly || p.req.Members[i].Accelerated {
			pos = append(pos, p.tree.PositionOf(n))
		}
	}
	if p.homes != nil && !p.looseOnly {
		// Near its anchors, the level is that of the tightest home
		// domain around the members.
		for l := 0; l <= p.top; l++ {
			in := true
			for _, q := range pos {
				in = in && p.tree.DomainAt(l, q) == p.homes[l]
			}
			if in {
				return l, l, p.homes[l]
			}
		}
	}
	from := p.first
	if p.looseOnly {
		from = 0
	}
	for l := from; l <= p.top; l++ {
		k := p.tree.DomainAt(l, pos[0])
		same := true
		for _, q := range pos[1:] {
			if p.tree.DomainAt(l, q) != k {
				same = false
				break
			}
		}
		if same {
			if p.looseOnly {
				return p.top, l, k
			}
			return l, l, k
		}
	}
	return p.top, p.top, 0 // unreachable: the cluster holds every node
}

// victims groups items ids (sorted) by unit, in order of first appearance.
func (p *problem) victims(ids []int32) []Victim {
	var out []Victim
	at := make(map[int32]int)
	for _, id := range ids {
		it := &p.items[id]
		un := &p.req.Units[it.unit]
		if it.isWhole() {
			kind := WholeGang
			if un.Kind == KindPod {
				kind = PlainPod
			}
			pods := make([]int, len(un.Pods))
			for i := range pods {
				pods[i] = i
			}
			out = append(out, Victim{Unit: int(it.unit), Name: un.Name, Kind: kind, Pods: pods, Priority: un.Priority})
			continue
		}
		i, ok := at[it.unit]
		if !ok {
			out = append(out, Victim{Unit: int(it.unit), Name: un.Name, Kind: ElasticMembers, Priority: un.Priority})
			i = len(out) - 1
			at[it.unit] = i
		}
		out[i].Pods = append(out[i].Pods, int(it.pod))
	}
	for i := range out {
		slices.Sort(out[i].Pods)
	}
	return out
}
