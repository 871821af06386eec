package computedomain

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Pass is what one planning pass learnt of a domain gang.
type Pass struct {
	// Domain identifies the ComputeDomain: its UID, as the driver's
	// config and node label carry it.
	Domain string
	// ShareClique is the PodGroup's AnnotationComputeDomainShareClique.
	ShareClique bool
	// OneOnly is set when the user's required level keeps the gang inside
	// one clique; otherwise it may span whole cliques.
	OneOnly bool
	// Group is the user's required level looser than a clique, which a
	// spanning gang keeps inside one domain of; "" for none.
	Group string
	// Members counts the members that join the domain.
	Members int
	// Span is set when no clique could hold the gang and it may span
	// cliques; a preemption pass keeps the planning pass's.
	Span bool
	// Choice is the cliques the pass planned the gang in; nil when it
	// found none, or when the pass made no choice (preemption).
	Choice *Choice
	// Before[i] is member i's eligible nodes before other domains were
	// taken out (nil when the pass took none out), to tell "never" from
	// "not while the other domains run".
	Before [][]bool
	// Excluded are the nodes taken out for other domains.
	Excluded sets.Set[string]
}

// Registry remembers, per gang (keyed by K), the ComputeDomain its
// members joined at its last planning pass: the policy of a later
// preemption pass reads it, other domains' gangs read where it is in
// flight, and a failed plan is explained with it. It is safe for
// concurrent use.
type Registry[K interface {
	comparable
	fmt.Stringer
}] struct {
	// levels are the scheduler's topology levels, tightest first, to tell
	// whether a user's required level is already inside a clique.
	levels []scheduling.Level
	mu     sync.Mutex
	// byGang holds the last pass of each domain gang; guarded by mu.
	byGang map[K]*Pass
}

// NewRegistry returns an empty registry for the scheduler's topology
// levels, tightest first.
func NewRegistry[K interface {
	comparable
	fmt.Stringer
}](levels []scheduling.Level) *Registry[K] {
	return &Registry[K]{levels: levels, byGang: map[K]*Pass{}}
}

// Levels are the registry's topology levels, tightest first.
func (r *Registry[K]) Levels() []scheduling.Level { return r.levels }

// Set records gang key's last pass; nil forgets the gang.
func (r *Registry[K]) Set(key K, p *Pass) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p == nil {
		delete(r.byGang, key)
		return
	}
	r.byGang[key] = p
}

// Get returns gang key's last pass, nil when it joined no domain.
func (r *Registry[K]) Get(key K) *Pass {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byGang[key]
}

// Others lists, in key order (by String), the gangs other than self whose
// last pass found a domain other than domain, with that domain.
func (r *Registry[K]) Others(self K, domain string) (keys []K, domains []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, p := range r.byGang {
		if key != self && p.Domain != domain {
			keys = append(keys, key)
		}
	}
	slices.SortFunc(keys, func(a, b K) int { return strings.Compare(a.String(), b.String()) })
	for _, key := range keys {
		domains = append(domains, r.byGang[key].Domain)
	}
	return keys, domains
}

// Policy is gang key's topology policy p when its last pass found a
// ComputeDomain: kept inside one NVLink clique (a user's required level at
// or inside the clique stays; anything looser, preferred or unset becomes
// the clique, required), unless no clique could hold the gang and it may
// span cliques: then the user's looser required level, or the clique
// preferred.
func (r *Registry[K]) Policy(key K, p placement.Policy) placement.Policy {
	pass := r.Get(key)
	switch {
	case pass == nil:
		return p
	case !pass.Span:
		return WithinClique(p, r.levels)
	case pass.Group != "":
		return p
	}
	return placement.Policy{Level: CliqueLevel}
}
