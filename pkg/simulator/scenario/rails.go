package scenario

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// Rails makes a fabric rail-optimized, as the scalable units of large GPU
// clusters are cabled: NIC k of every node plugs into leaf switch k, "rail
// k", and GPU k sits on the same PCIe root as NIC k. Every DRA node then
// publishes, besides its GPUs, one RDMA NIC per GPU as a second node-local
// pool, of dranet's driver dra.net (see fabric.Layout.NICSlice). Rail k is
// the node's k-th NIC in PCI address order.
type Rails struct {
	// NICOrder is how the NICs' device names and their order in the
	// ResourceSlice follow their PCI addresses, and so their rails:
	// shuffled (default: names and slice order drawn per node from Seed,
	// so that no allocator aligns rails by picking devices first by name
	// or position) or pci (nic-k is rail k, listed in rail order).
	NICOrder string `json:"nicOrder,omitempty"`
	// Seed seeds the shuffles and which GPUs the pre-fill holds on each
	// node; default the scenario's seed.
	Seed *int64 `json:"seed,omitempty"`
}

// Rails.NICOrder values.
const (
	NICOrderShuffled = "shuffled"
	NICOrderPCI      = "pci"
)

// MaxRails is the most GPUs (and so rails) a node of a rail-optimized
// fabric may have.
const MaxRails = 64

// GPURequestClaimWithNICs gives each pod one ResourceClaim, from one
// ResourceClaimTemplate per job, for its GPUs and as many RDMA NICs, paired
// under PCIe roots: requests gpu-0, nic-0, gpu-1, nic-1, ... of exactly one
// device each (DeviceClass gpu.nvidia.com, and dra.net with
// device.attributes["dra.net"].rdma == true), and one constraint per pair
// that its two devices match resource.kubernetes.io/pcieRoot. It needs a
// rail-optimized fabric (Fabric.Rails).
const GPURequestClaimWithNICs = "claim-with-nics"

// Rail alignment of a gang (RailAlignment fields), written as gpu-gang's
// PodGroup annotation gpu-gang.x-k8s.io/rail-alignment.
const (
	RailAlignmentRequired  = scheduling.RailAlignmentRequired
	RailAlignmentPreferred = scheduling.RailAlignmentPreferred
	RailAlignmentNone      = scheduling.RailAlignmentNone
)

// HasRails reports whether the fabric is rail-optimized.
func (f *Fabric) HasRails() bool { return f.Rails != nil }

// setRailsDefaults fills what a fabric's rails may leave out.
func setRailsDefaults(s *Scenario) {
	r := s.Fabric.Rails
	if r == nil {
		return
	}
	if r.NICOrder == "" {
		r.NICOrder = NICOrderShuffled
	}
	if r.Seed == nil {
		seed := s.Seed
		r.Seed = &seed
	}
}

func validateRails(f *Fabric, path *field.Path) field.ErrorList {
	r := f.Rails
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	if !f.HasDRANodes() {
		errs = append(errs, field.Invalid(path, "rails", "only DRA nodes publish NICs: set fabric.gpuSource to dra or mixed"))
	}
	if f.GPUsPerNode > MaxRails {
		errs = append(errs, field.Invalid(path.Root().Child("fabric", "gpusPerNode"), f.GPUsPerNode,
			"a rail-optimized node pairs each GPU with a NIC on its own rail; at most 64 rails are modelled"))
	}
	if r.NICOrder != NICOrderShuffled && r.NICOrder != NICOrderPCI {
		errs = append(errs, field.NotSupported(path.Child("nicOrder"), r.NICOrder, []string{NICOrderShuffled, NICOrderPCI}))
	}
	return errs
}

// validateRailAlignment checks a gang's RailAlignment: empty (gpu-gang's
// default) or one of the annotation's values.
func validateRailAlignment(v string, path *field.Path) field.ErrorList {
	switch v {
	case "", RailAlignmentRequired, RailAlignmentPreferred, RailAlignmentNone:
		return nil
	}
	return field.ErrorList{field.NotSupported(path, v, []string{RailAlignmentRequired, RailAlignmentPreferred, RailAlignmentNone})}
}
