// Package validation checks gpu-gang's plugin arguments.
package validation

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// ValidateCoschedulingArgs returns every problem with args, each naming its
// field under path and the accepted range.
func ValidateCoschedulingArgs(path *field.Path, args *config.CoschedulingArgs) field.ErrorList {
	var errs field.ErrorList
	if args.PermitWaitingTimeSeconds < 1 {
		errs = append(errs, field.Invalid(path.Child("permitWaitingTimeSeconds"), args.PermitWaitingTimeSeconds,
			"must be at least 1: a gang needs time to gather its members, and 0 would reject every gang that waits"))
	}
	if args.PodGroupBackoffSeconds < 1 {
		errs = append(errs, field.Invalid(path.Child("podGroupBackoffSeconds"), args.PodGroupBackoffSeconds,
			"must be at least 1: a gang that failed is tried again only after this wait, and 0 would retry it in a hot loop"))
	}
	if args.PodGroupMaxBackoffSeconds < args.PodGroupBackoffSeconds {
		errs = append(errs, field.Invalid(path.Child("podGroupMaxBackoffSeconds"), args.PodGroupMaxBackoffSeconds,
			"must be at least podGroupBackoffSeconds"))
	}
	if args.ClaimReleaseGraceSeconds < 0 {
		errs = append(errs, field.Invalid(path.Child("claimReleaseGraceSeconds"), args.ClaimReleaseGraceSeconds,
			"must be at least 0: it is how long an allocation no pod uses is kept before the scheduler gives it back"))
	}
	for i, name := range args.RailAttributes {
		domain, id, ok := strings.Cut(name, "/")
		if !ok || len(validation.IsDNS1123Subdomain(domain)) > 0 || len(validation.IsCIdentifier(id)) > 0 {
			errs = append(errs, field.Invalid(path.Child("railAttributes").Index(i), name,
				"must be a qualified device attribute name, <driver domain>/<attribute>, such as dra.net/rail"))
		}
	}
	errs = append(errs, validateConsolidation(path.Child("consolidation"), &args.Consolidation)...)
	levels, err := scheduling.ResolveLevels(args.TopologyPreset, args.TopologyLevels)
	if err == nil && args.RailUnitLevel != "" {
		if _, err := scheduling.RailUnit(levels, args.RailUnitLevel); err != nil {
			errs = append(errs, field.Invalid(path.Child("railUnitLevel"), args.RailUnitLevel, err.Error()))
		}
	}
	if err != nil {
		switch {
		case args.TopologyPreset != "" && len(args.TopologyLevels) > 0:
			errs = append(errs, field.Forbidden(path.Child("topologyLevels"), "set either topologyPreset or topologyLevels, not both"))
		case len(args.TopologyLevels) > 0:
			errs = append(errs, field.Invalid(path.Child("topologyLevels"), args.TopologyLevels, err.Error()))
		default:
			errs = append(errs, field.NotSupported(path.Child("topologyPreset"), args.TopologyPreset, scheduling.PresetNames()))
		}
	}
	return errs
}

// validateConsolidation checks the consolidation bounds. Durations may
// never be negative; an enabled consolidation needs a wait and a budget
// above zero, or it would move gangs for every gang that ever waits, or
// never move any.
func validateConsolidation(path *field.Path, c *config.ConsolidationArgs) field.ErrorList {
	var errs field.ErrorList
	durations := []struct {
		name string
		d    time.Duration
	}{{"waitingFor", c.WaitingFor}, {"cooldown", c.Cooldown}, {"minRunTime", c.MinRunTime}}
	for _, d := range durations {
		if d.d < 0 {
			errs = append(errs, field.Invalid(path.Child(d.name), d.d.String(), "must not be negative"))
		}
	}
	if c.MaxEvictionsPerHour < 0 {
		errs = append(errs, field.Invalid(path.Child("maxEvictionsPerHour"), c.MaxEvictionsPerHour, "must not be negative"))
	}
	if c.Enabled {
		if c.WaitingFor <= 0 {
			errs = append(errs, field.Invalid(path.Child("waitingFor"), c.WaitingFor.String(),
				"must be above 0 when consolidation is enabled: gangs are moved only for a gang that has waited this long, and 0 would move them for every gang that does not fit at once"))
		}
		if c.MaxEvictionsPerHour < 1 {
			errs = append(errs, field.Invalid(path.Child("maxEvictionsPerHour"), c.MaxEvictionsPerHour,
				"must be at least 1 when consolidation is enabled: no gang could ever be moved; set enabled: false instead"))
		}
	}
	classes := path.Child("movablePriorityClasses")
	seen := make(map[string]bool, len(c.MovablePriorityClasses))
	for i, name := range c.MovablePriorityClasses {
		if seen[name] {
			errs = append(errs, field.Duplicate(classes.Index(i), name))
			continue
		}
		seen[name] = true
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			errs = append(errs, field.Invalid(classes.Index(i), name, "must be a PriorityClass name: "+msg))
		}
	}
	return errs
}

// ValidateGPUFleetArgs returns every problem with args, each naming its
// field under path and the accepted values.
func ValidateGPUFleetArgs(path *field.Path, args *config.GPUFleetArgs) field.ErrorList {
	var errs field.ErrorList
	switch args.UnlabelledNodes {
	case config.UnlabelledNodesSkip, config.UnlabelledNodesAllow:
	default:
		errs = append(errs, field.NotSupported(path.Child("unlabelledNodes"), args.UnlabelledNodes,
			[]string{config.UnlabelledNodesSkip, config.UnlabelledNodesAllow}))
	}
	labels := path.Child("capacityTypeLabels")
	if len(args.CapacityTypeLabels) == 0 {
		errs = append(errs, field.Required(labels,
			"list at least one node label key (leave the field out for the common ones): with none, every node counts as on-demand and gangs that ask for spot capacity never start"))
	}
	seen := make(map[string]bool, len(args.CapacityTypeLabels))
	for i, key := range args.CapacityTypeLabels {
		if seen[key] {
			errs = append(errs, field.Duplicate(labels.Index(i), key))
			continue
		}
		seen[key] = true
		for _, msg := range validation.IsQualifiedName(key) {
			errs = append(errs, field.Invalid(labels.Index(i), key, "must be a node label key: "+msg))
		}
	}
	return errs
}
