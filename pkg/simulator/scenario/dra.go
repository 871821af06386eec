package scenario

import (
	"fmt"
	"math"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// How nodes offer their GPUs (Fabric.GPUSource).
const (
	// GPUSourceDevicePlugin: the node advertises nvidia.com/gpu, as NVIDIA's
	// device plugin makes it.
	GPUSourceDevicePlugin = "device-plugin"
	// GPUSourceDRA: the node advertises no nvidia.com/gpu; NVIDIA's DRA
	// driver publishes its GPUs as one ResourceSlice.
	GPUSourceDRA = "dra"
	// GPUSourceMixed: Fabric.DRANodes says which nodes use DRA; the others
	// use the device plugin.
	GPUSourceMixed = "mixed"
)

// How a job's pods ask for their GPUs (GPURequest fields).
const (
	// GPURequestExtendedResource asks for nvidia.com/gpu in the container's
	// requests and limits: served by the device plugin on nodes that
	// advertise it, and from DRA devices through the DeviceClass's
	// extendedResourceName on nodes that do not.
	GPURequestExtendedResource = "extended-resource"
	// GPURequestClaim gives each pod a ResourceClaim, from one
	// ResourceClaimTemplate per job, for exactly its GPUs of DeviceClass
	// gpu.nvidia.com. Only DRA nodes can serve it.
	GPURequestClaim = "claim"
)

// DRANodes picks the nodes of a mixed fabric that publish their GPUs
// through DRA: either whole spines, or a fraction of the fabric's nodes,
// cliques, leaves or spines drawn at random.
type DRANodes struct {
	// Spines lists the indices (from 0) of the spines whose every node
	// uses DRA.
	Spines []int `json:"spines,omitempty"`
	// Fraction of the fabric's units (Per) that use DRA, in (0, 1): the
	// number is rounded to the nearest whole unit, the units drawn at
	// random.
	Fraction float64 `json:"fraction,omitempty"`
	// Per is the unit Fraction counts: node (default), clique, leaf or
	// spine.
	Per string `json:"per,omitempty"`
	// Seed seeds the draw; default the scenario's seed.
	Seed *int64 `json:"seed,omitempty"`
}

// setDRADefaults fills what the GPU source and the jobs' GPU requests may
// leave out.
func setDRADefaults(s *Scenario) {
	f := &s.Fabric
	if f.GPUSource == "" {
		f.GPUSource = GPUSourceDevicePlugin
	}
	if d := f.DRANodes; d != nil {
		if d.Fraction > 0 && d.Per == "" {
			d.Per = PerNode
		}
		if d.Seed == nil {
			seed := s.Seed
			d.Seed = &seed
		}
	}
	for _, req := range jobGPURequests(s) {
		if *req == "" {
			*req = GPURequestExtendedResource
		}
	}
}

// jobGPURequests returns the GPURequest field of every class and job.
func jobGPURequests(s *Scenario) []*string {
	var out []*string
	for i := range s.Workload.Gangs {
		out = append(out, &s.Workload.Gangs[i].GPURequest)
	}
	for i := range s.Workload.Jobs {
		out = append(out, &s.Workload.Jobs[i].GPURequest)
	}
	for i := range s.Workload.Pods {
		out = append(out, &s.Workload.Pods[i].GPURequest)
	}
	return out
}

// HasDRANodes reports whether any node of a defaulted, valid fabric
// publishes its GPUs through DRA.
func (f *Fabric) HasDRANodes() bool {
	return f.GPUSource == GPUSourceDRA || f.GPUSource == GPUSourceMixed
}

// Units counts the fabric's domains of a Per unit: nodes, cliques, leaves
// or spines.
func (f *Fabric) Units(per string) int {
	leaves := f.Spines * f.LeavesPerSpine
	switch per {
	case PerSpine:
		return f.Spines
	case PerLeaf:
		return leaves
	case PerClique:
		if f.CliqueSize == 0 {
			return 0
		}
		return leaves * (f.NodesPerLeaf / f.CliqueSize)
	}
	return leaves * f.NodesPerLeaf
}

// DrawnUnits is how many units of DRANodes.Per a fraction picks.
func (d *DRANodes) DrawnUnits(units int) int {
	return int(math.Round(d.Fraction * float64(units)))
}

func validateGPUSource(f *Fabric, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	sources := []string{GPUSourceDevicePlugin, GPUSourceDRA, GPUSourceMixed}
	if !contains(sources, f.GPUSource) {
		return field.ErrorList{field.NotSupported(path.Child("gpuSource"), f.GPUSource, sources)}
	}
	dp := path.Child("draNodes")
	switch d := f.DRANodes; {
	case f.GPUSource != GPUSourceMixed && d != nil:
		errs = append(errs, field.Forbidden(dp, "only a mixed gpuSource picks DRA nodes"))
	case f.GPUSource == GPUSourceMixed && d == nil:
		errs = append(errs, field.Required(dp, "a mixed gpuSource needs spines or a fraction of DRA nodes"))
	case d != nil:
		errs = append(errs, validateDRANodes(f, d, dp)...)
	}
	if !f.HasDRANodes() {
		return errs
	}
	if f.GPUsPerNode > resourceapi.ResourceSliceMaxDevices {
		errs = append(errs, field.Invalid(path.Child("gpusPerNode"), f.GPUsPerNode,
			fmt.Sprintf("a ResourceSlice holds at most %d devices, and each DRA node publishes one", resourceapi.ResourceSliceMaxDevices)))
	}
	if fl := f.Fleet; fl != nil && fl.Sharing != nil {
		for i, c := range fl.Sharing.Choices {
			if c.Strategy != scheduling.SharingStrategyNone {
				errs = append(errs, field.Forbidden(path.Child("fleet", "sharing", "choices").Index(i),
					"GPUs that DRA publishes are shared through claim configuration, which the simulator does not model; share GPUs only on a device-plugin fabric"))
			}
		}
	}
	return errs
}

func validateDRANodes(f *Fabric, d *DRANodes, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case len(d.Spines) > 0 && d.Fraction != 0:
		return field.ErrorList{field.Invalid(path, d, "set either spines or fraction")}
	case len(d.Spines) > 0:
		if d.Per != "" {
			errs = append(errs, field.Forbidden(path.Child("per"), "per goes with fraction; spines names whole spines"))
		}
		seen := sets.New[int]()
		for i, s := range d.Spines {
			switch {
			case s < 0 || s >= f.Spines:
				errs = append(errs, field.Invalid(path.Child("spines").Index(i), s, fmt.Sprintf("the fabric has spines 0 to %d", f.Spines-1)))
			case seen.Has(s):
				errs = append(errs, field.Duplicate(path.Child("spines").Index(i), s))
			}
			seen.Insert(s)
		}
		if len(errs) == 0 && seen.Len() == f.Spines {
			errs = append(errs, field.Invalid(path.Child("spines"), d.Spines, "lists every spine: use gpuSource dra"))
		}
	default:
		switch d.Per {
		case PerNode, PerLeaf, PerSpine:
		case PerClique:
			if f.CliqueSize == 0 {
				return append(errs, field.Invalid(path.Child("per"), d.Per, "the fabric has no cliques (cliqueSize is 0)"))
			}
		default:
			return append(errs, field.NotSupported(path.Child("per"), d.Per, []string{PerNode, PerClique, PerLeaf, PerSpine}))
		}
		units := f.Units(d.Per)
		if d.Fraction <= 0 || d.Fraction >= 1 {
			errs = append(errs, field.Invalid(path.Child("fraction"), d.Fraction, "must be in (0, 1)"))
		} else if n := d.DrawnUnits(units); units > 0 && (n == 0 || n == units) {
			errs = append(errs, field.Invalid(path.Child("fraction"), d.Fraction,
				fmt.Sprintf("picks %d of the fabric's %d %s units: a mixed fabric needs some of each kind", n, units, d.Per)))
		}
	}
	return errs
}

// validateGPURequest checks one class's or job's GPURequest: a claim needs
// GPUs and DRA nodes to serve it.
func validateGPURequest(f *Fabric, req string, least int, path *field.Path) field.ErrorList {
	switch req {
	case GPURequestExtendedResource:
		return nil
	case GPURequestClaim, GPURequestClaimWithNICs:
		var errs field.ErrorList
		if !f.HasDRANodes() {
			errs = append(errs, field.Invalid(path, req, "no node publishes gpu.nvidia.com devices: set fabric.gpuSource to dra or mixed"))
		}
		if req == GPURequestClaimWithNICs && !f.HasRails() {
			errs = append(errs, field.Invalid(path, req, "no node publishes dra.net NICs: set fabric.rails"))
		}
		if least < 1 {
			errs = append(errs, field.Invalid(path, req, "a claim asks for at least one GPU: set the GPUs to 1 or more"))
		}
		return errs
	}
	return field.ErrorList{field.NotSupported(path, req, []string{GPURequestExtendedResource, GPURequestClaim, GPURequestClaimWithNICs})}
}

// smallest is the smallest value r can draw.
func (r IntRange) smallest() int {
	if len(r.Choices) > 0 {
		return slices.Min(r.Choices)
	}
	return r.Min
}
