package core

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
func (pl *Planner) chooseCliques(pass *computedomain.Pass, sites *computedomain.Sites, templates []*eligibility.Template, req *placement.Request) {
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
		c := req.Nodes[i].Labels[computedomain.CliqueLevel]
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
		cliques[k] = computedomain.Clique{Name: name, Own: sites.OwnClique(name),
			Slots: computedomain.CliqueRoom(req, nodesOf[k], ms, kind, false), Capacity: computedomain.CliqueRoom(req, nodesOf[k], ms, kind, true)}
		if pass.Group != "" {
			cliques[k].Group = req.Nodes[nodesOf[k][0]].Labels[pass.Group]
		}
	}
	choice, ok := computedomain.Choose(cliques, len(ms), pass.OneOnly)
	pass.Span = choice.Span
	if !ok {
		pass.Choice = nil
		return
	}
	pass.Choice = &choice
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
			if t.Eligible[i] && !keep.Has(req.Nodes[i].Labels[computedomain.CliqueLevel]) {
				t.Eligible[i] = false
				reject(t, why)
			}
		}
	}
}

// DomainNote says, for the plan's summary (the GangScheduled Event), that
// the gang's ComputeDomain spans cliques and why; "" when it does not.
func (pl *Planner) DomainNote(key gang.Key) string {
	p := pl.computeDomains.Get(key)
	if p == nil || p.Choice == nil || !p.Choice.Span {
		return ""
	}
	alone := ", each used by no other ComputeDomain"
	if p.ShareClique {
		alone = ""
	}
	return fmt.Sprintf("; ComputeDomain %s spans the fewest whole NVLink cliques, %d (%s)%s: no clique has room for its %d member(s), the roomiest for %d",
		p.Domain, len(p.Choice.Cliques), strings.Join(p.Choice.Cliques, ", "), alone, p.Members, p.Choice.Largest)
}
