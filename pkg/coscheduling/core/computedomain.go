package core

import (
	"fmt"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/computedomain"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// ComputeDomains (NVIDIA's multi-node NVLink through DRA) work only where
// the driver can run them: it runs one IMEX domain per NVLink clique, it
// refuses a node labelled for another domain, and two domains in one
// clique fail with CUDA_ERROR_NOT_SUPPORTED (k8s-dra-driver-gpu #892). So
// a gang whose members take a domain's channel is planned on nodes and
// cliques no other domain runs in (computedomain_apart.go), in one clique
// while one could hold it, else across the fewest whole cliques
// (computedomain_cliques.go); the rules themselves are pkg/computedomain's.
//
// A gang's domain is read from its members' claims (computedomain.Classify):
// the channel's DeviceClass or the driver's opaque config, whose domainID is
// the ComputeDomain's UID, the value the driver labels nodes with. No driver
// module is imported and no ComputeDomain object is read.

// policyOf is the gang's topology policy (gang.PolicyOf) when its last
// pass found a ComputeDomain: kept inside one NVLink clique (a user's
// required level at or inside the clique stays; anything looser, preferred
// or unset becomes the clique, required), unless no clique could hold the
// gang and it may span cliques: then the user's looser required level, or
// the clique preferred.
func (pl *Planner) policyOf(spec *gang.Spec, members []*v1.Pod) placement.Policy {
	return pl.computeDomains.Policy(spec.Key, gang.PolicyOf(spec, members))
}

// domainOfGang reads which ComputeDomain the members join, "" for none. A
// gang whose members join two domains, or whose PodGroup sets
// AnnotationComputeDomainShareClique to something other than a boolean,
// is invalid. Claims not created yet are DemandOf's to wait for.
func (pl *Planner) domainOfGang(spec *gang.Spec, members []*v1.Pod) (*computedomain.Pass, *fwk.Status) {
	if pl.devices == nil {
		return nil, nil
	}
	var domain, first string
	count := 0
	for _, p := range members {
		d := pl.devices.ComputeDomainOf(p)
		if d == "" {
			continue
		}
		count++
		if domain != "" && d != domain {
			msg := fmt.Sprintf("gang %s: member %s joins ComputeDomain %s and member %s joins %s; a gang runs in one NVLink clique, so its members join one ComputeDomain: split the gang or the workload's claims",
				spec.Key, first, domain, p.Name, d)
			pl.reporter.GangEvent(spec, p, v1.EventTypeWarning, scheduling.ReasonInvalidPodGroup, "%s", msg)
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
		}
		domain, first = d, p.Name
	}
	if domain == "" {
		return nil, nil
	}
	pass := &computedomain.Pass{Domain: domain, Members: count, Excluded: sets.New[string]()}
	pass.OneOnly, pass.Group = computedomain.OneCliqueOnly(gang.PolicyOf(spec, members), pl.computeDomains.Levels())
	if v, ok := spec.Annotations[scheduling.AnnotationComputeDomainShareClique]; ok {
		share, err := strconv.ParseBool(v)
		if err != nil {
			msg := fmt.Sprintf("gang %s: annotation %s=%q is not a boolean; write \"true\" to let its ComputeDomain share an NVLink clique with other domains, or remove it",
				spec.Key, scheduling.AnnotationComputeDomainShareClique, v)
			pl.reporter.GangEvent(spec, nil, v1.EventTypeWarning, scheduling.ReasonInvalidPodGroup, "%s", msg)
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
		}
		pass.ShareClique = share
	}
	return pass, nil
}

// inComputeDomain reports whether some member joins a ComputeDomain.
func (pl *Planner) inComputeDomain(members []*v1.Pod) bool {
	if pl.devices == nil {
		return false
	}
	return slices.ContainsFunc(members, func(p *v1.Pod) bool { return pl.devices.ComputeDomainOf(p) != "" })
}
