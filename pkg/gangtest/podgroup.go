// Package gangtest holds builders for gpu-gang's tests, in the style of
// kube-scheduler's st.MakePod() and st.MakeNode().
package gangtest

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// PodGroupWrapper builds a PodGroup with chained setters.
type PodGroupWrapper struct{ v1alpha1.PodGroup }

// MakePodGroup starts a PodGroup with minMember 1.
func MakePodGroup(name, namespace string) *PodGroupWrapper {
	return &PodGroupWrapper{v1alpha1.PodGroup{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "PodGroup"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: namespace,
			UID:       types.UID(namespace + "/" + name),
		},
		Spec: v1alpha1.PodGroupSpec{MinMember: 1},
	}}
}

// Obj returns the built PodGroup.
func (w *PodGroupWrapper) Obj() *v1alpha1.PodGroup { return &w.PodGroup }

// MinMember sets spec.minMember.
func (w *PodGroupWrapper) MinMember(n int32) *PodGroupWrapper {
	w.Spec.MinMember = n
	return w
}

// ScheduleTimeoutSeconds sets spec.scheduleTimeoutSeconds.
func (w *PodGroupWrapper) ScheduleTimeoutSeconds(s int32) *PodGroupWrapper {
	w.Spec.ScheduleTimeoutSeconds = &s
	return w
}

// MinResources sets spec.minResources from quantities such as "16".
func (w *PodGroupWrapper) MinResources(r map[v1.ResourceName]string) *PodGroupWrapper {
	w.Spec.MinResources = v1.ResourceList{}
	for name, q := range r {
		w.Spec.MinResources[name] = resource.MustParse(q)
	}
	return w
}

// Created sets the creation timestamp.
func (w *PodGroupWrapper) Created(t time.Time) *PodGroupWrapper {
	w.CreationTimestamp = metav1.NewTime(t)
	return w
}

// Annotation sets an annotation.
func (w *PodGroupWrapper) Annotation(key, value string) *PodGroupWrapper {
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[key] = value
	return w
}

// UID sets the UID (MakePodGroup derives one from the name).
func (w *PodGroupWrapper) UID(uid string) *PodGroupWrapper {
	w.PodGroup.UID = types.UID(uid)
	return w
}

// Owner adds a controlling owner reference, as an operator sets on the
// PodGroups it creates.
func (w *PodGroupWrapper) Owner(apiVersion, kind, name string) *PodGroupWrapper {
	controller := true
	w.OwnerReferences = append(w.OwnerReferences, metav1.OwnerReference{
		APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(kind + "/" + name), Controller: &controller,
	})
	return w
}

// Generation sets metadata.generation.
func (w *PodGroupWrapper) Generation(g int64) *PodGroupWrapper {
	w.PodGroup.Generation = g
	return w
}

// Phase sets status.phase.
func (w *PodGroupWrapper) Phase(p v1alpha1.PodGroupPhase) *PodGroupWrapper {
	w.Status.Phase = p
	return w
}
