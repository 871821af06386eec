package coscheduling

import (
	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/core"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
)

// Planning a gang is package core's (core.Planner, built in newPlugin);
// this file is what it asks of the plugin: its units, its queue, its
// Events and metrics.

// planningAdapter is the plugin as core.Planner sees it: its units
// (core.Gangs), its queue (core.Queue), its Events and metrics
// (core.Reporter).
type planningAdapter struct{ pl *Plugin }

var (
	_ core.Gangs    = planningAdapter{}
	_ core.Queue    = planningAdapter{}
	_ core.Reporter = planningAdapter{}
)

func (g planningAdapter) Unit(key gang.Key) (gang.Unit, error)       { return g.pl.readUnit(key) }
func (g planningAdapter) Members(key gang.Key) ([]*v1.Pod, error)    { return g.pl.members(key) }
func (g planningAdapter) Spec(key gang.Key) (*gang.Spec, bool)       { return g.pl.lookup(key) }
func (g planningAdapter) QueueOrderOf(pod *v1.Pod) ledger.QueueOrder { return g.pl.queueOrderOf(pod) }
func (g planningAdapter) Activate(key gang.Key)                      { g.pl.activate(key) }
func (g planningAdapter) ActivateBlocked()                           { g.pl.activateBlocked() }
func (g planningAdapter) HoldTaken()                                 { holdsTaken.Inc() }

func (g planningAdapter) GangEvent(spec *gang.Spec, related *v1.Pod, eventType, reason, format string, args ...any) {
	g.pl.events.gang(spec, related, eventType, reason, format, args...)
}

func (g planningAdapter) HoldEnded(filled bool) {
	if filled {
		holdsEnded.WithLabelValues(holdFilled).Inc()
		return
	}
	holdsEnded.WithLabelValues(holdExpired).Inc()
}
