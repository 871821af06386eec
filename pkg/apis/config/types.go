package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// CoschedulingArgs configures the Coscheduling (gang) plugin.
type CoschedulingArgs struct {
	metav1.TypeMeta

	// PermitWaitingTimeSeconds is how long reserved members of a gang wait
	// for the rest when the PodGroup's scheduleTimeoutSeconds is unset or 0.
	PermitWaitingTimeSeconds int64
	// PodGroupBackoffSeconds is how long a gang waits before its next try
	// after it timed out or a member failed. It doubles with each
	// consecutive failure of the same gang.
	PodGroupBackoffSeconds int64
	// PodGroupMaxBackoffSeconds caps the doubling of PodGroupBackoffSeconds.
	PodGroupMaxBackoffSeconds int64
	// TopologyPreset names a set of topology levels (see pkg/topology).
	// Exactly one of TopologyPreset and TopologyLevels is set.
	TopologyPreset string
	// TopologyLevels are node label keys, tightest first, that name the
	// interconnect domains gangs are placed in.
	TopologyLevels []string
}
