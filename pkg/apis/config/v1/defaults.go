package v1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// DefaultConsolidationWaitingFor is how long a gang waits before
	// gangs are moved for it.
	DefaultConsolidationWaitingFor = 2 * time.Minute
	// DefaultConsolidationMaxEvictionsPerHour caps moved gangs per hour.
	DefaultConsolidationMaxEvictionsPerHour int32 = 10
	// DefaultConsolidationCooldown keeps a moved gang where it went.
	DefaultConsolidationCooldown = 30 * time.Minute
	// DefaultConsolidationMinRunTime keeps a gang that just started.
	DefaultConsolidationMinRunTime = 10 * time.Minute
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
	if args.Consolidation == nil {
		args.Consolidation = &ConsolidationArgs{}
	}
	setDefaultsConsolidationArgs(args.Consolidation)
}

// setDefaultsConsolidationArgs fills the consolidation fields a user left
// unset; consolidation stays off unless enabled.
func setDefaultsConsolidationArgs(c *ConsolidationArgs) {
	if c.Enabled == nil {
		c.Enabled = ptr.To(false)
	}
	if c.WaitingFor == nil {
		c.WaitingFor = &metav1.Duration{Duration: DefaultConsolidationWaitingFor}
	}
	if c.MaxEvictionsPerHour == nil {
		c.MaxEvictionsPerHour = ptr.To(DefaultConsolidationMaxEvictionsPerHour)
	}
	if c.Cooldown == nil {
		c.Cooldown = &metav1.Duration{Duration: DefaultConsolidationCooldown}
	}
	if c.MinRunTime == nil {
		c.MinRunTime = &metav1.Duration{Duration: DefaultConsolidationMinRunTime}
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
