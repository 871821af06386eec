package coscheduling

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/eligibility"
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
		Planning:    a,
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

// preemptAdapter gives package preempt the plugin's gangs, planning, holds
// and Events (preempt.Gangs, Planning, Holds, Reporter).
type preemptAdapter struct{ pl *Plugin }

var (
	_ preempt.Gangs    = preemptAdapter{}
	_ preempt.Planning = preemptAdapter{}
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

func (a preemptAdapter) LiveNodes(nodeInfos []fwk.NodeInfo) []fwk.NodeInfo {
	return a.pl.liveNodes(nodeInfos)
}

func (a preemptAdapter) Demand(ctx context.Context, spec *gang.Spec, members []*v1.Pod, nodes []fwk.NodeInfo, eligible []bool) (preempt.Demand, *fwk.Status) {
	d, status := a.pl.demandOf(ctx, spec, members, 0)
	if status != nil {
		return nil, status
	}
	templates, of := eligibility.TemplatesOf(members, d.Requests)
	markCounted(d, templates, of)
	if spec != nil {
		a.pl.gangEligibility(ctx, spec, members, templates, nodes) // a bad gang leaves no node eligible
	} else {
		templates[0].Eligible = eligible
	}
	return &preemptDemand{pl: a.pl, spec: spec, members: members, nodes: nodes, d: d, templates: templates, of: of}, nil
}

func (a preemptAdapter) HoldPlan(spec *gang.Spec, members []*v1.Pod, slots []ledger.Slot, until time.Time, plan *placement.Plan, req *placement.Request) {
	if wasHead := a.pl.ledger.HoldPlan(spec.Key, slots, until, plan, fingerprint(members, plan, req)); wasHead {
		holdsEnded.WithLabelValues(holdFilled).Inc()
	}
}

func (a preemptAdapter) Timeout(spec *gang.Spec) time.Duration { return a.pl.timeout(spec) }
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

// preemptDemand is a preemptor's demand as one planning pass reads it
// (demandOf), with its members' templates and eligibility.
type preemptDemand struct {
	pl        *Plugin
	spec      *gang.Spec
	members   []*v1.Pod
	nodes     []fwk.NodeInfo
	d         *dra.PassDemand
	templates []*eligibility.Template
	of        []int
}

func (pd *preemptDemand) Unplaceable() *v1.Pod {
	for _, t := range pd.templates {
		if !anyTrue(t.Eligible) {
			return t.Pod
		}
	}
	return nil
}

func (pd *preemptDemand) Request(ctx context.Context, key gang.Key, taken map[string]capacity.Amounts) (*placement.Request, *fwk.Status) {
	req := pd.pl.buildRequest(ctx, key, pd.members, pd.d, pd.nodes, taken, pd.templates, pd.of)
	if pd.spec != nil {
		if status := pd.pl.shapeRequest(pd.spec, pd.members, pd.d, req, pd.nodes); status != nil {
			return nil, status
		}
	}
	return req, nil
}

func (pd *preemptDemand) PerMember() []capacity.Amounts { return pd.d.Requests }

func (pd *preemptDemand) VictimCounter(dims []v1.ResourceName) preempt.VictimCounter {
	d := pd.d
	cols := d.Columns(dims)
	return func(ctx context.Context, victim *v1.Pod, requests capacity.Amounts, ni fwk.NodeInfo) (placement.Vector, int64) {
		freed := toVector(dims, requests)
		if d.Devices == nil || ni == nil {
			return freed, 0
		}
		taken := pd.pl.devices.AllocatedPositions(d.Devices, victim.Spec.NodeName, []*v1.Pod{victim})
		for c := range cols {
			if cols[c].MayUseDevices && cols[c].Devices.ServedByDevices(ctx, dra.NodeCapacity{Info: ni}) {
				freed[c] = cols[c].Devices.Counted(ctx, dra.NodeCapacity{Info: ni}, taken)
			}
		}
		return freed, int64(taken.Count())
	}
}

func (pd *preemptDemand) Explain(req *placement.Request, text string) string {
	return pd.d.DescribeText(req, text)
}
