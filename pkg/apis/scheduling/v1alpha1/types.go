package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	upstream "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// PodGroup is scheduler-plugins' PodGroup with gpu-gang's two optional
// status fields. See the package documentation.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type PodGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is scheduler-plugins' PodGroupSpec, unchanged.
	// +optional
	Spec upstream.PodGroupSpec `json:"spec,omitempty"`

	// Status is scheduler-plugins' PodGroupStatus plus conditions and
	// observedGeneration.
	// +optional
	Status PodGroupStatus `json:"status,omitempty"`
}

// PodGroupStatus is scheduler-plugins' PodGroupStatus, inline, with two
// fields added.
type PodGroupStatus struct {
	upstream.PodGroupStatus `json:",inline"`

	// ObservedGeneration is the metadata.generation of the PodGroup that
	// the status was computed from. Added by gpu-gang; scheduler-plugins'
	// API has no such field.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are the latest observations of the group's state, one per
	// type, with a machine-readable reason and a message for people. Added
	// by gpu-gang; scheduler-plugins' API has no such field.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// PodGroupList is a list of PodGroups.
//
// +kubebuilder:object:root=true
type PodGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodGroup `json:"items"`
}
