package gang

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// CompositeSpec is what gpu-gang needs to know of a CompositePodGroup
// (scheduling.k8s.io/v1alpha3), as Spec is of a gang: a node of a hierarchy
// (Tree) whose children are the native PodGroups and composites that name
// it in spec.parentCompositePodGroupName. CompositeSpecs are built fresh
// from the API object on every read and never written afterwards.
type CompositeSpec struct {
	// Key has API Composite.
	Key        Key
	UID        types.UID
	Created    time.Time
	Generation int64
	// Parent is the name of the parent composite, in the same namespace;
	// empty for the root of a workload's hierarchy.
	Parent string
	// Gang is set by the gang policy: the composite is admitted only once
	// MinGroupCount of its children are each at quorum, placed in one
	// plan. Unset, the policy is basic: its children go independently.
	Gang bool
	// MinGroupCount is how many children must be at quorum for the
	// composite to be: the gang policy's minGroupCount; 1 for a basic
	// composite, as kube-scheduler counts one.
	MinGroupCount int32
	// Topology, if set, is the constraint the whole subtree runs under:
	// the composite's topology key, a required level.
	Topology *placement.Policy
	// Terms are the composite's priority, preemption policy and disruption
	// mode; a root composite's hold for the whole hierarchy (Tree.Terms).
	Terms
	// Workload names the Workload and its CompositePodGroup template the
	// composite was made from, for messages.
	Workload *WorkloadRef
	// Annotations are the API object's annotations. Read only.
	Annotations map[string]string
	// Deleting is true while the API object is being deleted.
	Deleting bool
	// Ref names the API object in Events.
	Ref *v1.ObjectReference

	// noPolicy is set when the object has neither policy, which the API
	// server never lets through; Validate says so.
	noPolicy bool
}

// Terms are the terms a gang's root sets for all of it: priority,
// preemption policy and disruption mode. A PodGroup's are its Spec's
// (Spec.Terms), a composite's its own.
type Terms struct {
	// PriorityClassName and Priority are the gang's own priority, when its
	// API gives one; nil Priority means the members' own.
	PriorityClassName string
	Priority          *int32
	// PreemptionPolicy, if set, says whether the gang may preempt; nil
	// means the members' own.
	PreemptionPolicy *v1.PreemptionPolicy
	// Disruption says whether the gang goes whole (DisruptionAll) or its
	// parts may go one by one (DisruptionSingle): a composite's children,
	// each as its own mode says; a PodGroup's members above its quorum.
	Disruption DisruptionMode
}

// Terms returns the gang's priority, preemption policy and disruption mode.
func (s *Spec) Terms() Terms {
	return Terms{PriorityClassName: s.PriorityClassName, Priority: s.Priority, PreemptionPolicy: s.PreemptionPolicy, Disruption: s.Disruption}
}

// FromCompositePodGroup adapts a CompositePodGroup
// (scheduling.k8s.io/v1alpha3), as FromNativePodGroup adapts a PodGroup:
//   - a gang policy's minGroupCount is the composite's quorum, counted in
//     children; a basic policy counts 1 and lets the children go alone;
//   - a topology constraint's key is a required level for the subtree;
//   - disruptionMode (Single by the API's default), priority,
//     priorityClassName and preemptionPolicy are the composite's Terms.
func FromCompositePodGroup(cpg *schedulingv1alpha3.CompositePodGroup) *CompositeSpec {
	c := &CompositeSpec{
		Key:         Key{API: Composite, Namespace: cpg.Namespace, Name: cpg.Name},
		UID:         cpg.UID,
		Created:     cpg.CreationTimestamp.Time,
		Generation:  cpg.Generation,
		Parent:      ptr.Deref(cpg.Spec.ParentCompositePodGroupName, ""),
		Topology:    topologyOf(cpg.Spec.SchedulingConstraints),
		Annotations: cpg.Annotations,
		Deleting:    cpg.DeletionTimestamp != nil,
		Terms: Terms{
			PriorityClassName: cpg.Spec.PriorityClassName,
			Priority:          copyPriority(cpg.Spec.Priority),
			PreemptionPolicy:  preemptionOf(cpg.Spec.PreemptionPolicy),
			Disruption:        DisruptionSingle, // the API's default
		},
		Ref: &v1.ObjectReference{
			APIVersion:      schedulingv1alpha3.SchemeGroupVersion.String(),
			Kind:            "CompositePodGroup",
			Namespace:       cpg.Namespace,
			Name:            cpg.Name,
			UID:             cpg.UID,
			ResourceVersion: cpg.ResourceVersion,
		},
	}
	switch p := cpg.Spec.SchedulingPolicy; {
	case p.Gang != nil:
		c.Gang, c.MinGroupCount = true, p.Gang.MinGroupCount
	case p.Basic != nil:
		c.MinGroupCount = 1
	default:
		c.noPolicy = true
	}
	if m := cpg.Spec.DisruptionMode; m != nil && m.All != nil {
		c.Disruption = DisruptionAll
	}
	if r := cpg.Spec.WorkloadRef; r != nil {
		c.Workload = &WorkloadRef{Name: r.WorkloadName, Template: r.TemplateName}
	}
	return c
}

// Validate reports what makes the composite impossible to honour, with the
// fix.
func (c *CompositeSpec) Validate() error {
	switch {
	case c.noPolicy:
		return fmt.Errorf("CompositePodGroup %s sets neither spec.schedulingPolicy.basic nor .gang: set one", c.Key)
	case c.MinGroupCount < 1:
		return fmt.Errorf("CompositePodGroup %s: spec.schedulingPolicy.gang.minGroupCount is %d: set it to the number of child groups that must start together (at least 1)",
			c.Key, c.MinGroupCount)
	}
	return nil
}

// topologyOf reads a composite's one topology constraint, always hard.
func topologyOf(c *schedulingv1alpha3.CompositePodGroupSchedulingConstraints) *placement.Policy {
	if c == nil || len(c.Topology) == 0 || c.Topology[0].Key == "" {
		return nil
	}
	return &placement.Policy{Level: c.Topology[0].Key, Required: true}
}

// copyPriority copies a priority, so that what the adapters keep never
// aliases the API object.
func copyPriority(p *int32) *int32 {
	if p == nil {
		return nil
	}
	return ptr.To(*p)
}

// preemptionOf reads a preemption policy of any scheduling.k8s.io version.
func preemptionOf[P ~string](p *P) *v1.PreemptionPolicy {
	if p == nil {
		return nil
	}
	return ptr.To(v1.PreemptionPolicy(*p))
}

// CompositeServed asks discovery whether the API server serves
// CompositePodGroups (scheduling.k8s.io/v1alpha3 compositepodgroups, with
// list and watch), retrying other errors as NativeServed does. They are
// served only with the CompositePodGroup feature gate (which needs
// GenericWorkload and TopologyAwareWorkloadScheduling) and
// --runtime-config=scheduling.k8s.io/v1alpha3=true on the API server.
func CompositeServed(ctx context.Context, disc discovery.DiscoveryInterface, timeout time.Duration) (bool, error) {
	return served(ctx, disc, schedulingv1alpha3.SchemeGroupVersion.WithResource("compositepodgroups"), timeout)
}

// DecideComposite decides, once, at start-up, whether gpu-gang reads
// CompositePodGroups: only where it schedules native PodGroups (native,
// DecideNative's answer, with nativeNote its note), whose hierarchies they
// are, and the API server serves them. The note says what gpu-gang does
// with them and, when it ignores them, why and what would change that.
func DecideComposite(ctx context.Context, disc discovery.DiscoveryInterface, native bool, nativeNote string) (watched bool, note string, err error) {
	gv := schedulingv1alpha3.SchemeGroupVersion.String()
	if !native {
		return false, "CompositePodGroups group native PodGroups, which this scheduler does not schedule: " + nativeNote, nil
	}
	ok, err := CompositeServed(ctx, disc, DiscoveryTimeout)
	if err != nil {
		return false, "", err
	}
	if !ok {
		return false, fmt.Sprintf("the API server does not serve %s compositepodgroups (it needs the CompositePodGroup feature gate and --runtime-config=%s=true); "+
			"PodGroups that name a parent composite wait until it does and gpu-gang-scheduler is restarted", gv, gv), nil
	}
	return true, fmt.Sprintf("the API server serves %s compositepodgroups: a composite and the PodGroups under it start together as its policy says", gv), nil
}
