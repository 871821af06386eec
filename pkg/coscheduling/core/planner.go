package core

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/computedomain"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/eligibility"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// pluginName names the plugin in the rejections it adds to a template's
// Filter pass (reject).
const pluginName = config.CoschedulingPluginName

// What planning needs from the plugin it serves, grouped by concern. The
// plugin implements them over its informers, its queue and what people
// see; this package never sees the plugin itself.

// Framework is the part of the scheduler framework's handle planning uses:
// the cycle's snapshot, the profile's Filter plugins (a plan's
// verification) and the queue's nominations. fwk.Handle satisfies it.
type Framework interface {
	SnapshotSharedLister() fwk.SharedLister
	RunFilterPlugins(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status
	RunPreFilterExtensionAddPod(ctx context.Context, state fwk.CycleState, podToSchedule *v1.Pod, podInfoToAdd fwk.PodInfo, nodeInfo fwk.NodeInfo) *fwk.Status
	NominatedPodsForNode(nodeName string) []fwk.PodInfo
}

// Gangs reads the plugin's admission units. It only reads.
type Gangs interface {
	// Unit reads the unit key names, with its members (gang.UnitOf).
	Unit(key gang.Key) (gang.Unit, error)
	// Members lists a unit's live members without reading the rest of it.
	Members(key gang.Key) ([]*v1.Pod, error)
	// Spec returns a unit's Spec if its object exists.
	Spec(key gang.Key) (*gang.Spec, bool)
	// QueueOrderOf places a pod in queue order (ledger.QueueOrder).
	QueueOrderOf(pod *v1.Pod) ledger.QueueOrder
}

// Queue brings a gang's pods back to the scheduler's active queue when a
// plan or the end of a hold gives them something new to try.
type Queue interface {
	// Activate moves a unit's unscheduled members to the active queue.
	Activate(key gang.Key)
	// ActivateBlocked moves the pods held capacity turned away to the
	// active queue.
	ActivateBlocked()
}

// Reporter records what planning found: Events and the head hold's
// metrics.
type Reporter interface {
	// GangEvent records an Event regarding a gang's API object; related,
	// if not nil, is the member that prompted it.
	GangEvent(spec *gang.Spec, related *v1.Pod, eventType, reason, format string, args ...any)
	// HoldTaken counts a head turn taken.
	HoldTaken()
	// HoldEnded counts a head hold that ended: filled when the gang found
	// room for its whole plan, else its turn ran out.
	HoldEnded(filled bool)
}

// Config is what a Planner is built with, once, by the plugin's New.
type Config struct {
	Framework Framework
	Gangs     Gangs
	Queue     Queue
	Reporter  Reporter
	// Placement places a request's members on its nodes (pkg/topology).
	Placement placement.Planner
	// Levels are the topology levels of the plugin's args, tightest
	// first, against which segments and ComputeDomains are checked.
	Levels []scheduling.Level
	// RailUnit is the level of a rail-optimized fabric's scalable unit,
	// within which a rail-aligned gang's members use one rail set; the
	// zero Level makes the whole gang one unit.
	RailUnit scheduling.Level
	// Eligibility runs the profile's PreFilter and Filter plugins for the
	// templates of members being planned, and keeps their verdicts.
	Eligibility *eligibility.Runner
	// Ledger is the plugin's memory of gangs: what it promised each one.
	Ledger *ledger.Ledger
	// Devices reads capacity published through Dynamic Resource
	// Allocation; nil when the framework has no DRA manager.
	Devices *dra.DeviceSource
	// Claims allocates the claims members share and explains bad DRA
	// input.
	Claims *dra.GangClaims
	// Nodes is the scheduler's node informer, which runs ahead of a
	// cycle's snapshot.
	Nodes corelisters.NodeLister
	// Nominations are the nodes that may have a nominated pod.
	Nominations *eligibility.Nominations
	Clock       clock.PassiveClock
	// DefaultTimeout is how long an attempt of a gang that sets no timeout
	// of its own may take.
	DefaultTimeout time.Duration
	// Logger is for work that outlives a scheduling cycle (timers).
	Logger klog.Logger
}

// Planner plans gangs: PlanGang for a unit's next batch, Demand for a
// preemptor. Its state is what plans keep between them: the planning
// snapshot, the ComputeDomain of each gang that joins one, and the node
// generation.
type Planner struct {
	framework   Framework
	gangs       Gangs
	queue       Queue
	reporter    Reporter
	placement   placement.Planner
	levels      []scheduling.Level
	railUnit    scheduling.Level
	eligibility *eligibility.Runner
	ledger      *ledger.Ledger
	devices     *dra.DeviceSource
	gangClaims  *dra.GangClaims
	nodeLister  corelisters.NodeLister
	nominations *eligibility.Nominations
	clock       clock.PassiveClock
	timeout     time.Duration
	logger      klog.Logger

	// computeDomains remembers the ComputeDomain of each gang that joins
	// one (computedomain.go).
	computeDomains *computedomain.Registry[gang.Key]
	// railNoted are the gangs told that the kubelet picks their GPUs, so
	// that no rails can be aligned (rails.go).
	railNoted sync.Map
	// realign are the gangs whose held plan a preemption made with a rail
	// set (HeldForRails), to be planned again for their rails.
	realign sync.Map
	// nodeGeneration changes whenever a node is added or deleted or its
	// labels change, so planners may cache what they derive from labels.
	nodeGeneration atomic.Uint64
	// snapshot keeps what plans read of each node between plans.
	snapshot eligibility.Snapshot
	// fullScan makes every plan run Filter on every node first
	// (eligibility.Runner.RoomyFirst); tests set it to compare the two.
	fullScan bool
}

// New builds a Planner over cfg.
func New(cfg Config) *Planner {
	return &Planner{
		framework:      cfg.Framework,
		gangs:          cfg.Gangs,
		queue:          cfg.Queue,
		reporter:       cfg.Reporter,
		placement:      cfg.Placement,
		levels:         cfg.Levels,
		railUnit:       cfg.RailUnit,
		eligibility:    cfg.Eligibility,
		ledger:         cfg.Ledger,
		devices:        cfg.Devices,
		gangClaims:     cfg.Claims,
		nodeLister:     cfg.Nodes,
		nominations:    cfg.Nominations,
		clock:          cfg.Clock,
		timeout:        cfg.DefaultTimeout,
		logger:         cfg.Logger,
		computeDomains: computedomain.NewRegistry[gang.Key](cfg.Levels),
	}
}

// Timeout is how long an attempt of the gang may take: its own timeout, or
// the plugin default.
func (pl *Planner) Timeout(spec *gang.Spec) time.Duration {
	if spec.Timeout > 0 {
		return spec.Timeout
	}
	return pl.timeout
}

// NodesChanged says that a node was added or deleted or its labels changed:
// what plans derived from labels is stale.
func (pl *Planner) NodesChanged() { pl.nodeGeneration.Add(1) }

// NodeGeneration is the count of NodesChanged calls.
func (pl *Planner) NodeGeneration() uint64 { return pl.nodeGeneration.Load() }

// ForgetGang forgets the ComputeDomain the gang's last pass found: its
// PodGroup is gone.
func (pl *Planner) ForgetGang(key gang.Key) {
	pl.computeDomains.Set(key, nil)
	pl.railNoted.Delete(key)
	pl.realign.Delete(key)
}

// Snapshot is the planning snapshot: what plans read of each node, kept
// between plans.
func (pl *Planner) Snapshot() *eligibility.Snapshot { return &pl.snapshot }

// Eligibility is the runner that says which nodes members may use.
func (pl *Planner) Eligibility() *eligibility.Runner { return pl.eligibility }

// SetFullScan makes every plan run Filter on every node before it plans
// when full is set, instead of on the roomiest nodes first
// (eligibility.Runner.RoomyFirst); tests and benchmarks compare the two.
func (pl *Planner) SetFullScan(full bool) { pl.fullScan = full }
