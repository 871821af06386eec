package coscheduling

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
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

// cliqueLevel is the level a ComputeDomain's gang must sit inside.
const cliqueLevel = scheduling.LabelGPUClique

// computeDomains remembers, per gang, the ComputeDomain its members joined
// at its last planning pass: the policy of a later preemption pass reads
// it, other domains' gangs read where it is in flight, and a failed plan is
// explained with it.
type computeDomains struct {
	// levels are the scheduler's topology levels, tightest first, to tell
	// whether a user's required level is already inside a clique.
	levels []scheduling.Level
	mu     sync.Mutex
	// byGang holds the last pass of each domain gang; guarded by mu.
	byGang map[gang.Key]*domainPass
}

// newComputeDomains resolves the args' levels; New has validated them, so
// an error leaves none, and then only a required clique keeps a domain
// gang inside one clique.
func newComputeDomains(args *config.CoschedulingArgs) *computeDomains {
	levels, _ := scheduling.ResolveLevels(args.TopologyPreset, args.TopologyLevels)
	return &computeDomains{levels: levels, byGang: map[gang.Key]*domainPass{}}
}

// domainPass is what one planning pass learnt of a domain gang.
type domainPass struct {
	// domain identifies the ComputeDomain: its UID, as the driver's
	// config and node label carry it.
	domain string
	// shareClique is the PodGroup's AnnotationComputeDomainShareClique.
	shareClique bool
	// oneOnly is set when the user's required level keeps the gang inside
	// one clique; otherwise it may span whole cliques.
	oneOnly bool
	// group is the user's required level looser than a clique, which a
	// spanning gang keeps inside one domain of; "" for none.
	group string
	// members counts the members that join the domain.
	members int
	// span is set when no clique could hold the gang and it may span
	// cliques; a preemption pass keeps the planning pass's.
	span bool
	// choice is the cliques the pass planned the gang in; nil when it
	// found none, or when the pass made no choice (preemption).
	choice *computedomain.Choice
	// before[i] is member i's eligible nodes before other domains were
	// taken out (nil when the pass took none out), to tell "never" from
	// "not while the other domains run".
	before [][]bool
	// excluded are the nodes taken out for other domains.
	excluded sets.Set[string]
}

func (c *computeDomains) set(key gang.Key, p *domainPass) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p == nil {
		delete(c.byGang, key)
		return
	}
	c.byGang[key] = p
}

func (c *computeDomains) get(key gang.Key) *domainPass {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byGang[key]
}

// others lists, in key order, the gangs other than self whose last pass
// found a domain other than domain, with that domain.
func (c *computeDomains) others(self gang.Key, domain string) (keys []gang.Key, domains []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, p := range c.byGang {
		if key != self && p.domain != domain {
			keys = append(keys, key)
		}
	}
	slices.SortFunc(keys, func(a, b gang.Key) int { return strings.Compare(a.String(), b.String()) })
	for _, key := range keys {
		domains = append(domains, c.byGang[key].domain)
	}
	return keys, domains
}

// policyOf is the gang's topology policy (gang.PolicyOf) when its last
// pass found a ComputeDomain: kept inside one NVLink clique (a user's
// required level at or inside the clique stays; anything looser, preferred
// or unset becomes the clique, required), unless no clique could hold the
// gang and it may span cliques: then the user's looser required level, or
// the clique preferred.
func (pl *Plugin) policyOf(spec *gang.Spec, members []*v1.Pod) placement.Policy {
	p := gang.PolicyOf(spec, members)
	pass := pl.computeDomains.get(spec.Key)
	switch {
	case pass == nil:
		return p
	case !pass.span:
		return withinClique(p, pl.computeDomains.levels)
	case pass.group != "":
		return p
	}
	return placement.Policy{Level: cliqueLevel}
}

// oneCliqueOnly says whether p keeps a gang inside one clique: a required
// level no looser than the clique. With a looser required level, it
// returns that level, which a spanning gang stays inside one domain of.
func oneCliqueOnly(p placement.Policy, levels []scheduling.Level) (bool, string) {
	if !p.Required {
		return false, ""
	}
	clique, err1 := scheduling.LevelRank(levels, cliqueLevel)
	own, err2 := scheduling.LevelRank(levels, p.Level)
	if err1 != nil || err2 != nil {
		// An unknown level is reported when the gang is planned.
		return false, ""
	}
	if own <= clique {
		return true, ""
	}
	return false, p.Level
}

// withinClique tightens p to the clique level unless it already requires
// a level no looser than the clique.
func withinClique(p placement.Policy, levels []scheduling.Level) placement.Policy {
	if p.Required {
		clique, err1 := scheduling.LevelRank(levels, cliqueLevel)
		own, err2 := scheduling.LevelRank(levels, p.Level)
		if err1 == nil && err2 == nil && own <= clique {
			return p
		}
	}
	return placement.Policy{Level: cliqueLevel, Required: true}
}

// domainOfGang reads which ComputeDomain the members join, "" for none. A
// gang whose members join two domains, or whose PodGroup sets
// AnnotationComputeDomainShareClique to something other than a boolean,
// is invalid. Claims not created yet are demandOf's to wait for.
func (pl *Plugin) domainOfGang(spec *gang.Spec, members []*v1.Pod) (*domainPass, *fwk.Status) {
	if pl.devices == nil {
		return nil, nil
	}
	var domain, first string
	count := 0
	for _, p := range members {
		d := pl.domainOfPod(p)
		if d == "" {
			continue
		}
		count++
		if domain != "" && d != domain {
			msg := fmt.Sprintf("gang %s: member %s joins ComputeDomain %s and member %s joins %s; a gang runs in one NVLink clique, so its members join one ComputeDomain: split the gang or the workload's claims",
				spec.Key, first, domain, p.Name, d)
			pl.events.gang(spec, p, v1.EventTypeWarning, ReasonInvalidPodGroup, "%s", msg)
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
		}
		domain, first = d, p.Name
	}
	if domain == "" {
		return nil, nil
	}
	pass := &domainPass{domain: domain, members: count, excluded: sets.New[string]()}
	pass.oneOnly, pass.group = oneCliqueOnly(gang.PolicyOf(spec, members), pl.computeDomains.levels)
	if v, ok := spec.Annotations[scheduling.AnnotationComputeDomainShareClique]; ok {
		share, err := strconv.ParseBool(v)
		if err != nil {
			msg := fmt.Sprintf("gang %s: annotation %s=%q is not a boolean; write \"true\" to let its ComputeDomain share an NVLink clique with other domains, or remove it",
				spec.Key, scheduling.AnnotationComputeDomainShareClique, v)
			pl.events.gang(spec, nil, v1.EventTypeWarning, ReasonInvalidPodGroup, "%s", msg)
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
		}
		pass.shareClique = share
	}
	return pass, nil
}

// domainOfPod returns the ComputeDomain whose channel one of the pod's
// claims takes, "" if none does. A daemon claim makes no member.
func (pl *Plugin) domainOfPod(pod *v1.Pod) string {
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		name, _, err := resourceclaim.Name(pod, pc)
		if err != nil || name == nil {
			continue
		}
		claim, err := pl.devices.Manager().ResourceClaims().Get(pod.Namespace, *name)
		if err != nil {
			continue
		}
		c := computedomain.Classify(claim)
		switch {
		case c.Role != computedomain.Channel:
			continue
		case c.Domain != "":
			return c.Domain
		case pc.ResourceClaimTemplateName != nil:
			// Every pod's claim from one template is one domain's channel.
			return "template " + types.NamespacedName{Namespace: pod.Namespace, Name: *pc.ResourceClaimTemplateName}.String()
		}
		return "claim " + types.NamespacedName{Namespace: pod.Namespace, Name: *name}.String()
	}
	return ""
}

// siteDomain is the domain an allocated claim shows running where it is
// allocated: a channel's domain (named after the claim when its config
// does not say), or the domain a daemon serves; "" for any other claim,
// and for a daemon whose domain is unknown.
func siteDomain(claim *resourceapi.ResourceClaim) string {
	c := computedomain.Classify(claim)
	switch {
	case c.Domain != "" || c.Role == computedomain.None:
		return c.Domain
	case c.Role == computedomain.Channel:
		return "claim " + types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}.String()
	}
	return ""
}

// inComputeDomain reports whether some member joins a ComputeDomain.
func (pl *Plugin) inComputeDomain(members []*v1.Pod) bool {
	if pl.devices == nil {
		return false
	}
	return slices.ContainsFunc(members, func(p *v1.Pod) bool { return pl.domainOfPod(p) != "" })
}
