package coscheduling

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/core"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/preempt"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Gang-aware preemption lives in package preempt; this file is the
// plugin's side of it: the preemptor a PostFilter cycle asks for, and what
// the package reads and writes through the plugin (preemptAdapter).

// ErrReasonAwaitingVictims starts the status of a preemptor that waits for
// the pods it preempted to terminate.
const ErrReasonAwaitingVictims = preempt.ErrReasonAwaitingVictims

// newPreempter builds the plugin's preemption over its informers, ledger and
// planning, deciding with d (nil: nothing is preempted).
func (pl *Plugin) newPreempter(d preempt.Decider) *preempt.Preempter {
	a := preemptAdapter{pl}
	return preempt.New(preempt.Config{
		PluginName:  Name,
		Framework:   pl.handle,
		Gangs:       a,
		Planning:    pl.core,
		Holds:       a,
		Reporter:    a,
		Decider:     d,
		Preemptions: pl.ledger.Preemptions,
		Pods:        pl.podIndex,
		PDBs:        pl.pdbLister,
		Clock:       pl.clock,
		Logger:      pl.logger,
	})
}

// preemptorName names a preemptor for people: its PodGroup's or its own
// namespace/name.
func (pl *Plugin) preemptorName(pod *v1.Pod) string {
	if key, ok := pl.unitOf(pod); ok {
		return key.String()
	}
	return pod.Namespace + "/" + pod.Name
}

// preemptorOf says what preemption would place for pod: the members
// PreFilter could not place for want of room, or the pod alone outside
// gangs. ok is false when preemption cannot help: the gang waits for
// members, backs off, could never fit, or its plan went stale.
func (pl *Plugin) preemptorOf(s *cycleState, pod *v1.Pod) (*preempt.Preemptor, bool) {
	p := &preempt.Preemptor{Pod: pod, Members: []*v1.Pod{pod}, ID: pl.ownerOf(pod), Name: pl.preemptorName(pod),
		Priority: corev1helpers.PodPriority(pod)}
	if _, isMember := gang.Of(pod); isMember {
		if len(s.unplaced) == 0 || s.unplacedStatus.Code() != fwk.Unschedulable {
			return nil, false
		}
		p.Spec, p.Members = s.spec, s.unplaced
		if s.spec != nil && s.spec.Priority != nil {
			// A gang's own priority (a native PodGroup's) is what it
			// preempts with.
			p.Priority = *s.spec.Priority
		}
	}
	return p, true
}

// preemptAdapter gives package preempt the plugin's gangs, holds and
// Events (preempt.Gangs, Holds, Reporter); its planning is the core
// planner's (core.Planner is a preempt.Planning).
type preemptAdapter struct{ pl *Plugin }

var (
	_ preempt.Gangs    = preemptAdapter{}
	_ preempt.Holds    = preemptAdapter{}
	_ preempt.Reporter = preemptAdapter{}
)

func (a preemptAdapter) UnitOf(pod *v1.Pod) (gang.Key, bool) { return a.pl.unitOf(pod) }
func (a preemptAdapter) OwnerOf(pod *v1.Pod) string          { return a.pl.ownerOf(pod) }
func (a preemptAdapter) Members(key gang.Key) ([]*v1.Pod, error) {
	return a.pl.members(key)
}
func (a preemptAdapter) Census(key gang.Key, members []*v1.Pod) gang.Census {
	return a.pl.census(key, members)
}
func (a preemptAdapter) Unit(key gang.Key) (gang.Unit, gang.View, error) {
	u, err := a.pl.readUnit(key)
	return u, a.pl.viewOf(key), err
}

func (a preemptAdapter) HoldPlan(spec *gang.Spec, members []*v1.Pod, slots []ledger.Slot, until time.Time, plan *placement.Plan, req *placement.Request) {
	if wasHead := a.pl.ledger.HoldPlan(spec.Key, slots, until, plan, core.Fingerprint(members, plan, req)); wasHead {
		holdsEnded.WithLabelValues(holdFilled).Inc()
	}
	a.pl.core.HeldForRails(spec.Key, req)
}

func (a preemptAdapter) HoldMoved(spec *gang.Spec, members []*v1.Pod, slots []ledger.Slot, until time.Time, plan *placement.Plan, req *placement.Request) {
	a.pl.ledger.HoldMoved(spec.Key, slots, until, plan, core.Fingerprint(members, plan, req))
}

func (a preemptAdapter) Timeout(spec *gang.Spec) time.Duration { return a.pl.core.Timeout(spec) }
func (a preemptAdapter) Nominate(uid types.UID, node string)   { a.pl.nominations.Nominate(uid, node) }
func (a preemptAdapter) FailGang(ctx context.Context, key gang.Key, reason, why string, penalize bool) {
	a.pl.failGang(ctx, key, reason, why, penalize)
}

func (a preemptAdapter) GangEvent(spec *gang.Spec, related *v1.Pod, eventType, reason, format string, args ...any) {
	a.pl.events.gang(spec, related, eventType, reason, format, args...)
}
func (a preemptAdapter) PodEvent(pod *v1.Pod, eventType, reason, format string, args ...any) {
	a.pl.events.pod(pod, eventType, reason, format, args...)
}

func (a preemptAdapter) Preempted(byGang bool, victims int) {
	kind := "pod"
	if byGang {
		kind = "gang"
	}
	preemptions.WithLabelValues(kind).Inc()
	preemptionVictims.Observe(float64(victims))
}

func (a preemptAdapter) PreemptorBound(sinceCreated time.Duration) {
	preemptorTimeToBound.Observe(sinceCreated.Seconds())
}
