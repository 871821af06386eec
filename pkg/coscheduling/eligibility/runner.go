package eligibility

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/gpu-gang/gpu-gang/pkg/contract"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
)

// A plan is only as good as the nodes it may use. The planner counts
// resources; whether a member may run on a node at all is what the
// profile's Filter plugins decide: taints, node affinity and selectors, host
// ports, inter-pod affinity and anti-affinity, topology spread, volume
// limits, DRA claims, and any out-of-tree filter. So the plugin asks them.
//
//   - Eligibility: members are grouped into templates (members that Filter
//     plugins cannot tell apart: the same requests, affinity, ports,
//     volumes...). Each template runs the profile's PreFilter plugins once
//     and its Filter plugins on every node. A node is eligible unless a
//     Filter plugin other than the resource fit rejects it: capacity is the
//     planner's to count, and counts what will free up too.
//   - Verification: members can exclude each other (anti-affinity between
//     ranks, the same host port, topology spread among themselves). When a
//     template has such constraints, the plan is replayed member by member
//     in rank order on copies of the planned nodes, each placed member added
//     to the later members' view, and every member run through Filter where
//     the plan puts it.
//   - Lessons: a member that fails beside its siblings but not on the bare
//     node teaches a cap per node for its template; any other failure
//     excludes that node for the template. The planner then plans again. A
//     plan that failed is never tried again, and a Filter rejection in a
//     real scheduling cycle (PostFilter) teaches the same way.

// Selection picks nodes by their position in a plan's node list: every
// node (All), or those whose entry in a mask is a given value (Where).
type Selection struct {
	mask []bool
	want bool
}

// All selects every node.
var All = Selection{}

// Where selects the nodes whose entry in mask is want.
func Where(mask []bool, want bool) Selection { return Selection{mask: mask, want: want} }

// Has reports whether the node at position i is selected.
func (s Selection) Has(i int) bool { return s.mask == nil || s.mask[i] == s.want }

// preFilterRunner runs the profile's PreFilter plugins. The scheduling
// framework that hands out the plugin's Handle (kube-scheduler's
// frameworkImpl, in pkg/scheduler/framework/runtime) implements it: the
// plugin API's Handle runs Filter plugins but not PreFilter ones. A handle
// that does not (a test double, another framework) leaves the runner with
// the static checks of eligibleNodes.
type preFilterRunner interface {
	RunPreFilterPlugins(ctx context.Context, state fwk.CycleState, pod *v1.Pod) (*fwk.PreFilterResult, *fwk.Status, sets.Set[string])
}

// Runner decides which nodes each template may use, by running the
// profile's PreFilter and Filter plugins for it, and keeps the Filter
// verdicts that outlive a plan. The gang plugin builds one in New and
// shares it between its cycles; it is safe for concurrent use.
type Runner struct {
	handle fwk.Handle
	// preFilter is handle's PreFilter runner; nil when handle has none.
	preFilter preFilterRunner
	// plugin is the name rejections the runner makes itself are
	// attributed to (a lesson's exclusion, an allocated claim's node).
	plugin string
	// devices reads the DRA claims a template's stand-in leaves out
	// (withoutCountedClaims); nil when the framework has no DRA manager.
	devices *dra.DeviceSource
	// keptVerdicts is made on first use: the profile's Filter plugins it
	// reads are listed only once the framework has built every plugin.
	keptVerdictsOnce sync.Once
	keptVerdicts     *VerdictCache
}

// NewRunner returns the Runner for the plugin named plugin, over handle and
// the plugin's device source (nil without DRA).
func NewRunner(handle fwk.Handle, plugin string, devices *dra.DeviceSource) *Runner {
	r := &Runner{handle: handle, plugin: plugin, devices: devices}
	if p, ok := handle.(preFilterRunner); ok {
		r.preFilter = p
	}
	return r
}

// RunsPlugins reports whether the runner runs the profile's PreFilter and
// Filter plugins; without, eligibility is the static checks of
// eligibleNodes, and plans cannot be verified member by member.
func (r *Runner) RunsPlugins() bool { return r.preFilter != nil }

// Eligibility fills each template's eligible nodes: the profile's Filter
// plugins, run on every node, less the nodes the gang's lessons exclude.
// Without a PreFilter runner it falls back to eligibleNodes.
func (r *Runner) Eligibility(ctx context.Context, templates []*Template, nodeInfos []fwk.NodeInfo, lv ledger.LessonView) {
	r.PreFilter(ctx, templates, nodeInfos, lv)
	r.Filter(ctx, templates, nodeInfos, All)
}

// PreFilter readies each template for Filter: its cap from the
// gang's lessons, the profile's PreFilter plugins run once, and an
// eligibility slice that says no everywhere until Filter has run
// there. Without a PreFilter runner the static checks of eligibleNodes
// decide it whole.
func (r *Runner) PreFilter(ctx context.Context, templates []*Template, nodeInfos []fwk.NodeInfo, lv ledger.LessonView) {
	logger := klog.FromContext(ctx)
	simCtx := contract.WithSimulation(ctx)
	ext := r.ExtendedClaims()
	for _, t := range templates {
		if n, ok := lv.PerNode[t.Sig]; ok && (t.PerNode == 0 || n < t.PerNode) {
			t.PerNode = n
		}
		t.Excluded = lv.Excluded[t.Sig]
		if r.preFilter == nil {
			t.Eligible = eligibleNodes(logger, t.Pod, nodeInfos)
			for i, ni := range nodeInfos {
				if t.Excluded.Has(ni.Node().Name) || t.PinnedAway(ni.Node()) != nil {
					t.Eligible[i] = false
				}
			}
			continue
		}
		t.State = framework.NewCycleState()
		// Devices the model counts need no DynamicResources PreFilter
		// (withoutclaims.go); GPUFleet reads the member's demand still.
		pod := t.Pod
		if s, ok := r.WithoutCountedClaims(t, ext); ok {
			pod = s
			contract.WithDemandPod(t.State, t.Pod)
		}
		res, status, _ := r.preFilter.RunPreFilterPlugins(simCtx, t.State, pod)
		t.Eligible = make([]bool, len(nodeInfos))
		if !status.IsSuccess() && !status.IsSkip() {
			t.Rejected = status
			continue
		}
		if res != nil && !res.AllNodes() {
			t.Nodes = res.NodeNames
		}
		// Capacity is the planner's to count, and it counts what will free
		// up too: the resource fit is skipped, so the plugins after it
		// still say what else would turn the member away.
		skip := capacityFilters
		if t.DevicesCounted {
			skip = skip.Union(sets.New(names.DynamicResources))
		}
		t.State.SetSkipFilterPlugins(t.State.GetSkipFilterPlugins().Union(skip))
		t.Pending = true
	}
}

// Filter runs each template's Filter plugins on the nodes only selects
// and fills eligible and rejections there. A node is Filtered once per
// template: callers split the nodes between calls, never overlap them (see
// RoomyFirst).
func (r *Runner) Filter(ctx context.Context, templates []*Template, nodeInfos []fwk.NodeInfo, only Selection) {
	simCtx := contract.WithSimulation(ctx)
	for _, t := range templates {
		if !t.Pending {
			continue // decided whole by PreFilter
		}
		statuses := make([]*fwk.Status, len(nodeInfos))
		r.handle.Parallelizer().Until(ctx, len(nodeInfos), func(i int) {
			if !only.Has(i) {
				return
			}
			ni := nodeInfos[i]
			name := ni.Node().Name
			switch {
			case t.Excluded.Has(name):
				statuses[i] = fwk.NewStatus(fwk.Unschedulable, "a plan that put a member here failed Filter").WithPlugin(r.plugin)
			case t.Nodes != nil && !t.Nodes.Has(name):
				statuses[i] = fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "excluded by a PreFilter plugin")
			default:
				if pin := t.PinnedAway(ni.Node()); pin != nil {
					statuses[i] = fwk.NewStatus(fwk.UnschedulableAndUnresolvable, pin.Describe()).WithPlugin(r.plugin)
					return
				}
				s := r.handle.RunFilterPlugins(simCtx, t.State, t.Pod, ni)
				t.Eligible[i] = Acceptable(s)
				statuses[i] = s
			}
		}, r.plugin)
		for i, s := range statuses {
			if !t.Eligible[i] && s != nil {
				if t.Rejections == nil {
					t.Rejections = map[string]int{}
				}
				t.Rejections[s.Plugin()+": "+s.Message()]++
			}
		}
	}
}

// StillRejects tells, node by node, whether the profile's Filter plugins
// turn pod away from nodeInfos now for a reason other than capacity, run
// afresh as eligibility runs them. A rejection that MayBeStale teaches a
// lesson only if it still holds. Without a PreFilter runner the runner
// cannot tell, and says every node still rejects.
func (r *Runner) StillRejects(ctx context.Context, pod *v1.Pod, nodeInfos []fwk.NodeInfo) []bool {
	out := make([]bool, len(nodeInfos))
	everywhere := func() []bool {
		for i := range out {
			out[i] = true
		}
		return out
	}
	if r.preFilter == nil {
		return everywhere()
	}
	simCtx := contract.WithSimulation(ctx)
	state := framework.NewCycleState()
	res, status, _ := r.preFilter.RunPreFilterPlugins(simCtx, state, pod)
	if !status.IsSuccess() && !status.IsSkip() {
		return everywhere()
	}
	state.SetSkipFilterPlugins(state.GetSkipFilterPlugins().Union(capacityFilters))
	for i, ni := range nodeInfos {
		if res != nil && !res.AllNodes() && !res.NodeNames.Has(ni.Node().Name) {
			out[i] = true
			continue
		}
		out[i] = !Acceptable(r.handle.RunFilterPlugins(simCtx, state, pod, ni))
	}
	return out
}
