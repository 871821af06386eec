package coscheduling

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/consolidate"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/preempt"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/preemption"
)

// Consolidation lives in package consolidate; this file is the plugin's
// side of it: building it from the args, and its Events and metrics.

// Reasons of the Events a consolidation records.
const (
	// ReasonMoved is on a gang moved to free a domain for another.
	ReasonMoved = consolidate.ReasonMoved
	// ReasonConsolidating is on the gang gangs are moved for.
	ReasonConsolidating = consolidate.ReasonConsolidating
	// ReasonNotConsolidated is on a gang for which a move would make room
	// if the gangs moved could run elsewhere, which they cannot.
	ReasonNotConsolidated = consolidate.ReasonNotConsolidated
)

// newConsolidator builds the plugin's consolidation over its preemption,
// deciding with d and planning moved gangs with planner. nil when the args
// leave it off, or when there is no engine (the planner has no topology
// tree): then nothing is moved.
func (pl *Plugin) newConsolidator(d preempt.Decider, planner placement.Planner) *consolidate.Consolidator {
	trees, ok := planner.(preemption.TreeSource)
	if !pl.args.Consolidation.Enabled || d == nil || !ok {
		return nil
	}
	return consolidate.New(consolidate.Config{
		Policy:   consolidate.NewPolicy(pl.args.Consolidation, pl.clock),
		Mover:    pl.preempter,
		Decider:  d,
		Planner:  planner,
		Trees:    trees,
		Reporter: consolidateReporter{pl},
		Wake: func(key gang.Key, d time.Duration) {
			pl.ledger.Timers.After(key, ledger.ConsolidationTimer, d, func() { pl.activate(key) })
		},
	})
}

// consolidateReporter records a consolidation's Events and metrics.
type consolidateReporter struct{ pl *Plugin }

var _ consolidate.Reporter = consolidateReporter{}

func (r consolidateReporter) GangEvent(spec *gang.Spec, related *v1.Pod, eventType, reason, format string, args ...any) {
	r.pl.events.gang(spec, related, eventType, reason, format, args...)
}

func (r consolidateReporter) Moved(gangs int) {
	consolidations.Inc()
	consolidatedGangs.Add(float64(gangs))
}
