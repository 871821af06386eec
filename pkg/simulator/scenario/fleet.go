package scenario

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/fleet"
)

// Fleet gives the fabric's nodes the labels GPU feature discovery, the GPU
// Operator and node provisioners write: GPU product and compute capability,
// driver and CUDA versions, sharing strategy, capacity type and driver
// upgrade state. Each attribute left out writes no labels at all. Each is
// drawn from a weighted mix, per node or per larger domain, with its own
// random stream from Seed, so the same scenario always labels the same
// nodes alike.
type Fleet struct {
	// Seed seeds the draws; default the scenario's seed.
	Seed *int64 `json:"seed,omitempty"`
	// Products are GPU models.
	Products *Mix[Product] `json:"products,omitempty"`
	// Drivers are driver versions, with the CUDA version each supports.
	Drivers *Mix[Driver] `json:"drivers,omitempty"`
	// Sharing are device plugin sharing strategies.
	Sharing *Mix[Sharing] `json:"sharing,omitempty"`
	// Capacity are capacity types.
	Capacity *Mix[Capacity] `json:"capacity,omitempty"`
	// Upgrading is the fraction of nodes, in [0, 1), whose driver the GPU
	// Operator is upgrading (state upgrade-required); when set, the other
	// nodes are labelled upgrade-done. The nodes are drawn at random.
	Upgrading float64 `json:"upgrading,omitempty"`
}

// Mix is a weighted choice drawn once per unit of the fabric.
type Mix[T weighted] struct {
	// Per is the unit each draw labels: node (default), clique, leaf or
	// spine. Every node of a unit gets the same choice.
	Per string `json:"per,omitempty"`
	// Choices are the options; each is drawn with probability weight over
	// the sum of weights.
	Choices []T `json:"choices"`
}

// Units a Mix draws per.
const (
	PerNode   = "node"
	PerClique = TierClique
	PerLeaf   = TierLeaf
	PerSpine  = TierSpine
)

type weighted interface {
	weight() int
}

// Weights returns each choice's weight; an unset weight is 1.
func (m *Mix[T]) Weights() []int {
	w := make([]int, len(m.Choices))
	for i, c := range m.Choices {
		w[i] = c.weight()
	}
	return w
}

// Product is a GPU model.
type Product struct {
	// Name is the nvidia.com/gpu.product value, such as
	// NVIDIA-H100-80GB-HBM3.
	Name string `json:"name"`
	// Compute is the compute capability, such as "9.0".
	Compute string `json:"compute"`
	// Weight is the choice's relative weight; default 1.
	Weight int `json:"weight,omitempty"`
}

func (p Product) weight() int { return defaultWeight(p.Weight) }

// Driver is an NVIDIA driver.
type Driver struct {
	// Version is the driver version, such as "550.54.15".
	Version string `json:"version"`
	// CUDA is the highest CUDA version the driver supports, such as "12.4".
	CUDA string `json:"cuda"`
	// Labels is which GPU feature discovery keys the node carries: both
	// (default: current releases write the current and the deprecated
	// keys), current, deprecated (older releases) or none (no CUDA or
	// driver label at all).
	Labels string `json:"labels,omitempty"`
	// Weight is the choice's relative weight; default 1.
	Weight int `json:"weight,omitempty"`
}

func (d Driver) weight() int { return defaultWeight(d.Weight) }

// Driver label sets.
const (
	DriverLabelsBoth       = "both"
	DriverLabelsCurrent    = "current"
	DriverLabelsDeprecated = "deprecated"
	DriverLabelsNone       = "none"
)

// Sharing is a device plugin sharing strategy.
type Sharing struct {
	// Strategy is none, time-slicing or mps.
	Strategy string `json:"strategy"`
	// Replicas is how many pods share each GPU (time-slicing and mps, at
	// least 2). The node then advertises gpusPerNode x replicas
	// nvidia.com/gpu, as the device plugin does without renaming.
	Replicas int `json:"replicas,omitempty"`
	// Weight is the choice's relative weight; default 1.
	Weight int `json:"weight,omitempty"`
}

func (s Sharing) weight() int { return defaultWeight(s.Weight) }

// Capacity is a capacity type.
type Capacity struct {
	// Type is spot or on-demand.
	Type string `json:"type"`
	// Label is the key that says it, one of those the plugin reads by
	// default; default karpenter.sh/capacity-type. Its value follows the
	// key's convention (fleet.CapacityLabelValue).
	Label string `json:"label,omitempty"`
	// Weight is the choice's relative weight; default 1.
	Weight int `json:"weight,omitempty"`
}

func (c Capacity) weight() int { return defaultWeight(c.Weight) }

func defaultWeight(w int) int {
	if w == 0 {
		return 1
	}
	return w
}

// setFleetDefaults fills what a fleet may leave out.
func setFleetDefaults(s *Scenario) {
	f := s.Fabric.Fleet
	if f == nil {
		return
	}
	if f.Seed == nil {
		seed := s.Seed
		f.Seed = &seed
	}
	setPer := func(per *string) {
		if *per == "" {
			*per = PerNode
		}
	}
	if m := f.Products; m != nil {
		setPer(&m.Per)
	}
	if m := f.Drivers; m != nil {
		setPer(&m.Per)
		for i := range m.Choices {
			if m.Choices[i].Labels == "" {
				m.Choices[i].Labels = DriverLabelsBoth
			}
		}
	}
	if m := f.Sharing; m != nil {
		setPer(&m.Per)
	}
	if m := f.Capacity; m != nil {
		setPer(&m.Per)
		for i := range m.Choices {
			if m.Choices[i].Label == "" {
				m.Choices[i].Label = scheduling.LabelKarpenterCapacityType
			}
		}
	}
}

func validateFleet(fab *Fabric, path *field.Path) field.ErrorList {
	f := fab.Fleet
	if f == nil {
		return nil
	}
	var errs field.ErrorList
	if f.Products != nil {
		p := path.Child("products")
		errs = append(errs, validateMix(f.Products, fab, p)...)
		for i, c := range f.Products.Choices {
			cp := p.Child("choices").Index(i)
			if c.Name == "" {
				errs = append(errs, field.Required(cp.Child("name"), "the nvidia.com/gpu.product value"))
			} else if msgs := validation.IsValidLabelValue(c.Name); len(msgs) > 0 {
				errs = append(errs, field.Invalid(cp.Child("name"), c.Name, msgs[0]))
			}
			errs = append(errs, validateVersion(c.Compute, 2, `a compute capability such as "9.0"`, cp.Child("compute"))...)
		}
	}
	if f.Drivers != nil {
		p := path.Child("drivers")
		errs = append(errs, validateMix(f.Drivers, fab, p)...)
		for i, c := range f.Drivers.Choices {
			cp := p.Child("choices").Index(i)
			errs = append(errs, validateVersion(c.Version, 3, `a driver version such as "550.54.15"`, cp.Child("version"))...)
			errs = append(errs, validateVersion(c.CUDA, 2, `a CUDA version such as "12.4"`, cp.Child("cuda"))...)
			switch c.Labels {
			case DriverLabelsBoth, DriverLabelsCurrent, DriverLabelsDeprecated, DriverLabelsNone:
			default:
				errs = append(errs, field.NotSupported(cp.Child("labels"), c.Labels,
					[]string{DriverLabelsBoth, DriverLabelsCurrent, DriverLabelsDeprecated, DriverLabelsNone}))
			}
		}
	}
	if f.Sharing != nil {
		p := path.Child("sharing")
		errs = append(errs, validateMix(f.Sharing, fab, p)...)
		for i, c := range f.Sharing.Choices {
			cp := p.Child("choices").Index(i)
			switch c.Strategy {
			case scheduling.SharingStrategyNone:
				if c.Replicas != 0 {
					errs = append(errs, field.Invalid(cp.Child("replicas"), c.Replicas, "must be unset when nothing is shared"))
				}
			case scheduling.SharingStrategyTimeSlicing, scheduling.SharingStrategyMPS:
				if c.Replicas < 2 {
					errs = append(errs, field.Invalid(cp.Child("replicas"), c.Replicas, "must be at least 2: it is how many pods share each GPU"))
				}
			default:
				errs = append(errs, field.NotSupported(cp.Child("strategy"), c.Strategy,
					[]string{scheduling.SharingStrategyNone, scheduling.SharingStrategyTimeSlicing, scheduling.SharingStrategyMPS}))
			}
		}
	}
	if f.Capacity != nil {
		p := path.Child("capacity")
		errs = append(errs, validateMix(f.Capacity, fab, p)...)
		for i, c := range f.Capacity.Choices {
			cp := p.Child("choices").Index(i)
			switch fleet.CapacityType(c.Type) {
			case fleet.CapacitySpot, fleet.CapacityOnDemand:
			default:
				errs = append(errs, field.NotSupported(cp.Child("type"), c.Type, []string{string(fleet.CapacitySpot), string(fleet.CapacityOnDemand)}))
			}
			// The simulator runs the plugin with its default args, which
			// read only these keys.
			if keys := scheduling.DefaultCapacityTypeLabels(); !contains(keys, c.Label) {
				errs = append(errs, field.NotSupported(cp.Child("label"), c.Label, keys))
			}
		}
	}
	if f.Upgrading < 0 || f.Upgrading >= 1 {
		errs = append(errs, field.Invalid(path.Child("upgrading"), f.Upgrading, "must be in [0, 1)"))
	}
	return errs
}

func validateMix[T weighted](m *Mix[T], fab *Fabric, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch m.Per {
	case PerNode, PerLeaf, PerSpine:
	case PerClique:
		if fab.CliqueSize == 0 {
			errs = append(errs, field.Invalid(path.Child("per"), m.Per, "the fabric has no cliques (cliqueSize is 0)"))
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("per"), m.Per, []string{PerNode, PerClique, PerLeaf, PerSpine}))
	}
	if len(m.Choices) == 0 {
		errs = append(errs, field.Required(path.Child("choices"), "list at least one choice"))
	}
	for i, w := range m.Choices {
		if w.weight() < 0 {
			errs = append(errs, field.Invalid(path.Child("choices").Index(i).Child("weight"), w.weight(), "must not be negative"))
		}
	}
	return errs
}

func validateVersion(s string, maxParts int, want string, path *field.Path) field.ErrorList {
	v, err := fleet.ParseVersion(s)
	if err != nil {
		return field.ErrorList{field.Invalid(path, s, "want "+want+"; the value "+err.Error())}
	}
	if v.Len() > maxParts {
		return field.ErrorList{field.Invalid(path, s, fmt.Sprintf("want %s, at most %d components", want, maxParts))}
	}
	return nil
}

// GPURequirements are a gang's GPU fleet policy, which gpu-gang reads from
// PodGroup annotations (see pkg/apis/scheduling). Empty fields set no
// annotation, leaving gpu-gang's defaults.
type GPURequirements struct {
	// MinCUDA is gpu-gang.x-k8s.io/min-cuda, such as "12.4".
	MinCUDA string `json:"minCUDA,omitempty"`
	// MinComputeCapability is gpu-gang.x-k8s.io/min-compute-capability.
	MinComputeCapability string `json:"minComputeCapability,omitempty"`
	// Uniform is gpu-gang.x-k8s.io/uniform: none, or label keys.
	Uniform string `json:"uniform,omitempty"`
	// CapacityType is gpu-gang.x-k8s.io/capacity-type: on-demand, spot,
	// uniform or any.
	CapacityType string `json:"capacityType,omitempty"`
	// AllowSharedGPUs sets gpu-gang.x-k8s.io/allow-shared-gpus: "true".
	AllowSharedGPUs bool `json:"allowSharedGPUs,omitempty"`
}

// Annotations returns the PodGroup annotations that express r; nil for a
// nil r.
func (r *GPURequirements) Annotations() map[string]string {
	if r == nil {
		return nil
	}
	a := map[string]string{}
	set := func(key, value string) {
		if value != "" {
			a[key] = value
		}
	}
	set(scheduling.AnnotationMinCUDA, r.MinCUDA)
	set(scheduling.AnnotationMinComputeCapability, r.MinComputeCapability)
	set(scheduling.AnnotationUniform, r.Uniform)
	set(scheduling.AnnotationCapacityType, r.CapacityType)
	if r.AllowSharedGPUs {
		a[scheduling.AnnotationAllowSharedGPUs] = "true"
	}
	return a
}

// Requirements returns what gpu-gang reads from r's annotations.
func (r *GPURequirements) Requirements() (fleet.Requirements, error) {
	return fleet.ParseRequirements(r.Annotations(), nil)
}

// gpuFields maps annotations to the fields that set them, for errors.
var gpuFields = map[string]string{
	scheduling.AnnotationMinCUDA:              "minCUDA",
	scheduling.AnnotationMinComputeCapability: "minComputeCapability",
	scheduling.AnnotationUniform:              "uniform",
	scheduling.AnnotationCapacityType:         "capacityType",
	scheduling.AnnotationAllowSharedGPUs:      "allowSharedGPUs",
}

// validateGPU checks r with gpu-gang's own parser, so that a scenario can
// only ask what the plugin understands.
func validateGPU(r *GPURequirements, path *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	_, err := r.Requirements()
	if err == nil {
		return nil
	}
	var errs field.ErrorList
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var ae *fleet.AnnotationError
		if errors.As(e, &ae) {
			errs = append(errs, field.Invalid(path.Child(gpuFields[ae.Annotation]), ae.Value, ae.Reason+"; want "+ae.Want))
		} else {
			errs = append(errs, field.Invalid(path, r, e.Error()))
		}
	}
	return errs
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
