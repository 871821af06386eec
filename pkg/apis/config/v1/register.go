package v1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
)

// SchemeGroupVersion is the version users write.
var SchemeGroupVersion = schema.GroupVersion{Group: config.GroupName, Version: "v1"}

var (
	// SchemeBuilder collects the functions that register the v1 types, their
	// defaults and their conversions.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes, addDefaultingFuncs, addConversionFuncs)
	// AddToScheme registers the v1 types with a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &CoschedulingArgs{}, &GPUFleetArgs{})
	return nil
}

func addDefaultingFuncs(scheme *runtime.Scheme) error {
	scheme.AddTypeDefaultingFunc(&CoschedulingArgs{}, func(obj interface{}) {
		SetDefaultsCoschedulingArgs(obj.(*CoschedulingArgs))
	})
	scheme.AddTypeDefaultingFunc(&GPUFleetArgs{}, func(obj interface{}) {
		SetDefaultsGPUFleetArgs(obj.(*GPUFleetArgs))
	})
	return nil
}

func addConversionFuncs(scheme *runtime.Scheme) error {
	if err := scheme.AddConversionFunc((*CoschedulingArgs)(nil), (*config.CoschedulingArgs)(nil),
		func(a, b interface{}, _ conversion.Scope) error {
			ConvertCoschedulingArgsToInternal(a.(*CoschedulingArgs), b.(*config.CoschedulingArgs))
			return nil
		}); err != nil {
		return err
	}
	if err := scheme.AddConversionFunc((*config.CoschedulingArgs)(nil), (*CoschedulingArgs)(nil),
		func(a, b interface{}, _ conversion.Scope) error {
			ConvertCoschedulingArgsFromInternal(a.(*config.CoschedulingArgs), b.(*CoschedulingArgs))
			return nil
		}); err != nil {
		return err
	}
	if err := scheme.AddConversionFunc((*GPUFleetArgs)(nil), (*config.GPUFleetArgs)(nil),
		func(a, b interface{}, _ conversion.Scope) error {
			ConvertGPUFleetArgsToInternal(a.(*GPUFleetArgs), b.(*config.GPUFleetArgs))
			return nil
		}); err != nil {
		return err
	}
	return scheme.AddConversionFunc((*config.GPUFleetArgs)(nil), (*GPUFleetArgs)(nil),
		func(a, b interface{}, _ conversion.Scope) error {
			ConvertGPUFleetArgsFromInternal(a.(*config.GPUFleetArgs), b.(*GPUFleetArgs))
			return nil
		})
}

// ConvertCoschedulingArgsToInternal converts defaulted v1 args to the
// internal form. Unset fields become zero, which validation rejects where
// zero is not allowed.
func ConvertCoschedulingArgsToInternal(in *CoschedulingArgs, out *config.CoschedulingArgs) {
	out.PermitWaitingTimeSeconds = deref(in.PermitWaitingTimeSeconds)
	out.PodGroupBackoffSeconds = deref(in.PodGroupBackoffSeconds)
	out.PodGroupMaxBackoffSeconds = deref(in.PodGroupMaxBackoffSeconds)
	out.ClaimReleaseGraceSeconds = deref(in.ClaimReleaseGraceSeconds)
	out.TopologyPreset = ""
	if in.TopologyPreset != nil {
		out.TopologyPreset = *in.TopologyPreset
	}
	out.TopologyLevels = append([]string(nil), in.TopologyLevels...)
	out.RailAttributes = append([]string(nil), in.RailAttributes...)
	out.RailUnitLevel = ptr.Deref(in.RailUnitLevel, "")
	out.Consolidation = config.ConsolidationArgs{}
	if c := in.Consolidation; c != nil {
		out.Consolidation = config.ConsolidationArgs{
			Enabled:                ptr.Deref(c.Enabled, false),
			WaitingFor:             durationOf(c.WaitingFor),
			MaxEvictionsPerHour:    ptr.Deref(c.MaxEvictionsPerHour, 0),
			Cooldown:               durationOf(c.Cooldown),
			MinRunTime:             durationOf(c.MinRunTime),
			MovablePriorityClasses: append([]string(nil), c.MovablePriorityClasses...),
		}
	}
}

// ConvertCoschedulingArgsFromInternal converts internal args to v1.
func ConvertCoschedulingArgsFromInternal(in *config.CoschedulingArgs, out *CoschedulingArgs) {
	out.PermitWaitingTimeSeconds = ptr.To(in.PermitWaitingTimeSeconds)
	out.PodGroupBackoffSeconds = ptr.To(in.PodGroupBackoffSeconds)
	out.PodGroupMaxBackoffSeconds = ptr.To(in.PodGroupMaxBackoffSeconds)
	out.ClaimReleaseGraceSeconds = ptr.To(in.ClaimReleaseGraceSeconds)
	out.TopologyPreset = nil
	if in.TopologyPreset != "" {
		out.TopologyPreset = ptr.To(in.TopologyPreset)
	}
	out.TopologyLevels = append([]string(nil), in.TopologyLevels...)
	out.RailAttributes = append([]string(nil), in.RailAttributes...)
	out.RailUnitLevel = nil
	if in.RailUnitLevel != "" {
		out.RailUnitLevel = ptr.To(in.RailUnitLevel)
	}
	c := in.Consolidation
	out.Consolidation = &ConsolidationArgs{
		Enabled:                ptr.To(c.Enabled),
		WaitingFor:             &metav1.Duration{Duration: c.WaitingFor},
		MaxEvictionsPerHour:    ptr.To(c.MaxEvictionsPerHour),
		Cooldown:               &metav1.Duration{Duration: c.Cooldown},
		MinRunTime:             &metav1.Duration{Duration: c.MinRunTime},
		MovablePriorityClasses: append([]string(nil), c.MovablePriorityClasses...),
	}
}

// ConvertGPUFleetArgsToInternal converts defaulted v1 args to the internal
// form.
func ConvertGPUFleetArgsToInternal(in *GPUFleetArgs, out *config.GPUFleetArgs) {
	out.UnlabelledNodes = ""
	if in.UnlabelledNodes != nil {
		out.UnlabelledNodes = *in.UnlabelledNodes
	}
	out.CapacityTypeLabels = cloneStrings(in.CapacityTypeLabels)
}

// ConvertGPUFleetArgsFromInternal converts internal args to v1.
func ConvertGPUFleetArgsFromInternal(in *config.GPUFleetArgs, out *GPUFleetArgs) {
	out.UnlabelledNodes = nil
	if in.UnlabelledNodes != "" {
		out.UnlabelledNodes = ptr.To(in.UnlabelledNodes)
	}
	out.CapacityTypeLabels = cloneStrings(in.CapacityTypeLabels)
}

// cloneStrings copies s, keeping nil and empty apart: an empty
// capacityTypeLabels is the user's choice and must reach validation.
func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append([]string{}, s...)
}

// durationOf is the duration d holds; zero when unset.
func durationOf(d *metav1.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.Duration
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
