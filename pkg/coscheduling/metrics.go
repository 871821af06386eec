package coscheduling

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metrics on kube-scheduler's /metrics endpoint. Names follow the Prometheus
// and Kubernetes conventions: a gpu_gang_ prefix, base units in the name,
// _total for counters.
const metricsSubsystem = "gpu_gang"

// Attempt results, the values of the result label.
const (
	resultScheduled = "scheduled"
	resultTimedOut  = "timed_out"
	resultRejected  = "rejected"
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
		Help:           "Gang scheduling attempts that ended, by result: scheduled, timed_out (members waited past the schedule timeout) or rejected (a member failed).",
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

	registerOnce sync.Once
)

// waitingCollector reports gpu_gang_waiting_gangs from the plugin's state
// when scraped, so the figure is never stale.
type waitingCollector struct {
	metrics.BaseStableCollector
	gangs *gangs
}

var waitingDesc = metrics.NewDesc(metrics.BuildFQName("", metricsSubsystem, "waiting_gangs"),
	"Gangs that are not scheduled yet, by state: members (held until their PodGroup and minMember members exist) or placing (a plan holds capacity while members reserve).",
	[]string{"state"}, nil, metrics.ALPHA, "")

func (c *waitingCollector) DescribeWithStability(ch chan<- *metrics.Desc) { ch <- waitingDesc }

func (c *waitingCollector) CollectWithStability(ch chan<- metrics.Metric) {
	members, placing := c.gangs.waiting()
	ch <- metrics.NewLazyConstMetric(waitingDesc, metrics.GaugeValue, float64(members), "members")
	ch <- metrics.NewLazyConstMetric(waitingDesc, metrics.GaugeValue, float64(placing), "placing")
}

// registerMetrics registers the metrics once per process; the waiting-gangs
// collector reads the first plugin instance's state (there is one profile).
func registerMetrics(gs *gangs) {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(timeToSchedule, attempts, domainsSpanned)
		legacyregistry.CustomMustRegister(&waitingCollector{gangs: gs})
	})
}
