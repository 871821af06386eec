package consolidate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/preempt"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/preemption"
	"github.com/gpu-gang/gpu-gang/pkg/topology"
)

// Reasons of the Events a consolidation records.
const (
	// ReasonMoved: on a moved gang's PodGroup: its pods were evicted to
	// free a domain for a waiting gang, and its new place is held for it.
	ReasonMoved = "Moved"
	// ReasonConsolidating: on the waiting gang's PodGroup: the gangs named
	// are moved to free the domain named for it.
	ReasonConsolidating = "Consolidating"
	// ReasonNotConsolidated: on the waiting gang's PodGroup: moving
	// movable gangs would free a domain for it, but a gang moved would
	// not fit anywhere else, so nothing is moved.
	ReasonNotConsolidated = "NotConsolidated"
)

// Mover is what a consolidation asks of the plugin's preemption: the
// candidates, a moved gang described to the planner, and carrying a move
// out. *preempt.Preempter is one.
type Mover interface {
	Candidates(ctx context.Context, p *preempt.Preemptor, held map[string]capacity.Amounts, statuses fwk.NodeToStatusReader) (*preempt.Candidates, *fwk.Status)
	Relocate(ctx context.Context, c *preempt.Candidates, spec *gang.Spec, pods []*v1.Pod, taken map[string]capacity.Amounts) (*preempt.Relocation, error)
	Move(ctx context.Context, p *preempt.Preemptor, c *preempt.Candidates, req *preemption.Request, d *preemption.Decision, moved []preempt.MovedGang, why string) (*fwk.PostFilterResult, *fwk.Status)
}

var _ Mover = &preempt.Preempter{}

// Reporter records what a consolidation did: Events and the metric.
type Reporter interface {
	// GangEvent records an Event regarding a gang's API object; related,
	// if not nil, is the member that prompted it.
	GangEvent(spec *gang.Spec, related *v1.Pod, eventType, reason, format string, args ...any)
	// Moved counts a move of gangs gangs.
	Moved(gangs int)
}

// Config is what a Consolidator works with.
type Config struct {
	Policy *Policy
	Mover  Mover
	// Decider is the preemption engine, asked about movable gangs only.
	Decider preempt.Decider
	// Planner plans the moved gangs; Trees gives the requests' topology
	// tree. A *topology.Planner is both.
	Planner  placement.Planner
	Trees    preemption.TreeSource
	Reporter Reporter
	// Wake tries a gang again after d: when it will have waited long
	// enough for gangs to be moved for it. Nothing else may requeue it.
	Wake func(key gang.Key, d time.Duration)
}

// Consolidator moves movable gangs for waiting ones (see the package doc).
type Consolidator struct {
	cfg Config
}

// New returns a Consolidator working with cfg.
func New(cfg Config) *Consolidator { return &Consolidator{cfg: cfg} }

// option is one domain a move could free: the engine's request narrowed to
// the movable gangs touching it, its decision, and where each victim unit
// sits among the candidates.
type option struct {
	req   *preemption.Request
	d     *preemption.Decision
	units []int // units[i] is the candidates' index of req.Units[i]
}

// Consolidate moves movable gangs so that p, a waiting gang, gets a whole
// domain of its level, when the policy allows it and a move makes p fit
// while every moved gang fits elsewhere. acted is false when it moved
// nothing; the result and status are then nil and PostFilter keeps
// preemption's. held and statuses are as for preempt.Preempter.Preempt.
func (c *Consolidator) Consolidate(ctx context.Context, p *preempt.Preemptor, held map[string]capacity.Amounts, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status, bool) {
	logger := klog.FromContext(ctx)
	pol := c.cfg.Policy
	if p.Spec == nil || p.Priority == math.MaxInt32 {
		return nil, nil, false
	}
	if wait := pol.Unwaited(p.WaitingSince()); wait > 0 {
		c.cfg.Wake(p.Spec.Key, wait)
		return nil, nil, false
	}
	budget := pol.Budget()
	if budget == 0 {
		logger.V(4).Info("Not consolidating: the hourly budget of moves is spent", "gang", p.Name)
		return nil, nil, false
	}
	cands, status := c.cfg.Mover.Candidates(ctx, p, held, statuses)
	if status != nil {
		logger.V(4).Info("Not consolidating", "gang", p.Name, "reason", status.Message())
		return nil, nil, false
	}
	req := cands.Request
	if req.Policy.Level == "" || len(req.Anchors) > 0 {
		// Consolidation frees a domain for a gang that names one; a
		// running gang's replacements go next to it.
		return nil, nil, false
	}
	movable := c.movable(p, cands)
	if len(movable) == 0 {
		logger.V(4).Info("Not consolidating: no running gang may be moved", "gang", p.Name)
		return nil, nil, false
	}
	options, err := c.options(ctx, p, cands, movable, budget)
	if err != nil {
		logger.V(3).Info("Not consolidating", "gang", p.Name, "reason", err.Error())
		return nil, nil, false
	}
	var first error
	for _, o := range options {
		moved, err := c.relocate(ctx, cands, o)
		if err != nil {
			logger.V(3).Info("Not consolidating in this domain: a moved gang would not fit elsewhere",
				"gang", p.Name, "domain", o.d.Domain.String(), "reason", err.Error())
			if first == nil {
				first = fmt.Errorf("moving %s would free %s for it, but %w", strings.Join(victimNames(o), ", "), o.d.Domain.String(), err)
			}
			continue
		}
		return c.move(ctx, p, cands, o, moved)
	}
	if first != nil {
		c.cfg.Reporter.GangEvent(p.Spec, nil, v1.EventTypeNormal, ReasonNotConsolidated,
			"%v; nothing is moved, and the gang waits for room (in %d domain(s) a move would make room)", first, len(options))
	}
	return nil, nil, false
}

// victimNames names the gangs o would move, in the engine's order.
func victimNames(o option) []string {
	names := make([]string, len(o.d.Victims))
	for i, v := range o.d.Victims {
		names[i] = v.Name
	}
	return names
}

// movable returns the indices of the candidates' units p may move (see the
// package doc), in the candidates' order. A gang whose movable annotation
// is malformed gets a Warning Event naming the fix.
func (c *Consolidator) movable(p *preempt.Preemptor, cands *preempt.Candidates) []int {
	pol := c.cfg.Policy
	var out []int
	for u, unit := range cands.Request.Units {
		spec := cands.Specs[u]
		if unit.Kind != preemption.KindGang || spec == nil || unit.Name != spec.Key.String() || unit.Priority > p.Priority {
			continue
		}
		ok, err := pol.Movable(spec, cands.Pods[u])
		if err != nil {
			c.cfg.Reporter.GangEvent(spec, nil, v1.EventTypeWarning, scheduling.ReasonInvalidPodGroup,
				"%v: the gang is not moved to make room for others; set it to \"true\" to let it be moved, or remove it", err)
			continue
		}
		if !ok || pol.Settled(spec.Key, unit.Started) != "" {
			continue
		}
		out = append(out, u)
	}
	return out
}

// options asks the engine, domain by domain of p's level, which movable
// gangs to move so that p fits there, and returns the domains found in the
// order they are tried: fewest GPUs moved, then the domain's path. A set
// that violates a PodDisruptionBudget or moves more gangs than budget
// allows is left out.
func (c *Consolidator) options(ctx context.Context, p *preempt.Preemptor, cands *preempt.Candidates, movable []int, budget int) ([]option, error) {
	req := cands.Request
	tree := c.cfg.Trees.Tree(&req.Request)
	if !tree.BuiltFrom(req.Nodes) {
		return nil, errors.New("the topology tree was built from other nodes than the request's")
	}
	level, err := tree.LevelIndex(req.Policy.Level)
	if err != nil {
		return nil, err
	}
	// The movable gangs with a pod in each domain of the level.
	byDomain := map[int][]int{}
	for _, u := range movable {
		for _, pod := range req.Units[u].Pods {
			if pod.Node < 0 {
				continue
			}
			k := tree.DomainAt(level, tree.PositionOf(pod.Node))
			if us := byDomain[k]; len(us) == 0 || us[len(us)-1] != u {
				byDomain[k] = append(us, u)
			}
		}
	}
	domains := make([]int, 0, len(byDomain))
	for k := range byDomain {
		domains = append(domains, k)
	}
	slices.Sort(domains)
	var out []option
	for _, k := range domains {
		sub := *req
		sub.Policy.Required = true
		sub.Priority = p.Priority + 1
		sub.Units = make([]preemption.Unit, len(byDomain[k]))
		for i, u := range byDomain[k] {
			unit := req.Units[u]
			unit.Surplus = 0 // moved whole, never member by member
			sub.Units[i] = unit
		}
		d, err := c.cfg.Decider.Decide(ctx, &sub)
		var no *preemption.NoPreemptionError
		switch {
		case errors.As(err, &no) && no.Reason == preemption.ReasonFits:
			return nil, fmt.Errorf("%s fits once the pods already leaving are gone", p.Name)
		case errors.As(err, &no):
			continue
		case err != nil:
			return nil, err
		case d.Cost.Violations > 0 || len(d.Victims) > budget:
			continue
		}
		if slices.ContainsFunc(out, func(o option) bool { return samePath(o.d.Domain.Path, d.Domain.Path) }) {
			continue // a gang astride two domains led the engine to one found already
		}
		out = append(out, option{req: &sub, d: d, units: byDomain[k]})
	}
	slices.SortStableFunc(out, func(a, b option) int {
		if a.d.Cost.GPUs != b.d.Cost.GPUs {
			return cmp.Compare(a.d.Cost.GPUs, b.d.Cost.GPUs)
		}
		return comparePaths(a.d.Domain.Path, b.d.Domain.Path)
	})
	return out, nil
}

// relocate plans every gang of o's decision elsewhere: on the capacity left
// once the waiting gang's plan is placed, outside the nodes the move frees
// and those the waiting gang takes, each after the ones before it. It fails
// on the first that does not fit.
func (c *Consolidator) relocate(ctx context.Context, cands *preempt.Candidates, o option) ([]preempt.MovedGang, error) {
	req := cands.Request
	excluded := map[string]bool{}
	for _, v := range o.d.Victims {
		for _, pod := range o.req.Units[v.Unit].Pods {
			if pod.Node >= 0 {
				excluded[req.Nodes[pod.Node].Name] = true
			}
		}
	}
	for _, n := range o.d.Plan.NodeOf {
		excluded[req.Nodes[n].Name] = true
	}
	taken := map[string]capacity.Amounts{}
	moved := make([]preempt.MovedGang, 0, len(o.d.Victims))
	for _, v := range o.d.Victims {
		u := o.units[v.Unit]
		spec, pods := cands.Specs[u], cands.Pods[u]
		rel, err := c.cfg.Mover.Relocate(ctx, cands, spec, pods, taken)
		if err != nil {
			return nil, err
		}
		rq := rel.Request
		for i := range rq.Nodes {
			if excluded[rq.Nodes[i].Name] {
				rq.Nodes[i].Free = make(placement.Vector, len(rq.Nodes[i].Free))
			}
		}
		plan, err := c.cfg.Planner.Plan(ctx, rq)
		if err != nil {
			return nil, fmt.Errorf("gang %s would not fit elsewhere: %w", spec.Key, err)
		}
		for i, n := range plan.NodeOf {
			name := rq.Nodes[n].Name
			if taken[name] == nil {
				taken[name] = capacity.Amounts{}
			}
			taken[name].Add(rel.PerMember[i])
		}
		moved = append(moved, preempt.MovedGang{Spec: spec, Pods: pods, Relocation: rel, Plan: plan})
	}
	return moved, nil
}

// move carries o out and says so.
func (c *Consolidator) move(ctx context.Context, p *preempt.Preemptor, cands *preempt.Candidates, o option, moved []preempt.MovedGang) (*fwk.PostFilterResult, *fwk.Status, bool) {
	where := o.d.Domain.String()
	names := make([]string, len(moved))
	keys := make([]gang.Key, len(moved))
	for i, g := range moved {
		names[i], keys[i] = g.Spec.Key.String(), g.Spec.Key
	}
	why := fmt.Sprintf("moved to free %s for gang %s", where, p.Name)
	res, status := c.cfg.Mover.Move(ctx, p, cands, o.req, o.d, moved, why)
	if !status.IsSuccess() {
		return res, status, true
	}
	c.cfg.Policy.Moved(keys)
	c.cfg.Reporter.Moved(len(moved))
	for _, g := range moved {
		c.cfg.Reporter.GangEvent(g.Spec, nil, v1.EventTypeNormal, ReasonMoved, "%s; its %d pod(s) were evicted and its new place (%s) is held for it",
			why, len(g.Pods), g.Plan.Summary)
	}
	c.cfg.Reporter.GangEvent(p.Spec, p.Pod, v1.EventTypeNormal, ReasonConsolidating, "moving %s to free %s; the freed room is held for it",
		strings.Join(names, ", "), where)
	klog.FromContext(ctx).V(2).Info("Consolidated", "gang", p.Name, "domain", where, "moved", names, "gpus", o.d.Cost.GPUs)
	return res, status, true
}

func samePath(a, b []topology.PathElem) bool { return comparePaths(a, b) == 0 }

// comparePaths orders domain paths element by element, loosest level
// first.
func comparePaths(a, b []topology.PathElem) int {
	return slices.CompareFunc(a, b, func(x, y topology.PathElem) int {
		if c := strings.Compare(x.Key, y.Key); c != 0 {
			return c
		}
		if c := strings.Compare(x.Value, y.Value); c != 0 {
			return c
		}
		switch {
		case x.Unlabelled == y.Unlabelled:
			return 0
		case y.Unlabelled:
			return -1
		}
		return 1
	})
}
