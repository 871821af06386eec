package config

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The plugins' names, as a KubeSchedulerConfiguration names them in a
// profile's plugins and pluginConfig. They live here, beside the args, so
// that the simulator finds a plugin's args without importing the plugin;
// each plugin's Name is its constant here.
const (
	// CoschedulingPluginName names the gang plugin, whose args are
	// CoschedulingArgs.
	CoschedulingPluginName = "Coscheduling"
	// GPUFleetPluginName names the GPU fleet plugin, whose args are
	// GPUFleetArgs.
	GPUFleetPluginName = "GPUFleet"
	// RailFencePluginName names the plugin that steers DynamicResources
	// to the devices a rail-aligned plan chose for a member that asks
	// for them through an extended resource; it has no args.
	RailFencePluginName = "RailFence"
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
	// ClaimReleaseGraceSeconds is how long an allocation gpu-gang wrote
	// on a ResourceClaim may stay with no pod reserving it and no attempt
	// planning it before the scheduler gives it back.
	ClaimReleaseGraceSeconds int64
	// RailAttributes are qualified device attribute names
	// ("dra.net/rail") that name an RDMA NIC's rail, tried in order. A
	// node whose NICs all carry one has those rails; others number their
	// NICs in PCI address order.
	RailAttributes []string
	// RailUnitLevel is the topology level (a label key of the levels) of
	// a rail-optimized fabric's scalable unit: the nodes whose NICs plug
	// into the same rail switches. Members of a rail-aligned gang use one
	// rail set per unit. Empty: scheduling.RailUnit's default.
	RailUnitLevel string
	// Consolidation moves movable running gangs out of a topology domain
	// so that a gang which has waited long enough gets it whole.
	Consolidation ConsolidationArgs
}

// ConsolidationArgs bounds how the Coscheduling plugin moves movable gangs
// to free a whole domain for a waiting gang.
type ConsolidationArgs struct {
	// Enabled turns consolidation on; it is off by default.
	Enabled bool
	// WaitingFor is how long a gang must have waited before gangs are
	// moved for it.
	WaitingFor time.Duration
	// MaxEvictionsPerHour caps the gangs moved in any hour, cluster-wide.
	MaxEvictionsPerHour int32
	// Cooldown is how long a moved gang may not be moved again.
	Cooldown time.Duration
	// MinRunTime is how long a gang must have run before it may be moved.
	MinRunTime time.Duration
	// MovablePriorityClasses names priority classes whose gangs are
	// movable without the movable annotation.
	MovablePriorityClasses []string
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// GPUFleetArgs configures the GPUFleet plugin, which keeps GPU pods and gang
// members off nodes whose GPUs do not meet what they ask for (pkg/fleet
// owns the rules).
type GPUFleetArgs struct {
	metav1.TypeMeta

	// UnlabelledNodes says whether a pod that asks for a minimum CUDA
	// version or compute capability may use nodes whose labels do not say
	// theirs: UnlabelledNodesSkip or UnlabelledNodesAllow.
	UnlabelledNodes string
	// CapacityTypeLabels are the node label keys that say whether a node
	// is spot capacity, tried in order; the first one set decides.
	CapacityTypeLabels []string
}

// Values of GPUFleetArgs.UnlabelledNodes.
const (
	// UnlabelledNodesSkip keeps gangs that ask for a version off nodes
	// that do not say theirs: such a node may well run an old driver.
	UnlabelledNodesSkip = "Skip"
	// UnlabelledNodesAllow lets them use such nodes, for clusters without
	// GPU feature discovery.
	UnlabelledNodesAllow = "Allow"
)
