package coscheduling

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/contract"
	"github.com/gpu-gang/gpu-gang/pkg/fleet"
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

// preFilterRunner runs the profile's PreFilter plugins. The scheduling
// framework that hands out the plugin's Handle implements it; a handle
// that does not (a test double, another framework) leaves the plugin with
// the static checks of eligibleNodes.
type preFilterRunner interface {
	RunPreFilterPlugins(ctx context.Context, state fwk.CycleState, pod *v1.Pod) (*fwk.PreFilterResult, *fwk.Status, sets.Set[string])
}

// template is a group of members that Filter plugins cannot tell apart.
type template struct {
	sig string
	// pod is the template's first member in rank order; it stands for
	// all of them in PreFilter.
	pod *v1.Pod
	// state is pod's CycleState after the profile's PreFilter plugins;
	// nil when no runner is available.
	state fwk.CycleState
	// nodes restricts the template to these nodes (a PreFilterResult);
	// nil means all.
	nodes sets.Set[string]
	// rejected is set when a PreFilter plugin rejected the template
	// outright; no node is eligible then.
	rejected *fwk.Status
	// excluded are the nodes the gang's lessons exclude for the template.
	excluded sets.Set[string]
	// pending is set when the template's Filter plugins are still to run
	// (filterTemplates); eligible says no where they have not run yet.
	pending bool
	// relational is set when the template's members can exclude each
	// other or their siblings through Filter, so plans are verified.
	relational bool
	// devicesCounted is set when the capacity model counts the template's
	// devices exactly (markCounted): DynamicResources then judges
	// capacity alone for it, and is skipped as the resource fit is.
	devicesCounted bool
	// devices is what pod takes of devices (markCounted); nil when
	// it takes none or was not read.
	devices *capacity.PodDevices
	// pins are the allocated claims that keep the template's members on
	// the nodes that reach their devices (markCounted); the
	// eligibility pass owns this rule (pinnedAway).
	pins []capacity.PinnedClaim
	// perNode is the cap on the template's members per node, 0 for none.
	perNode int
	// eligible[i] says whether the template may run on node i.
	eligible []bool
	// rejections counts, by plugin and message, why nodes were not
	// eligible, for people.
	rejections map[string]int
	// members are indices into the planned members, in rank order.
	members []int
}

// templatesOf groups members (in rank order) into templates. reqs are the
// members' requests (podAmounts), computed once by the caller.
func templatesOf(members []*v1.Pod, reqs []capacity.Amounts) (templates []*template, of []int) {
	of = make([]int, len(members))
	bySig := map[string]int{}
	for i, p := range members {
		sig := filterSignature(p, reqs[i])
		t, ok := bySig[sig]
		if !ok {
			t = len(templates)
			bySig[sig] = t
			templates = append(templates, &template{sig: sig, pod: p, relational: isRelational(p), perNode: staticPerNode(p)})
		}
		templates[t].members = append(templates[t].members, i)
		of[i] = t
	}
	return templates, of
}

// filterSignature identifies what Filter plugins read of a pod, except its
// name and labels: members of one job differ in their rank labels only,
// and sharing one Filter pass per template is what keeps large gangs cheap.
// Constraints that match a member's own labels are checked member by member
// during verification.
func filterSignature(pod *v1.Pod, request capacity.Amounts) string {
	type container struct {
		Ports []v1.ContainerPort `json:"p,omitempty"`
	}
	sig := struct {
		Amounts         capacity.Amounts              `json:"a"`
		NodeName        string                        `json:"n,omitempty"`
		Selector        map[string]string             `json:"s,omitempty"`
		Affinity        *v1.Affinity                  `json:"af,omitempty"`
		Tolerations     []v1.Toleration               `json:"t,omitempty"`
		Spread          []v1.TopologySpreadConstraint `json:"sp,omitempty"`
		Volumes         []v1.Volume                   `json:"v,omitempty"`
		Claims          []v1.PodResourceClaim         `json:"c,omitempty"`
		Containers      []container                   `json:"ct,omitempty"`
		RuntimeClass    *string                       `json:"rc,omitempty"`
		Priority        *int32                        `json:"pr,omitempty"`
		SchedulingGates []v1.PodSchedulingGate        `json:"g,omitempty"`
		Overhead        v1.ResourceList               `json:"o,omitempty"`
		Readiness       []v1.PodReadinessGate         `json:"rg,omitempty"`
		HostNetwork     bool                          `json:"hn,omitempty"`
		OS              *v1.PodOS                     `json:"os,omitempty"`
		// Fleet holds the GPU requirement annotations GPUFleet reads.
		Fleet map[string]string `json:"fl,omitempty"`
	}{
		Amounts: request, NodeName: pod.Spec.NodeName, Selector: pod.Spec.NodeSelector,
		Affinity: pod.Spec.Affinity, Tolerations: pod.Spec.Tolerations, Spread: pod.Spec.TopologySpreadConstraints,
		Volumes: pod.Spec.Volumes, Claims: pod.Spec.ResourceClaims, RuntimeClass: pod.Spec.RuntimeClassName,
		Priority: pod.Spec.Priority, SchedulingGates: pod.Spec.SchedulingGates, Overhead: pod.Spec.Overhead,
		HostNetwork: pod.Spec.HostNetwork, OS: pod.Spec.OS,
	}
	for _, c := range pod.Spec.Containers {
		sig.Containers = append(sig.Containers, container{Ports: c.Ports})
	}
	for _, k := range fleet.AnnotationKeys() {
		if v, ok := pod.Annotations[k]; ok {
			if sig.Fleet == nil {
				sig.Fleet = map[string]string{}
			}
			sig.Fleet[k] = v
		}
	}
	b, err := json.Marshal(sig)
	if err != nil {
		return string(pod.UID) // never shared, never wrong
	}
	return string(b)
}

// isRelational reports whether members like pod can exclude each other, or
// their siblings, through Filter: inter-pod affinity and anti-affinity,
// hard topology spread, host ports, and volumes (limits per node, access
// modes).
func isRelational(pod *v1.Pod) bool {
	if a := pod.Spec.Affinity; a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil) {
		return true
	}
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == v1.DoNotSchedule {
			return true
		}
	}
	if hostPorts(pod) {
		return true
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			return true
		}
	}
	return false
}

func hostPorts(pod *v1.Pod) bool {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort > 0 {
				return true
			}
		}
	}
	return false
}

// staticPerNode is the cap per node that a template's spec shows on its
// face: members that ask for the same host port, or that repel pods like
// themselves from their node, run one per node.
func staticPerNode(pod *v1.Pod) int {
	if hostPorts(pod) {
		return 1
	}
	a := pod.Spec.Affinity
	if a == nil || a.PodAntiAffinity == nil {
		return 0
	}
	for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if term.TopologyKey != v1.LabelHostname || term.LabelSelector == nil {
			continue
		}
		if len(term.Namespaces) > 0 && !slices.Contains(term.Namespaces, pod.Namespace) {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		if err == nil && sel.Matches(labels.Set(pod.Labels)) {
			return 1
		}
	}
	return 0
}

// eligibility fills each template's eligible nodes: the profile's Filter
// plugins, run on every node, less the nodes the gang's lessons exclude.
// Without a PreFilter runner it falls back to eligibleNodes.
func (pl *Plugin) eligibility(ctx context.Context, templates []*template, nodeInfos []fwk.NodeInfo, lv ledger.LessonView) {
	pl.preFilterTemplates(ctx, templates, nodeInfos, lv)
	pl.filterTemplates(ctx, templates, nodeInfos, nil)
}

// preFilterTemplates readies each template for Filter: its cap from the
// gang's lessons, the profile's PreFilter plugins run once, and an
// eligibility slice that says no everywhere until filterTemplates has run
// there. Without a PreFilter runner the static checks of eligibleNodes
// decide it whole.
func (pl *Plugin) preFilterTemplates(ctx context.Context, templates []*template, nodeInfos []fwk.NodeInfo, lv ledger.LessonView) {
	logger := klog.FromContext(ctx)
	simCtx := contract.WithSimulation(ctx)
	ext := pl.extendedClaims()
	for _, t := range templates {
		if n, ok := lv.PerNode[t.sig]; ok && (t.perNode == 0 || n < t.perNode) {
			t.perNode = n
		}
		t.excluded = lv.Excluded[t.sig]
		if pl.runner == nil {
			t.eligible = eligibleNodes(logger, t.pod, nodeInfos)
			for i, ni := range nodeInfos {
				if t.excluded.Has(ni.Node().Name) || t.pinnedAway(ni.Node()) != nil {
					t.eligible[i] = false
				}
			}
			continue
		}
		t.state = framework.NewCycleState()
		// Devices the model counts need no DynamicResources PreFilter
		// (dra_standin.go); GPUFleet reads the member's demand still.
		pod := t.pod
		if s, ok := pl.standIn(t, ext); ok {
			pod = s
			contract.WithDemandPod(t.state, t.pod)
		}
		res, status, _ := pl.runner.RunPreFilterPlugins(simCtx, t.state, pod)
		t.eligible = make([]bool, len(nodeInfos))
		if !status.IsSuccess() && !status.IsSkip() {
			t.rejected = status
			continue
		}
		if res != nil && !res.AllNodes() {
			t.nodes = res.NodeNames
		}
		// Capacity is the planner's to count, and it counts what will free
		// up too: the resource fit is skipped, so the plugins after it
		// still say what else would turn the member away.
		skip := capacityFilters
		if t.devicesCounted {
			skip = skip.Union(sets.New(names.DynamicResources))
		}
		t.state.SetSkipFilterPlugins(t.state.GetSkipFilterPlugins().Union(skip))
		t.pending = true
	}
}

// filterTemplates runs each template's Filter plugins on the nodes i for
// which only(i) holds (every node for a nil only) and fills eligible and
// rejections there. A node is Filtered once per template: callers split
// the nodes between calls, never overlap them (see roomyFirst).
func (pl *Plugin) filterTemplates(ctx context.Context, templates []*template, nodeInfos []fwk.NodeInfo, only func(i int) bool) {
	simCtx := contract.WithSimulation(ctx)
	for _, t := range templates {
		if !t.pending {
			continue // decided whole by preFilterTemplates
		}
		statuses := make([]*fwk.Status, len(nodeInfos))
		pl.handle.Parallelizer().Until(ctx, len(nodeInfos), func(i int) {
			if only != nil && !only(i) {
				return
			}
			ni := nodeInfos[i]
			name := ni.Node().Name
			switch {
			case t.excluded.Has(name):
				statuses[i] = fwk.NewStatus(fwk.Unschedulable, "a plan that put a member here failed Filter").WithPlugin(Name)
			case t.nodes != nil && !t.nodes.Has(name):
				statuses[i] = fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "excluded by a PreFilter plugin")
			default:
				if pin := t.pinnedAway(ni.Node()); pin != nil {
					statuses[i] = fwk.NewStatus(fwk.UnschedulableAndUnresolvable, pin.Describe()).WithPlugin(Name)
					return
				}
				s := pl.handle.RunFilterPlugins(simCtx, t.state, t.pod, ni)
				t.eligible[i] = acceptable(s)
				statuses[i] = s
			}
		}, Name)
		for i, s := range statuses {
			if !t.eligible[i] && s != nil {
				if t.rejections == nil {
					t.rejections = map[string]int{}
				}
				t.rejections[s.Plugin()+": "+s.Message()]++
			}
		}
	}
}

// pinnedAway returns the allocated claim of the template's members whose
// devices node does not reach, nil when it reaches them all. It is the one
// place that keeps members on their allocated claims' nodes: Filter and the
// kept verdicts (verdicts.holds) ask it, so the rule holds also where
// DynamicResources' Filter, which enforces it in kube-scheduler, is skipped
// for a template whose other devices the model counts.
func (t *template) pinnedAway(node *v1.Node) *capacity.PinnedClaim {
	for i := range t.pins {
		if !t.pins[i].Reaches(node) {
			return &t.pins[i]
		}
	}
	return nil
}

// why summarises, for people, why nodes were not eligible: the most common
// rejections first.
func (t *template) why() string {
	if len(t.rejections) == 0 {
		return ""
	}
	type entry struct {
		what  string
		count int
	}
	var es []entry
	for what, n := range t.rejections {
		es = append(es, entry{what, n})
	}
	slices.SortFunc(es, func(a, b entry) int {
		if a.count != b.count {
			return b.count - a.count
		}
		return strings.Compare(a.what, b.what)
	})
	parts := make([]string, 0, 3)
	for i, e := range es {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d other reasons", len(es)-3))
			break
		}
		parts = append(parts, fmt.Sprintf("%d node(s) %s", e.count, e.what))
	}
	return ": " + strings.Join(parts, "; ")
}

// capacityFilters are the Filter plugins that judge capacity alone, which
// the planner counts itself.
var capacityFilters = sets.New(names.NodeResourcesFit)

// acceptable reports whether a Filter status lets the planner use the
// node: success, or a rejection for capacity alone, which the planner
// counts itself (and counts what will free up).
func acceptable(s *fwk.Status) bool {
	return s.IsSuccess() || capacityFilters.Has(s.Plugin())
}

var unschedulableTaint = v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}

// eligibleNodes tells, node by node, whether the pod may run there at all
// by the checks that need no framework: the node is schedulable, its
// NoSchedule/NoExecute taints are tolerated, and it matches the pod's node
// selector and required node affinity. It stands in for the profile's
// Filter plugins when the framework cannot run them for the plugin.
func eligibleNodes(logger klog.Logger, pod *v1.Pod, nodeInfos []fwk.NodeInfo) []bool {
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	hardTaints := func(t *v1.Taint) bool {
		return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
	}
	out := make([]bool, len(nodeInfos))
	for i, ni := range nodeInfos {
		node := ni.Node()
		if node.Spec.Unschedulable && !corev1helpers.TolerationsTolerateTaint(logger, pod.Spec.Tolerations, &unschedulableTaint, false) {
			continue
		}
		if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, pod.Spec.Tolerations, hardTaints, false); untolerated {
			continue
		}
		if ok, err := affinity.Match(node); err != nil || !ok {
			continue
		}
		out[i] = true
	}
	return out
}
