package preempt

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/preemption"
)

// What preemption needs from the plugin it serves, grouped by concern. The
// plugin implements them over its informers, its ledger and its planning;
// this package never sees the plugin itself.

// Framework is the part of the scheduler framework's handle preemption
// uses: the cycle's snapshot, the queue's nominations, the API client and
// the parallelizer that evictions run on. fwk.Handle satisfies it.
type Framework interface {
	SnapshotSharedLister() fwk.SharedLister
	NominatedPodsForNode(nodeName string) []fwk.PodInfo
	ClientSet() kubernetes.Interface
	Parallelizer() fwk.Parallelizer
}

// Gangs reads the plugin's gangs: which admission unit a pod belongs to,
// and the unit itself, which decides how its running members may be taken
// (gang.Unit.VictimUnits, gang.Unit.Disruption) and whether its preemptor
// is bound. It only reads.
type Gangs interface {
	// UnitOf returns the key of the admission unit pod belongs to, if it
	// belongs to a gang.
	UnitOf(pod *v1.Pod) (gang.Key, bool)
	// OwnerOf names the pod's preemptor in the ledger's preemptions: its
	// admission unit's, or the pod's own outside gangs.
	OwnerOf(pod *v1.Pod) string
	// Members lists a unit's live members.
	Members(key gang.Key) ([]*v1.Pod, error)
	// Census counts a unit's members, reserved and succeeded ones apart.
	Census(key gang.Key, members []*v1.Pod) gang.Census
	// Unit reads the unit key names, with what the plugin knows of it
	// beyond the API (the view its decisions read). key is an admission
	// unit's, or a PodGroup's or composite's that a composite lets go on
	// its own (gang.Unit.VictimUnits); an error means it cannot be read.
	Unit(key gang.Key) (gang.Unit, gang.View, error)
}

// Planning describes a preemptor's members to the placement planner as
// PreFilter describes them, so that the engine's request is the planner's.
type Planning interface {
	// LiveNodes returns the snapshot's nodes as PreFilter plans on them:
	// in name order, less those the node informer no longer has.
	LiveNodes(nodeInfos []fwk.NodeInfo) []fwk.NodeInfo
	// Demand reads what members ask of nodes (live nodes, LiveNodes) and
	// where each may run. A gang's eligibility is its own (spec is not
	// nil); a plain pod's is eligible, one entry per node.
	Demand(ctx context.Context, spec *gang.Spec, members []*v1.Pod, nodes []fwk.NodeInfo, eligible []bool) (Demand, *fwk.Status)
}

// Demand is what a preemptor's members ask of the nodes, as one planning
// pass counts it (Planning.Demand).
type Demand interface {
	// Unplaceable returns a member no node accepts whatever runs there,
	// or nil: no eviction makes room for it.
	Unplaceable() *v1.Pod
	// Request describes the members to the planner, with taken (per node)
	// subtracted from the nodes' free capacity, shaped as the gang's
	// policy asks.
	Request(ctx context.Context, key gang.Key, taken map[string]capacity.Amounts) (*placement.Request, *fwk.Status)
	// PerMember is what each member requests, in the order of the members.
	PerMember() []capacity.Amounts
	// VictimCounter counts what victims free in the request's
	// dimensions dims.
	VictimCounter(dims []v1.ResourceName) VictimCounter
	// Explain turns the planner's text about req into words for people:
	// it names device kinds by their dimensions.
	Explain(req *placement.Request, text string) string
}

// VictimCounter returns what victim, which requests requests, frees on
// node (nil when it runs on no node of the request): its requests, but in
// each dimension devices serve there the devices its claims hold, counted
// as the preemptor's kinds count them; and how many devices those are.
type VictimCounter func(ctx context.Context, victim *v1.Pod, requests capacity.Amounts, node fwk.NodeInfo) (freed placement.Vector, devices int64)

// Holds are the plugin's holds on capacity, which a preemption takes for
// its preemptor, and the gang attempts it fails.
type Holds interface {
	// HoldPlan gives a gang's claim the preemption's plan: every member
	// pinned to its slot, until the deadline.
	HoldPlan(spec *gang.Spec, members []*v1.Pod, slots []ledger.Slot, until time.Time, plan *placement.Plan, req *placement.Request)
	// HoldMoved gives a running gang whose pods are evicted to run
	// elsewhere a claim on their new places, which outlives the gang's
	// having no member until the deadline, for the pods its controller
	// recreates.
	HoldMoved(spec *gang.Spec, members []*v1.Pod, slots []ledger.Slot, until time.Time, plan *placement.Plan, req *placement.Request)
	// Timeout is how long an attempt of the gang may take.
	Timeout(spec *gang.Spec) time.Duration
	// Nominate remembers that a pod is nominated to node.
	Nominate(uid types.UID, node string)
	// FailGang ends the gang's attempt in flight, with a backoff if
	// penalize is set.
	FailGang(ctx context.Context, key gang.Key, reason, why string, penalize bool)
}

// Reporter records what preemption did: Events and metrics.
type Reporter interface {
	// GangEvent records an Event regarding a gang's API object; related,
	// if not nil, is the member that prompted it.
	GangEvent(spec *gang.Spec, related *v1.Pod, eventType, reason, format string, args ...any)
	// PodEvent records an Event regarding a pod.
	PodEvent(pod *v1.Pod, eventType, reason, format string, args ...any)
	// Preempted counts a preemption carried out by a gang or a plain pod,
	// and its victims.
	Preempted(byGang bool, victims int)
	// PreemptorBound observes a preemptor's time from creation to bound.
	PreemptorBound(sinceCreated time.Duration)
}

// Decider chooses victims. *preemption.Engine is the one the plugin runs;
// tests wrap it to see the requests it gets.
type Decider interface {
	Decide(ctx context.Context, req *preemption.Request) (*preemption.Decision, error)
}

// Config is what a Preempter works with.
type Config struct {
	// PluginName names the plugin in node statuses (a node only held
	// capacity turned away) and in the parallelizer's metrics.
	PluginName string
	Framework  Framework
	Gangs      Gangs
	Planning   Planning
	Holds      Holds
	Reporter   Reporter
	// Decider chooses victims; nil when the planner cannot give it a
	// topology tree, and then nothing is preempted.
	Decider Decider
	// Preemptions are the ledger's preemptions under way.
	Preemptions *ledger.Preemptions
	// Pods is the scheduler's pod informer, keyed by namespace/name: it
	// runs ahead of the snapshot, and holds no finished pods.
	Pods cache.KeyGetter
	// PDBs reads PodDisruptionBudgets; nil when there are none to honour.
	PDBs  policylisters.PodDisruptionBudgetLister
	Clock clock.PassiveClock
	// Logger is for work outside a scheduling cycle (informer handlers).
	Logger klog.Logger
}

// Preempter makes room for pods by evicting pods of lower priority, and
// follows its preemptors until they bind.
type Preempter struct {
	cfg Config
}

// New returns a Preempter working with cfg.
func New(cfg Config) *Preempter {
	return &Preempter{cfg: cfg}
}

// Decider returns the Preempter's decider; nil when nothing is preempted.
func (pr *Preempter) Decider() Decider {
	return pr.cfg.Decider
}
