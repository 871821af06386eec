package gangtest

import (
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// NativePodGroupWrapper builds a Kubernetes PodGroup
// (scheduling.k8s.io/v1beta1) with chained setters.
type NativePodGroupWrapper struct{ schedulingv1beta1.PodGroup }

// MakeNativePodGroup starts a native PodGroup with a gang policy of
// minCount 1.
func MakeNativePodGroup(name, namespace string) *NativePodGroupWrapper {
	return &NativePodGroupWrapper{schedulingv1beta1.PodGroup{
		TypeMeta: metav1.TypeMeta{APIVersion: schedulingv1beta1.SchemeGroupVersion.String(), Kind: "PodGroup"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: namespace,
			UID:       types.UID("native/" + namespace + "/" + name),
		},
		Spec: schedulingv1beta1.PodGroupSpec{
			SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 1}},
		},
	}}
}

// Obj returns the built PodGroup.
func (w *NativePodGroupWrapper) Obj() *schedulingv1beta1.PodGroup { return &w.PodGroup }

// MinCount sets spec.schedulingPolicy.gang.minCount.
func (w *NativePodGroupWrapper) MinCount(n int32) *NativePodGroupWrapper {
	w.Spec.SchedulingPolicy = schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: n}}
	return w
}

// Basic sets the basic scheduling policy: no gang.
func (w *NativePodGroupWrapper) Basic() *NativePodGroupWrapper {
	w.Spec.SchedulingPolicy = schedulingv1beta1.PodGroupSchedulingPolicy{Basic: &schedulingv1beta1.BasicSchedulingPolicy{}}
	return w
}

// Topology sets the one topology constraint, on a node label key.
func (w *NativePodGroupWrapper) Topology(key string) *NativePodGroupWrapper {
	w.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{
		Topology: []schedulingv1beta1.TopologyConstraint{{Key: key}},
	}
	return w
}

// DisruptAll sets disruptionMode all.
func (w *NativePodGroupWrapper) DisruptAll() *NativePodGroupWrapper {
	w.Spec.DisruptionMode = &schedulingv1beta1.DisruptionMode{All: &schedulingv1beta1.AllDisruptionMode{}}
	return w
}

// Priority sets spec.priorityClassName and the spec.priority admission
// would resolve it to.
func (w *NativePodGroupWrapper) Priority(class string, value int32) *NativePodGroupWrapper {
	w.Spec.PriorityClassName = class
	w.Spec.Priority = ptr.To(value)
	return w
}

// PreemptionPolicy sets spec.preemptionPolicy.
func (w *NativePodGroupWrapper) PreemptionPolicy(p schedulingv1beta1.PreemptionPolicy) *NativePodGroupWrapper {
	w.Spec.PreemptionPolicy = &p
	return w
}

// Workload sets spec.workloadRef.
func (w *NativePodGroupWrapper) Workload(name, template string) *NativePodGroupWrapper {
	w.Spec.WorkloadRef = &schedulingv1beta1.WorkloadReference{WorkloadName: name, TemplateName: template}
	return w
}

// Parent sets spec.parentCompositePodGroupName: the PodGroup is a child of
// that CompositePodGroup.
func (w *NativePodGroupWrapper) Parent(name string) *NativePodGroupWrapper {
	w.Spec.ParentCompositePodGroupName = ptr.To(name)
	return w
}

// Created sets the creation timestamp.
func (w *NativePodGroupWrapper) Created(t time.Time) *NativePodGroupWrapper {
	w.CreationTimestamp = metav1.NewTime(t)
	return w
}

// Annotation sets an annotation.
func (w *NativePodGroupWrapper) Annotation(key, value string) *NativePodGroupWrapper {
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[key] = value
	return w
}

// Generation sets metadata.generation.
func (w *NativePodGroupWrapper) Generation(g int64) *NativePodGroupWrapper {
	w.PodGroup.Generation = g
	return w
}

// Deleting marks the PodGroup as being deleted, held by the API server's
// protection finalizer.
func (w *NativePodGroupWrapper) Deleting(at time.Time) *NativePodGroupWrapper {
	t := metav1.NewTime(at)
	w.DeletionTimestamp = &t
	w.Finalizers = append(w.Finalizers, "scheduling.k8s.io/podgroup-protection")
	return w
}

// Condition sets a status condition.
func (w *NativePodGroupWrapper) Condition(c metav1.Condition) *NativePodGroupWrapper {
	w.Status.Conditions = append(w.Status.Conditions, c)
	return w
}

// InNativeGroup makes a pod name a native PodGroup in
// spec.schedulingGroup, as Job controllers do.
func InNativeGroup(pod *v1.Pod, group string) *v1.Pod {
	pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
	return pod
}
