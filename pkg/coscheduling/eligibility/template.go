package eligibility

import (
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
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/fleet"
)

// Template is a group of members that Filter plugins cannot tell apart.
type Template struct {
	Sig string
	// Pod is the template's first member in rank order; it stands for
	// all of them in PreFilter.
	Pod *v1.Pod
	// State is pod's CycleState after the profile's PreFilter plugins;
	// nil when no runner is available.
	State fwk.CycleState
	// Nodes restricts the template to these nodes (a PreFilterResult);
	// nil means all.
	Nodes sets.Set[string]
	// Rejected is set when a PreFilter plugin rejected the template
	// outright; no node is eligible then.
	Rejected *fwk.Status
	// Excluded are the nodes the gang's lessons exclude for the template.
	Excluded sets.Set[string]
	// Pending is set when the template's Filter plugins are still to run
	// (Runner.Filter); Eligible says no where they have not run yet.
	Pending bool
	// Relational is set when the template's members can exclude each
	// other or their siblings through Filter, so plans are verified.
	Relational bool
	// DevicesCounted is set when the capacity model counts the template's
	// Devices exactly (core.MarkCounted): DynamicResources then judges
	// capacity alone for it, and is skipped as the resource fit is.
	DevicesCounted bool
	// Devices is what pod takes of devices (core.MarkCounted); nil when
	// it takes none or was not read.
	Devices *capacity.PodDevices
	// Pins are the allocated claims that keep the template's members on
	// the nodes that reach their devices (core.MarkCounted); the
	// eligibility pass owns this rule (PinnedAway).
	Pins []capacity.PinnedClaim
	// PerNode is the cap on the template's members per node, 0 for none.
	PerNode int
	// Eligible[i] says whether the template may run on node i.
	Eligible []bool
	// Rejections counts, by plugin and message, why nodes were not
	// Eligible, for people.
	Rejections map[string]int
	// Members are indices into the planned members, in rank order.
	Members []int
}

// TemplatesOf groups members (in rank order) into templates. reqs are the
// members' requests (podAmounts), computed once by the caller.
func TemplatesOf(members []*v1.Pod, reqs []capacity.Amounts) (templates []*Template, of []int) {
	of = make([]int, len(members))
	bySig := map[string]int{}
	for i, p := range members {
		sig := FilterSignature(p, reqs[i])
		t, ok := bySig[sig]
		if !ok {
			t = len(templates)
			bySig[sig] = t
			templates = append(templates, &Template{Sig: sig, Pod: p, Relational: isRelational(p), PerNode: staticPerNode(p)})
		}
		templates[t].Members = append(templates[t].Members, i)
		of[i] = t
	}
	return templates, of
}

// FilterSignature identifies what Filter plugins read of a pod, except its
// name and labels: members of one job differ in their rank labels only,
// and sharing one Filter pass per template is what keeps large gangs cheap.
// Constraints that match a member's own labels are checked member by member
// during verification.
func FilterSignature(pod *v1.Pod, request capacity.Amounts) string {
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

// PinnedAway returns the allocated claim of the template's members whose
// devices node does not reach, nil when it reaches them all. It is the one
// place that keeps members on their allocated claims' nodes: Filter and the
// kept verdicts (VerdictCache.holds) ask it, so the rule holds also where
// DynamicResources' Filter, which enforces it in kube-scheduler, is skipped
// for a template whose other devices the model counts.
func (t *Template) PinnedAway(node *v1.Node) *capacity.PinnedClaim {
	for i := range t.Pins {
		if !t.Pins[i].Reaches(node) {
			return &t.Pins[i]
		}
	}
	return nil
}

// Why summarises, for people, why nodes were not eligible: the most common
// rejections first.
func (t *Template) Why() string {
	if len(t.Rejections) == 0 {
		return ""
	}
	type entry struct {
		what  string
		count int
	}
	var es []entry
	for what, n := range t.Rejections {
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

// Acceptable reports whether a Filter status lets the planner use the
// node: success, or a rejection for capacity alone, which the planner
// counts itself (and counts what will free up).
func Acceptable(s *fwk.Status) bool {
	return s.IsSuccess() || capacityFilters.Has(s.Plugin())
}

// readBeforePlan are the Filter plugins whose verdict in a scheduling
// cycle rests on state their PreFilter read outside the cycle's node
// snapshot, before the gang plugin's PreFilter planned: DynamicResources
// reads the allocated devices from the claim tracker. A claim released in
// between leaves such a plugin rejecting the node the plan chose from the
// newer state.
var readBeforePlan = sets.New(names.DynamicResources)

// MayBeStale reports whether a Filter rejection seen in a scheduling cycle
// may no longer hold once the cycle ends (readBeforePlan):
// Runner.StillRejects tells.
func MayBeStale(s *fwk.Status) bool { return readBeforePlan.Has(s.Plugin()) }

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
