package gangtest

import (
	"time"

	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// CompositePodGroupWrapper builds a Kubernetes CompositePodGroup
// (scheduling.k8s.io/v1alpha3) with chained setters.
type CompositePodGroupWrapper struct {
	schedulingv1alpha3.CompositePodGroup
}

// MakeCompositePodGroup starts a root CompositePodGroup with a gang policy
// of minGroupCount 1.
func MakeCompositePodGroup(name, namespace string) *CompositePodGroupWrapper {
	return &CompositePodGroupWrapper{schedulingv1alpha3.CompositePodGroup{
		TypeMeta: metav1.TypeMeta{APIVersion: schedulingv1alpha3.SchemeGroupVersion.String(), Kind: "CompositePodGroup"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: namespace,
			UID:       types.UID("composite/" + namespace + "/" + name),
		},
		Spec: schedulingv1alpha3.CompositePodGroupSpec{
			SchedulingPolicy: schedulingv1alpha3.CompositePodGroupSchedulingPolicy{
				Gang: &schedulingv1alpha3.CompositeGangSchedulingPolicy{MinGroupCount: 1},
			},
		},
	}}
}

// Obj returns the built CompositePodGroup.
func (w *CompositePodGroupWrapper) Obj() *schedulingv1alpha3.CompositePodGroup {
	return &w.CompositePodGroup
}

// MinGroupCount sets the gang policy with spec.schedulingPolicy.gang.minGroupCount.
func (w *CompositePodGroupWrapper) MinGroupCount(n int32) *CompositePodGroupWrapper {
	w.Spec.SchedulingPolicy = schedulingv1alpha3.CompositePodGroupSchedulingPolicy{
		Gang: &schedulingv1alpha3.CompositeGangSchedulingPolicy{MinGroupCount: n},
	}
	return w
}

// Basic sets the basic policy: the children go independently.
func (w *CompositePodGroupWrapper) Basic() *CompositePodGroupWrapper {
	w.Spec.SchedulingPolicy = schedulingv1alpha3.CompositePodGroupSchedulingPolicy{
		Basic: &schedulingv1alpha3.CompositeBasicSchedulingPolicy{},
	}
	return w
}

// Parent sets spec.parentCompositePodGroupName.
func (w *CompositePodGroupWrapper) Parent(name string) *CompositePodGroupWrapper {
	w.Spec.ParentCompositePodGroupName = ptr.To(name)
	return w
}

// Topology sets the one topology constraint, on a node label key.
func (w *CompositePodGroupWrapper) Topology(key string) *CompositePodGroupWrapper {
	w.Spec.SchedulingConstraints = &schedulingv1alpha3.CompositePodGroupSchedulingConstraints{
		Topology: []schedulingv1alpha3.TopologyConstraint{{Key: key}},
	}
	return w
}

// DisruptAll sets disruptionMode all: the children go only together.
func (w *CompositePodGroupWrapper) DisruptAll() *CompositePodGroupWrapper {
	w.Spec.DisruptionMode = &schedulingv1alpha3.CompositeDisruptionMode{All: &schedulingv1alpha3.AllCompositeDisruptionMode{}}
	return w
}

// Priority sets spec.priorityClassName and the spec.priority admission
// would resolve it to.
func (w *CompositePodGroupWrapper) Priority(class string, value int32) *CompositePodGroupWrapper {
	w.Spec.PriorityClassName = class
	w.Spec.Priority = ptr.To(value)
	return w
}

// PreemptionPolicy sets spec.preemptionPolicy.
func (w *CompositePodGroupWrapper) PreemptionPolicy(p schedulingv1alpha3.PreemptionPolicy) *CompositePodGroupWrapper {
	w.Spec.PreemptionPolicy = &p
	return w
}

// Workload sets spec.workloadRef, which the API requires.
func (w *CompositePodGroupWrapper) Workload(name, template string) *CompositePodGroupWrapper {
	w.Spec.WorkloadRef = &schedulingv1alpha3.WorkloadReference{WorkloadName: name, TemplateName: template}
	return w
}

// Created sets the creation timestamp.
func (w *CompositePodGroupWrapper) Created(t time.Time) *CompositePodGroupWrapper {
	w.CreationTimestamp = metav1.NewTime(t)
	return w
}

// Generation sets metadata.generation.
func (w *CompositePodGroupWrapper) Generation(g int64) *CompositePodGroupWrapper {
	w.CompositePodGroup.Generation = g
	return w
}

// Condition sets a status condition.
func (w *CompositePodGroupWrapper) Condition(c metav1.Condition) *CompositePodGroupWrapper {
	w.Status.Conditions = append(w.Status.Conditions, c)
	return w
}
