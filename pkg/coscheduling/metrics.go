package coscheduling

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
)

// Metrics on kube-scheduler's /metrics endpoint. Names follow the Prometheus
// and Kubernetes conventions: a gpu_gang_ prefix, base units in the name,
// _total for counters.
const metricsSubsystem = "gpu_gang"

// Attempt results, the values of the result label.
const (
	resultScheduled     = "scheduled"
	resultTimedOut      = "timed_out"
	resultRejected      = "rejected"
	resultMemberDeleted = "member_deleted"
)

// How head holds end, the values of the outcome label.
const (
	// holdFilled: the gang found room for its whole plan.
	holdFilled = "filled"
	// holdExpired: the turn ran out and the gang yielded.
	holdExpired = "expired"
)

var (
	// timeToSchedule: from the PodGroup's creation to quorum reserved.
	timeToSchedule = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "time_to_schedule_seconds",
		Help:           "Seconds from a PodGroup's creation until minMember of its pods were reserved and released to bind.",
		Buckets:        metrics.ExponentialBuckets(0.05, 2, 16), // 50ms to ~27 minutes
		StabilityLevel: metrics.ALPHA,
	})
	// attempts counts the ends of gang attempts, by result.
	attempts = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "attempts_total",
		Help:           "Gang scheduling attempts that ended, by result: scheduled, timed_out (members waited past the schedule timeout), rejected (a member failed) or member_deleted (a waiting member was deleted).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	// domainsSpanned: how many domains of each topology level a placed gang
	// spans; 1 at a level means the gang sits inside one domain there.
	domainsSpanned = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "domains_spanned",
		Help:           "Topology domains a scheduled gang spans, per level (node, NVLink domain, leaf, ...).",
		Buckets:        []float64{1, 2, 3, 4, 6, 8, 16, 32, 64, 128},
		StabilityLevel: metrics.ALPHA,
	}, []string{"level"})
	// replacements counts members placed for gangs that were running.
	replacements = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "running_gang_members_placed_total",
		Help:           "Members placed one by one for gangs that were running already: replacements of lost members and extra members of elastic gangs.",
		StabilityLevel: metrics.ALPHA,
	})
	// holdsTaken and holdsEnded count head holds.
	holdsTaken = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "head_holds_total",
		Help:           "Turns in which the gang at the head of the queue held its plan's places while the rest freed up.",
		StabilityLevel: metrics.ALPHA,
	})
	holdsEnded = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "head_holds_ended_total",
		Help:           "Head holds that ended, by outcome: filled (the gang found room for its whole plan) or expired (its turn ran out and it yielded to the gangs behind it).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"outcome"})

	// preemptions counts the preemptions carried out.
	preemptions = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "preemptions_total",
		Help:           "Preemptions carried out, by preemptor: gang (members of a PodGroup) or pod (a pod outside any gang).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"preemptor"})
	// preemptionVictims: the pods one preemption evicted.
	preemptionVictims = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "preemption_victims",
		Help:           "Pods evicted by one preemption.",
		Buckets:        []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024},
		StabilityLevel: metrics.ALPHA,
	})
	// preemptorTimeToBound: from a preemptor's creation to bound.
	preemptorTimeToBound = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "preemptor_time_to_bound_seconds",
		Help:           "Seconds from the creation of a preemptor (its PodGroup, or a pod outside gangs) until minMember of its pods were bound, for preemptors that evicted pods.",
		Buckets:        metrics.ExponentialBuckets(0.05, 2, 16), // 50ms to ~27 minutes
		StabilityLevel: metrics.ALPHA,
	})
	// consolidations counts the moves carried out, and consolidatedGangs
	// the gangs they moved.
	consolidations = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "consolidation_moves_total",
		Help:           "Consolidations carried out: each evicted one or more movable gangs from a topology domain so that a waiting gang gets it whole.",
		StabilityLevel: metrics.ALPHA,
	})
	consolidatedGangs = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "consolidation_moved_gangs_total",
		Help:           "Movable gangs evicted by consolidations, each with its new place held for it.",
		StabilityLevel: metrics.ALPHA,
	})

	registerOnce sync.Once
)

// instances are the live plugin instances, one per profile that enables the
// plugin. The collectors below read them all when scraped.
var instances = &registry{plugins: map[*Plugin]bool{}}

type registry struct {
	mu      sync.Mutex
	plugins map[*Plugin]bool
}

func (r *registry) add(pl *Plugin) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.plugins[pl] = true
}

func (r *registry) remove(pl *Plugin) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.plugins, pl)
}

func (r *registry) each(f func(*Plugin)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for pl := range r.plugins {
		f(pl)
	}
}

// gangCollector reports gauges from the plugins' state when scraped, so the
// figures are never stale.
type gangCollector struct {
	metrics.BaseStableCollector
}

var (
	waitingDesc = metrics.NewDesc(metrics.BuildFQName("", metricsSubsystem, "waiting_gangs"),
		"Gangs that are not scheduled yet, by state: members (held until their PodGroup and minMember members exist) or placing (a plan holds capacity while members reserve).",
		[]string{"state"}, nil, metrics.ALPHA, "")
	permitDesc = metrics.NewDesc(metrics.BuildFQName("", metricsSubsystem, "members_waiting_in_permit"),
		"Members reserved by a gang attempt in flight: they hold their nodes and wait in Permit for the rest of their gang.",
		nil, nil, metrics.ALPHA, "")
	belowMinDesc = metrics.NewDesc(metrics.BuildFQName("", metricsSubsystem, "running_gangs_below_min_member"),
		"Running gangs with fewer than minMember members placed (bound, reserved or succeeded) because members were lost.",
		nil, nil, metrics.ALPHA, "")
	heldDesc = metrics.NewDesc(scheduling.HeldCapacityMetric,
		"Capacity that plans of gangs in flight and the head hold keep from other pods with no pod reserved on it yet, by resource. Members reserved and waiting in Permit are not in it.",
		[]string{"resource"}, nil, metrics.ALPHA, "")
)

func (c *gangCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- waitingDesc
	ch <- permitDesc
	ch <- belowMinDesc
	ch <- heldDesc
}

func (c *gangCollector) CollectWithStability(ch chan<- metrics.Metric) {
	var members, placing, reserved, below int
	held := capacity.Amounts{}
	instances.each(func(pl *Plugin) {
		held.Add(pl.ledger.Held())
		m, p, r := pl.ledger.Waiting()
		members += m
		placing += p
		reserved += r
		below += pl.belowMinMember()
	})
	ch <- metrics.NewLazyConstMetric(waitingDesc, metrics.GaugeValue, float64(members), "members")
	ch <- metrics.NewLazyConstMetric(waitingDesc, metrics.GaugeValue, float64(placing), "placing")
	ch <- metrics.NewLazyConstMetric(permitDesc, metrics.GaugeValue, float64(reserved))
	ch <- metrics.NewLazyConstMetric(belowMinDesc, metrics.GaugeValue, float64(below))
	for _, name := range held.Names() {
		ch <- metrics.NewLazyConstMetric(heldDesc, metrics.GaugeValue, float64(held[name]), string(name))
	}
}

// belowMinMember counts the running gangs that miss members to reach
// minMember.
func (pl *Plugin) belowMinMember() int {
	n := 0
	for _, key := range pl.ledger.Reservations.AdmittedKeys() {
		u, err := pl.readUnit(key)
		if err != nil {
			continue
		}
		if q := u.Quorum(pl.viewOf(key)); q.Census.HoldsNode() && !q.Placed {
			n++
		}
	}
	return n
}

// registerMetrics registers the metrics once per process.
func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(timeToSchedule, attempts, domainsSpanned, replacements, holdsTaken, holdsEnded,
			preemptions, preemptionVictims, preemptorTimeToBound, consolidations, consolidatedGangs)
		legacyregistry.CustomMustRegister(&gangCollector{})
	})
}
