package coscheduling

import (
	"context"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/eligibility"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Keeping ComputeDomains apart. Where a domain runs is read from three
// sources, each deterministic: the driver's node label (the domain runs
// there now), allocated channel claims (its members hold the node's
// channel), and the nodes reserved by the attempt in flight of another
// domain's gang (it is being placed there now). A clique runs a domain when
// one of its nodes does.

// Rejections, for people, of nodes a domain gang may not use.
const (
	rejectOtherDomainNode   = "runs another ComputeDomain"
	rejectOtherDomainClique = "is in an NVLink clique another ComputeDomain runs in (" + scheduling.AnnotationComputeDomainShareClique + ": \"true\" on the PodGroup allows sharing it)"
)

// domainSites is where ComputeDomains run, as one domain's gang sees it.
type domainSites struct {
	// otherOnNode and otherInClique name, per node and per clique, the
	// least (by name) other domain that runs there.
	otherOnNode, otherInClique map[string]string
	// ownCliques are the cliques the gang's own domain runs in.
	ownCliques sets.Set[string]
}

func (s *domainSites) add(domain, own, node, clique string) {
	if domain == own {
		if clique != "" {
			s.ownCliques.Insert(clique)
		}
		return
	}
	least := func(m map[string]string, k string) {
		if cur, ok := m[k]; !ok || domain < cur {
			m[k] = domain
		}
	}
	least(s.otherOnNode, node)
	if clique != "" {
		least(s.otherInClique, clique)
	}
}

// sitesOf reads where domains run on nodeInfos, for the gang self of
// domain own.
func (pl *Plugin) sitesOf(self gang.Key, own string, nodeInfos []fwk.NodeInfo) *domainSites {
	s := &domainSites{otherOnNode: map[string]string{}, otherInClique: map[string]string{}, ownCliques: sets.New[string]()}
	cliqueOf := make(map[string]string, len(nodeInfos))
	for _, ni := range nodeInfos {
		n := ni.Node()
		cliqueOf[n.Name] = n.Labels[cliqueLevel]
		if d := n.Labels[scheduling.LabelComputeDomain]; d != "" {
			s.add(d, own, n.Name, cliqueOf[n.Name])
		}
	}
	claims, err := pl.devices.Manager().ResourceClaims().List()
	if err == nil {
		for _, c := range claims {
			if c.Status.Allocation == nil {
				continue
			}
			d := siteDomain(c)
			if d == "" {
				continue
			}
			for _, node := range allocationNodes(c.Status.Allocation, cliqueOf) {
				s.add(d, own, node, cliqueOf[node])
			}
		}
	}
	keys, domains := pl.computeDomains.others(self, own)
	for i, key := range keys {
		for _, node := range pl.ledger.Claims.InFlightNodes(key) {
			if clique, ok := cliqueOf[node]; ok {
				s.add(domains[i], own, node, clique)
			}
		}
	}
	return s
}

// allocationNodes returns the known nodes a channel allocation is bound
// to: those its node selector names by metadata.name, else the pools of its
// channel devices, which the driver names after their node.
func allocationNodes(a *resourceapi.AllocationResult, known map[string]string) []string {
	out := sets.New[string]()
	if sel := a.NodeSelector; sel != nil {
		for _, term := range sel.NodeSelectorTerms {
			for _, f := range term.MatchFields {
				if f.Key == "metadata.name" && f.Operator == v1.NodeSelectorOpIn {
					out.Insert(f.Values...)
				}
			}
		}
	}
	if out.Len() == 0 {
		for _, r := range a.Devices.Results {
			if r.Driver == scheduling.DRADriverComputeDomain {
				out.Insert(r.Pool)
			}
		}
	}
	var nodes []string
	for _, n := range sets.List(out) {
		if _, ok := known[n]; ok {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// gangEligibility fills the eligible nodes of a gang's templates: the
// profile's Filter plugins and the gang's lessons (eligibility), then what
// its ComputeDomain allows (placeComputeDomain). A gang whose domain is
// bad input gets a status, and no eligible node, so that a preemption pass
// (which has reported nothing) evicts nobody for it.
func (pl *Plugin) gangEligibility(ctx context.Context, spec *gang.Spec, members []*v1.Pod, templates []*eligibility.Template, nodeInfos []fwk.NodeInfo) *fwk.Status {
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
func (pl *Plugin) placeComputeDomain(spec *gang.Spec, members []*v1.Pod, templates []*eligibility.Template, nodeInfos []fwk.NodeInfo, req *placement.Request) *fwk.Status {
	pass, status := pl.domainOfGang(spec, members)
	if prev := pl.computeDomains.get(spec.Key); pass != nil && req == nil && prev != nil && prev.domain == pass.domain {
		pass.span = prev.span
	}
	pl.computeDomains.set(spec.Key, pass)
	if pass == nil {
		return status
	}
	sites := pl.sitesOf(spec.Key, pass.domain, nodeInfos)
	var domainTemplates []*eligibility.Template
	for _, t := range templates {
		if pl.domainOfPod(t.Pod) == "" {
			continue // a member outside the domain (a launcher) goes anywhere
		}
		domainTemplates = append(domainTemplates, t)
		before := slices.Clone(t.Eligible)
		taken := 0
		for i, ni := range nodeInfos {
			if !t.Eligible[i] {
				continue
			}
			why := sites.rejects(ni.Node(), pass.shareClique)
			if why == "" {
				continue
			}
			t.Eligible[i] = false
			taken++
			pass.excluded.Insert(ni.Node().Name)
			reject(t, why)
		}
		if taken == 0 {
			continue
		}
		if pass.before == nil {
			pass.before = make([][]bool, len(members))
		}
		for _, m := range t.Members {
			pass.before[m] = before
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
	t.Rejections[Name+": "+why]++
}

// rejects says why a domain gang may not use node, "" if it may. A clique
// the domain already runs in stays open to it, whoever else runs there.
func (s *domainSites) rejects(node *v1.Node, shareClique bool) string {
	clique := node.Labels[cliqueLevel]
	switch {
	case s.otherOnNode[node.Name] != "":
		return rejectOtherDomainNode
	case !shareClique && clique != "" && s.otherInClique[clique] != "" && !s.ownCliques.Has(clique):
		return rejectOtherDomainClique
	}
	return ""
}

// topologyAdvice ends a TopologyUnsatisfied Event: how the user may relax
// the gang's level, unless a ComputeDomain requires it.
func (pl *Plugin) topologyAdvice(spec *gang.Spec) string {
	p := pl.computeDomains.get(spec.Key)
	switch {
	case p == nil:
		return fmt.Sprintf(", or relax %s to %s", scheduling.AnnotationTopologyRequired, scheduling.AnnotationTopologyPreferred)
	case p.oneOnly:
		return fmt.Sprintf("; its members join ComputeDomain %s and its required level keeps the domain inside one NVLink clique (%s); without it, a domain larger than every clique spans the fewest whole cliques",
			p.domain, cliqueLevel)
	}
	return fmt.Sprintf("; its members join ComputeDomain %s, which stays inside one NVLink clique (%s) while one could hold it", p.domain, cliqueLevel)
}

// explainDomainNoFit explains a domain gang that does not fit even an empty
// cluster (empty, the request with every node's whole capacity). If it
// would fit once the other domains end, it waits (Unschedulable); if it
// must stay inside one clique, it is too large for any: a GangTooLarge
// Event with the numbers. Nil for a gang that joins no
// domain, and for one that may span cliques (explainNoFit's own message).
func (pl *Plugin) explainDomainNoFit(ctx context.Context, spec *gang.Spec, empty *placement.Request, never *placement.FitError) *fwk.Status {
	pass := pl.computeDomains.get(spec.Key)
	if pass == nil {
		return nil
	}
	if pass.before != nil {
		alone := *empty
		alone.Members = slices.Clone(empty.Members)
		for i := range alone.Members {
			if pass.before[i] != nil {
				alone.Members[i].Eligible = pass.before[i]
			}
		}
		_, err := pl.planner.Plan(ctx, &alone)
		var fitErr *placement.FitError
		if err != nil && !errors.As(err, &fitErr) {
			return fwk.AsStatus(fmt.Errorf("planning gang %s without other ComputeDomains: %w", spec.Key, err))
		}
		if err == nil {
			where := "it fits once they end"
			if !pass.span {
				where = "it fits one clique once they end"
			}
			msg := fmt.Sprintf("gang %s of ComputeDomain %s waits: other ComputeDomains run on %d of the node(s) it could use, or in their NVLink cliques; %s",
				spec.Key, pass.domain, pass.excluded.Len(), where)
			pl.events.gang(spec, nil, v1.EventTypeNormal, ReasonTopologyUnsatisfied, "%s", msg)
			return fwk.NewStatus(fwk.Unschedulable, msg)
		}
	}
	if pass.span {
		return nil
	}
	largest, cliques := largestClique(empty.Nodes)
	msg := fmt.Sprintf("gang %s of ComputeDomain %s must run inside one NVLink clique (%s), but even with all %d nodes empty no clique holds its %d members: the largest of %d clique(s) has %d node(s) (%s)",
		spec.Key, pass.domain, cliqueLevel, len(empty.Nodes), never.Wanted, cliques, largest, never.Reason)
	pl.events.gang(spec, nil, v1.EventTypeWarning, ReasonGangTooLarge,
		"%s: lower spec.minMember or the members' requests so that the domain fits one clique, relax %s to let it span whole cliques, or split the workload into several ComputeDomains", msg, scheduling.AnnotationTopologyRequired)
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
}

// largestClique returns how many nodes the largest clique has, and how
// many cliques there are; nodes without the clique label are in none.
func largestClique(nodes []placement.Node) (largest, cliques int) {
	count := map[string]int{}
	for _, n := range nodes {
		if c := n.Labels[cliqueLevel]; c != "" {
			count[c]++
		}
	}
	for _, n := range count {
		largest = max(largest, n)
	}
	return largest, len(count)
}
