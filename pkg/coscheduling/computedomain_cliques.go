package coscheduling

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/gpu-gang/gpu-gang/pkg/computedomain"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/eligibility"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Which NVLink cliques a ComputeDomain's gang is planned in: the glue
// between a planning pass and computedomain.Choose. Each clique's room is
// what a first fit of the domain's members finds in its nodes' free
// capacity, and its capacity what it finds in their whole capacity; the
// planner then places the gang for real, inside the chosen cliques only.

// Rejections, for people, of nodes outside the chosen cliques.
const (
	rejectOutsideOwnClique = "is outside the NVLink cliques the gang's ComputeDomain already runs in, which have room for it"
	rejectOutsideChosen    = "is outside the fewest whole NVLink cliques that hold the gang's ComputeDomain members"
	rejectOtherCliques     = "is outside the NVLink cliques that have room for the whole gang's ComputeDomain members"
)

// chooseCliques keeps the domain members of req (those of templates) to
// the cliques computedomain.Choose picks, and records on pass the choice
// and whether the gang spans cliques. Without a choice the members keep
// their nodes: the planner then finds no plan and explainNoFit says why.
func (pl *Plugin) chooseCliques(pass *domainPass, sites *domainSites, templates []*eligibility.Template, req *placement.Request) {
	var ms []int
	kind := map[int]int{}
	for k, t := range templates {
		for _, m := range t.Members {
			ms = append(ms, m)
			kind[m] = k
		}
	}
	if len(ms) == 0 {
		return
	}
	index := map[string]int{}
	var names []string
	var nodesOf [][]int
	for i := range req.Nodes {
		c := req.Nodes[i].Labels[cliqueLevel]
		if c == "" {
			continue
		}
		k, ok := index[c]
		if !ok {
			k = len(names)
			index[c] = k
			names = append(names, c)
			nodesOf = append(nodesOf, nil)
		}
		nodesOf[k] = append(nodesOf[k], i)
	}
	cliques := make([]computedomain.Clique, len(names))
	for k, name := range names {
		cliques[k] = computedomain.Clique{Name: name, Own: sites.ownCliques.Has(name),
			Slots: cliqueRoom(req, nodesOf[k], ms, kind, false), Capacity: cliqueRoom(req, nodesOf[k], ms, kind, true)}
		if pass.group != "" {
			cliques[k].Group = req.Nodes[nodesOf[k][0]].Labels[pass.group]
		}
	}
	choice, ok := computedomain.Choose(cliques, len(ms), pass.oneOnly)
	pass.span = choice.Span
	if !ok {
		pass.choice = nil
		return
	}
	pass.choice = &choice
	why := rejectOtherCliques
	switch {
	case choice.Span:
		why = rejectOutsideChosen
	case choice.Own:
		why = rejectOutsideOwnClique
	}
	keep := sets.New(choice.Cliques...)
	for _, t := range templates {
		for i := range req.Nodes {
			if t.Eligible[i] && !keep.Has(req.Nodes[i].Labels[cliqueLevel]) {
				t.Eligible[i] = false
				reject(t, why)
			}
		}
	}
}

// cliqueRoom counts how many of the members ms (in rank order) a first fit
// places on nodes, each node's free capacity (whole: its allocatable) and
// each kind's cap per node respected. It reads req and writes nothing of
// it.
func cliqueRoom(req *placement.Request, nodes []int, ms []int, kind map[int]int, whole bool) int {
	free := make([]placement.Vector, len(nodes))
	for j, i := range nodes {
		if whole {
			free[j] = req.Nodes[i].Allocatable.Clone()
		} else {
			free[j] = req.Nodes[i].Free.Clone()
		}
	}
	type perNode struct{ node, kind int }
	count := map[perNode]int{}
	placed := 0
	for _, m := range ms {
		member := &req.Members[m]
		for j, i := range nodes {
			key := perNode{j, kind[m]}
			if !member.EligibleOn(i) || !member.Request.FitsIn(free[j]) || member.MaxPerNode > 0 && count[key] >= member.MaxPerNode {
				continue
			}
			free[j].Sub(member.Request)
			count[key]++
			placed++
			break
		}
	}
	return placed
}

// domainNote says, for the plan's summary (the GangScheduled Event), that
// the gang's ComputeDomain spans cliques and why; "" when it does not.
func (pl *Plugin) domainNote(key gang.Key) string {
	p := pl.computeDomains.get(key)
	if p == nil || p.choice == nil || !p.choice.Span {
		return ""
	}
	alone := ", each used by no other ComputeDomain"
	if p.shareClique {
		alone = ""
	}
	return fmt.Sprintf("; ComputeDomain %s spans the fewest whole NVLink cliques, %d (%s)%s: no clique has room for its %d member(s), the roomiest for %d",
		p.domain, len(p.choice.Cliques), strings.Join(p.choice.Cliques, ", "), alone, p.members, p.choice.Largest)
}
