package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// CoschedulingArgs configures the Coscheduling (gang) plugin.
type CoschedulingArgs struct {
	metav1.TypeMeta `json:",inline"`

	// PermitWaitingTimeSeconds is how long reserved members of a gang wait
	// for the rest when the PodGroup's scheduleTimeoutSeconds is unset or 0
	// (MPI Operator writes 0 by default; 0 never means "wait forever").
	// Defaults to 60.
	PermitWaitingTimeSeconds *int64 `json:"permitWaitingTimeSeconds,omitempty"`
	// PodGroupBackoffSeconds is how long a gang waits before its next try
	// after it timed out or a member failed. It doubles with each
	// consecutive failure of the same gang. Defaults to 2.
	PodGroupBackoffSeconds *int64 `json:"podGroupBackoffSeconds,omitempty"`
	// PodGroupMaxBackoffSeconds caps the doubling. Defaults to 60.
	PodGroupMaxBackoffSeconds *int64 `json:"podGroupMaxBackoffSeconds,omitempty"`
	// TopologyPreset names the node labels that describe the interconnect:
	// nvidia (the default: nvidia.com/gpu.clique, then
	// network.topology.nvidia.com/leaf and /spine), nvlink, topograph,
	// topograph-v2, aws, gke or coreweave. Leave it empty when
	// topologyLevels is set.
	TopologyPreset *string `json:"topologyPreset,omitempty"`
	// TopologyLevels lists node label keys, tightest first, for fabrics no
	// preset describes. The node itself is always the lowest level.
	TopologyLevels []string `json:"topologyLevels,omitempty"`
	// ClaimReleaseGraceSeconds is how long an allocation gpu-gang wrote
	// itself (a claim several members of a gang share, or a PodGroup's
	// claim) may stay with no pod reserving it and no attempt of the
	// scheduler planning it before the scheduler gives it back, as when
	// the scheduler restarted between allocating and binding, or the job
	// was cancelled before any member bound. Defaults to 60; 0 gives such
	// an allocation back as soon as it is seen, which may take it from
	// members about to bind.
	ClaimReleaseGraceSeconds *int64 `json:"claimReleaseGraceSeconds,omitempty"`
	// RailAttributes lists qualified device attribute names (for example
	// dra.net/rail, or a network driver's subnet attribute) that name an
	// RDMA NIC's rail on a rail-optimized fabric, tried in order; their
	// values (integers or strings) are the rails, in order. A node whose
	// NICs do not all carry one numbers its NICs in PCI address order:
	// rail k is the k-th NIC. Empty by default.
	RailAttributes []string `json:"railAttributes,omitempty"`
	// RailUnitLevel is the topology level, one of the configured levels'
	// label keys, of a rail-optimized fabric's scalable unit: the nodes
	// whose NICs plug into the same rail switches (rail k of every node of
	// the unit into switch k). The members of a rail-aligned gang in one
	// unit use the same rails; members in different units reach each
	// other through the spine whatever their rails, so each unit may use
	// its own. Defaults to the leaf level
	// (network.topology.nvidia.com/leaf) when it is configured, else the
	// second-tightest level.
	RailUnitLevel *string `json:"railUnitLevel,omitempty"`
	// Consolidation moves running gangs that opted in to being moved
	// (the PodGroup annotation gpu-gang.x-k8s.io/movable: "true", or a
	// priority class in movablePriorityClasses) out of one topology domain
	// so that a gang which has waited long enough gets that domain whole.
	// Off by default.
	Consolidation *ConsolidationArgs `json:"consolidation,omitempty"`
}

// ConsolidationArgs bounds consolidation: when it acts, how often, and
// which gangs it may move.
type ConsolidationArgs struct {
	// Enabled turns consolidation on. Defaults to false.
	Enabled *bool `json:"enabled,omitempty"`
	// WaitingFor is how long a gang must have waited, since its PodGroup
	// or its earliest member was created, before gangs are moved for it.
	// Defaults to 2m.
	WaitingFor *metav1.Duration `json:"waitingFor,omitempty"`
	// MaxEvictionsPerHour caps the gangs moved in any sliding hour, over
	// the whole cluster. Defaults to 10.
	MaxEvictionsPerHour *int32 `json:"maxEvictionsPerHour,omitempty"`
	// Cooldown is how long a gang that was moved may not be moved again.
	// Defaults to 30m.
	Cooldown *metav1.Duration `json:"cooldown,omitempty"`
	// MinRunTime is how long a gang must have run before it may be moved:
	// a gang that started less than this ago stays. Defaults to 10m.
	MinRunTime *metav1.Duration `json:"minRunTime,omitempty"`
	// MovablePriorityClasses names priority classes whose gangs count as
	// movable even without the movable annotation. Empty by default.
	MovablePriorityClasses []string `json:"movablePriorityClasses,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// GPUFleetArgs configures the GPUFleet plugin: how it reads what GPU
// feature discovery and node provisioners say about each node.
type GPUFleetArgs struct {
	metav1.TypeMeta `json:",inline"`

	// UnlabelledNodes is Skip (the default) or Allow: whether a gang whose
	// PodGroup or pods set gpu-gang.x-k8s.io/min-cuda or
	// min-compute-capability may use nodes that GPU feature discovery has
	// not labelled with a CUDA version or compute capability.
	UnlabelledNodes *string `json:"unlabelledNodes,omitempty"`
	// CapacityTypeLabels lists node label keys that say whether a node is
	// spot capacity, tried in order; the first one set on a node decides.
	// Defaults to karpenter.sh/capacity-type, cloud.google.com/gke-spot,
	// eks.amazonaws.com/capacityType and node.kubernetes.io/lifecycle.
	CapacityTypeLabels []string `json:"capacityTypeLabels,omitempty"`
}
