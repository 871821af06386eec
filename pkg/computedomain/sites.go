package computedomain

import (
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// Keeping ComputeDomains apart. Where a domain runs is read from three
// sources, each deterministic: the driver's node label (the domain runs
// there now), allocated channel claims (its members hold the node's
// channel), and the nodes reserved by the attempt in flight of another
// domain's gang (it is being placed there now). A clique runs a domain when
// one of its nodes does.

// Rejections, for people, of nodes a domain gang may not use.
const (
	RejectOtherDomainNode   = "runs another ComputeDomain"
	RejectOtherDomainClique = "is in an NVLink clique another ComputeDomain runs in (" + scheduling.AnnotationComputeDomainShareClique + ": \"true\" on the PodGroup allows sharing it)"
)

// Sites is where ComputeDomains run, as one domain's gang sees it.
type Sites struct {
	// own is the gang's own domain.
	own string
	// otherOnNode and otherInClique name, per node and per clique, the
	// least (by name) other domain that runs there.
	otherOnNode, otherInClique map[string]string
	// ownCliques are the cliques the gang's own domain runs in.
	ownCliques sets.Set[string]
}

// NewSites returns the sites of no domain, as the gang of domain own sees
// them.
func NewSites(own string) *Sites {
	return &Sites{own: own, otherOnNode: map[string]string{}, otherInClique: map[string]string{}, ownCliques: sets.New[string]()}
}

// Add notes that domain runs on node, in clique ("" for none). The order
// of additions does not matter.
func (s *Sites) Add(domain, node, clique string) {
	if domain == s.own {
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

// OwnClique reports whether the gang's own domain runs in clique.
func (s *Sites) OwnClique(clique string) bool { return s.ownCliques.Has(clique) }

// Rejects says why a domain gang may not use node, "" if it may. A clique
// the domain already runs in stays open to it, whoever else runs there.
func (s *Sites) Rejects(node *v1.Node, shareClique bool) string {
	clique := node.Labels[CliqueLevel]
	switch {
	case s.otherOnNode[node.Name] != "":
		return RejectOtherDomainNode
	case !shareClique && clique != "" && s.otherInClique[clique] != "" && !s.ownCliques.Has(clique):
		return RejectOtherDomainClique
	}
	return ""
}

// SiteDomain is the domain an allocated claim shows running where it is
// allocated: a channel's domain (named after the claim when its config
// does not say), or the domain a daemon serves; "" for any other claim,
// and for a daemon whose domain is unknown.
func SiteDomain(claim *resourceapi.ResourceClaim) string {
	c := Classify(claim)
	switch {
	case c.Domain != "" || c.Role == None:
		return c.Domain
	case c.Role == Channel:
		return "claim " + types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}.String()
	}
	return ""
}

// AllocationNodes returns the known nodes a channel allocation is bound
// to: those its node selector names by metadata.name, else the pools of its
// channel devices, which the driver names after their node.
func AllocationNodes(a *resourceapi.AllocationResult, known map[string]string) []string {
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
