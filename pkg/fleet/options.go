package fleet

import (
	"slices"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// Options are the cluster-wide settings, from the plugin args, that shape
// how nodes are read and judged.
type Options struct {
	// AllowUnlabelled lets a member that asks for a minimum CUDA version or
	// compute capability use a node whose labels do not say its own
	// (unlabelledNodes: Allow). By default such nodes are skipped: an
	// unlabelled node may well run an old driver.
	AllowUnlabelled bool
	// CapacityTypeLabels are the node label keys read for the capacity
	// type, in order; the first one set on a node decides. Nil means
	// scheduling.DefaultCapacityTypeLabels.
	CapacityTypeLabels []string
}

// DefaultOptions returns the options of plugin args left at their defaults.
func DefaultOptions() Options {
	return Options{CapacityTypeLabels: scheduling.DefaultCapacityTypeLabels()}
}

// OptionsFromArgs returns the options validated plugin args set.
func OptionsFromArgs(args *config.GPUFleetArgs) Options {
	return Options{
		AllowUnlabelled:    args.UnlabelledNodes == config.UnlabelledNodesAllow,
		CapacityTypeLabels: slices.Clone(args.CapacityTypeLabels),
	}
}

func (o *Options) capacityLabels() []string {
	if o == nil || o.CapacityTypeLabels == nil {
		return defaultCapacityLabels
	}
	return o.CapacityTypeLabels
}

// defaultCapacityLabels is read, never written.
var defaultCapacityLabels = scheduling.DefaultCapacityTypeLabels()

// unlabelledArg renders the unlabelledNodes setting for messages.
func (o *Options) unlabelledArg() string {
	if o != nil && o.AllowUnlabelled {
		return "unlabelledNodes: " + config.UnlabelledNodesAllow
	}
	return "unlabelledNodes: " + config.UnlabelledNodesSkip
}
