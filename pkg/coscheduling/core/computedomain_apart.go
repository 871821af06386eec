package core

import (
	"context"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/computedomain"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/eligibility"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// sitesOf reads where domains run on nodeInfos, for the gang self of
// domain own: the driver's node labels, allocated channel and daemon
// claims, and the nodes other domains' gangs have in flight
// (computedomain.Sites says how they keep domains apart).
func (pl *Planner) sitesOf(self gang.Key, own string, nodeInfos []fwk.NodeInfo) *computedomain.Sites {
	s := computedomain.NewSites(own)
	cliqueOf := make(map[string]string, len(nodeInfos))
	for _, ni := range nodeInfos {
		n := ni.Node()
		cliqueOf[n.Name] = n.Labels[computedomain.CliqueLevel]
		if d := n.Labels[scheduling.LabelComputeDomain]; d != "" {
			s.Add(d, n.Name, cliqueOf[n.Name])
		}
	}
	claims, err := pl.devices.Manager().ResourceClaims().List()
	if err == nil {
		for _, c := range claims {
			if c.Status.Allocation == nil {
				continue
			}
			d := computedomain.SiteDomain(c)
			if d == "" {
				continue
			}
			for _, node := range computedomain.AllocationNodes(c.Status.Allocation, cliqueOf) {
				s.Add(d, node, cliqueOf[node])
			}
		}
	}
	keys, domains := pl.computeDomains.Others(self, own)
	for i, key := range keys {
		for _, node := range pl.ledger.Reservations.InFlightNodes(key) {
			if clique, ok := cliqueOf[node]; ok {
				s.Add(domains[i], node, clique)
			}
		}
	}
	return s
}

// gangEligibility fills the eligible nodes of a gang's templates: the
// profile's Filter plugins and the gang's lessons (eligibility), then what
// its ComputeDomain allows (placeComputeDomain). A gang whose domain is
// bad input gets a status, and no eligible node, so that a preemption pass
// (which has reported nothing) evicts nobody for it.
func (pl *Planner) gangEligibility(ctx context.Context, spec *gang.Spec, members []*v1.Pod, templates []*eligibility.Template, nodeInfos []fwk.NodeInfo) *fwk.Status {
	pl.eligibility.Eligibility(ctx, templates, nodeInfos, pl.ledger.Lessons.View(spec.Key))
	status := pl.placeComputeDomain(spec, members, templates, nodeInfos, nil)
	if status != nil {
		for _, t := range templates {
			clear(t.Eligible)
		}
	}
	return status
}

// placeComputeDomain is the planning pass's ComputeDomain step, after
// eligibility: it reads the gang's domain (domainOfGang), remembers it for
// the gang's policy (policyOf), takes out of its members' eligible nodes
// those another domain runs on and the cliques other domains run in
// (unless the PodGroup allows sharing them), and then, when req is set,
// keeps the members to the cliques chooseCliques picks. req is the
// request being planned, whose members share the templates' eligibility;
// nil in a preemption pass, which chooses no cliques.
func (pl *Planner) placeComputeDomain(spec *gang.Spec, members []*v1.Pod, templates []*eligibility.Template, nodeInfos []fwk.NodeInfo, req *placement.Request) *fwk.Status {
	pass, status := pl.domainOfGang(spec, members)
	if prev := pl.computeDomains.Get(spec.Key); pass != nil && req == nil && prev != nil && prev.Domain == pass.Domain {
		pass.Span = prev.Span
	}
	pl.computeDomains.Set(spec.Key, pass)
	if pass == nil {
		return status
	}
	sites := pl.sitesOf(spec.Key, pass.Domain, nodeInfos)
	var domainTemplates []*eligibility.Template
	for _, t := range templates {
		if pl.devices.ComputeDomainOf(t.Pod) == "" {
			continue // a member outside the domain (a launcher) goes anywhere
		}
		domainTemplates = append(domainTemplates, t)
		before := slices.Clone(t.Eligible)
		taken := 0
		for i, ni := range nodeInfos {
			if !t.Eligible[i] {
				continue
			}
			why := sites.Rejects(ni.Node(), pass.ShareClique)
			if why == "" {
				continue
			}
			t.Eligible[i] = false
			taken++
			pass.Excluded.Insert(ni.Node().Name)
			reject(t, why)
		}
		if taken == 0 {
			continue
		}
		if pass.Before == nil {
			pass.Before = make([][]bool, len(members))
		}
		for _, m := range t.Members {
			pass.Before[m] = before
		}
	}
	if req != nil {
		pl.chooseCliques(pass, sites, domainTemplates, req)
	}
	return nil
}

// reject counts why one more node is not eligible for t.
func reject(t *eligibility.Template, why string) {
	if t.Rejections == nil {
		t.Rejections = map[string]int{}
	}
	t.Rejections[pluginName+": "+why]++
}

// topologyAdvice ends a TopologyUnsatisfied Event: how the user may relax
// the gang's level, unless a ComputeDomain requires it.
func (pl *Planner) topologyAdvice(spec *gang.Spec) string {
	p := pl.computeDomains.Get(spec.Key)
	switch {
	case p == nil:
		return fmt.Sprintf(", or relax %s to %s", scheduling.AnnotationTopologyRequired, scheduling.AnnotationTopologyPreferred)
	case p.OneOnly:
		return fmt.Sprintf("; its members join ComputeDomain %s and its required level keeps the domain inside one NVLink clique (%s); without it, a domain larger than every clique spans the fewest whole cliques",
			p.Domain, computedomain.CliqueLevel)
	}
	return fmt.Sprintf("; its members join ComputeDomain %s, which stays inside one NVLink clique (%s) while one could hold it", p.Domain, computedomain.CliqueLevel)
}

// explainDomainNoFit explains a domain gang that does not fit even an empty
// cluster (empty, the request with every node's whole capacity). If it
// would fit once the other domains end, it waits (Unschedulable); if it
// must stay inside one clique, it is too large for any: a GangTooLarge
// Event with the numbers. Nil for a gang that joins no
// domain, and for one that may span cliques (explainNoFit's own message).
func (pl *Planner) explainDomainNoFit(ctx context.Context, spec *gang.Spec, empty *placement.Request, never *placement.FitError) *fwk.Status {
	pass := pl.computeDomains.Get(spec.Key)
	if pass == nil {
		return nil
	}
	if pass.Before != nil {
		alone := *empty
		alone.Members = slices.Clone(empty.Members)
		for i := range alone.Members {
			if pass.Before[i] != nil {
				alone.Members[i].Eligible = pass.Before[i]
			}
		}
		_, err := pl.placement.Plan(ctx, &alone)
		var fitErr *placement.FitError
		if err != nil && !errors.As(err, &fitErr) {
			return fwk.AsStatus(fmt.Errorf("planning gang %s without other ComputeDomains: %w", spec.Key, err))
		}
		if err == nil {
			where := "it fits once they end"
			if !pass.Span {
				where = "it fits one clique once they end"
			}
			msg := fmt.Sprintf("gang %s of ComputeDomain %s waits: other ComputeDomains run on %d of the node(s) it could use, or in their NVLink cliques; %s",
				spec.Key, pass.Domain, pass.Excluded.Len(), where)
			pl.reporter.GangEvent(spec, nil, v1.EventTypeNormal, ReasonTopologyUnsatisfied, "%s", msg)
			return fwk.NewStatus(fwk.Unschedulable, msg)
		}
	}
	if pass.Span {
		return nil
	}
	largest, cliques := computedomain.LargestClique(empty.Nodes)
	msg := fmt.Sprintf("gang %s of ComputeDomain %s must run inside one NVLink clique (%s), but even with all %d nodes empty no clique holds its %d members: the largest of %d clique(s) has %d node(s) (%s)",
		spec.Key, pass.Domain, computedomain.CliqueLevel, len(empty.Nodes), never.Wanted, cliques, largest, never.Reason)
	pl.reporter.GangEvent(spec, nil, v1.EventTypeWarning, ReasonGangTooLarge,
		"%s: lower spec.minMember or the members' requests so that the domain fits one clique, relax %s to let it span whole cliques, or split the workload into several ComputeDomains", msg, scheduling.AnnotationTopologyRequired)
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
}
