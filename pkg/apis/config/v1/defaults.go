package v1

import (
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// Defaults for CoschedulingArgs and GPUFleetArgs. Each default is handed out as a fresh
// pointer so that no two configurations share memory. The default topology
// preset is scheduling.DefaultPreset, which owns the presets.
const (
	DefaultPermitWaitingTimeSeconds  int64 = 60
	DefaultPodGroupBackoffSeconds    int64 = 2
	DefaultPodGroupMaxBackoffSeconds int64 = 60
	DefaultClaimReleaseGraceSeconds  int64 = 60
	// DefaultUnlabelledNodes skips nodes that do not say their CUDA
	// version when a gang asks for one.
	DefaultUnlabelledNodes = config.UnlabelledNodesSkip
)

// SetDefaultsCoschedulingArgs fills the fields a user left unset.
func SetDefaultsCoschedulingArgs(args *CoschedulingArgs) {
	if args.PermitWaitingTimeSeconds == nil {
		args.PermitWaitingTimeSeconds = ptr.To(DefaultPermitWaitingTimeSeconds)
	}
	if args.PodGroupBackoffSeconds == nil {
		args.PodGroupBackoffSeconds = ptr.To(DefaultPodGroupBackoffSeconds)
	}
	if args.PodGroupMaxBackoffSeconds == nil {
		args.PodGroupMaxBackoffSeconds = ptr.To(DefaultPodGroupMaxBackoffSeconds)
	}
	if args.ClaimReleaseGraceSeconds == nil {
		args.ClaimReleaseGraceSeconds = ptr.To(DefaultClaimReleaseGraceSeconds)
	}
	if args.TopologyPreset == nil && len(args.TopologyLevels) == 0 {
		// NVLink cliques under leaf and spine switches; nodes without
		// those labels are simply their own domains.
		args.TopologyPreset = ptr.To(scheduling.DefaultPreset)
	}
}

// SetDefaultsGPUFleetArgs fills the fields a user left unset.
func SetDefaultsGPUFleetArgs(args *GPUFleetArgs) {
	if args.UnlabelledNodes == nil {
		args.UnlabelledNodes = ptr.To(DefaultUnlabelledNodes)
	}
	if args.CapacityTypeLabels == nil {
		args.CapacityTypeLabels = scheduling.DefaultCapacityTypeLabels()
	}
}
