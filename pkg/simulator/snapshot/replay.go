package snapshot

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/fleet"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
)

// replay reads what a snapshot's DRA objects say about its nodes and pods,
// so that a DRA cluster simulates on DRA nodes (fabric.NodeInfo.DRA):
//
//   - a node with no allocatable nvidia.com/gpu whose ResourceSlices
//     publish whole GPUs of NVIDIA's driver (scheduling.DRADriverGPU) is a
//     DRA node with that many GPUs. Its devices are read as pkg/capacity
//     reads slices (the newest complete generation of node-local pools)
//     and as pkg/fleet reads devices (ReadDevices); the simulator then
//     publishes as many devices, with the product, compute capability,
//     driver and CUDA version they state (fabric.Hardware), through the
//     DeviceClass NVIDIA's chart installs. A node whose devices include MIG
//     slices is not replayed;
//   - a bound pod holds, besides its nvidia.com/gpu, the GPU devices
//     allocated to its claims;
//   - a pending pod asks, besides its nvidia.com/gpu, for the GPUs its
//     claims and claim templates request of the GPU DeviceClass
//     (scheduling.DeviceClassGPU) as an exact count. A request of another
//     class, all devices or a prioritized list is not replayed: the pod is
//     simulated with the GPUs it asks for otherwise, and a note counts it.
type replay struct {
	inv       *capacity.Inventory
	claims    map[string]*resourceapi.ResourceClaim
	templates map[string]*resourceapi.ResourceClaimTemplate
	// unreplayed counts pods with a claim request left out.
	unreplayed int
	// migNodes counts nodes left out for their MIG devices.
	migNodes int
}

func newReplay(d *DRA) *replay {
	r := &replay{
		inv:       capacity.BuildInventory(d.Slices),
		claims:    make(map[string]*resourceapi.ResourceClaim, len(d.Claims)),
		templates: make(map[string]*resourceapi.ResourceClaimTemplate, len(d.Templates)),
	}
	for _, c := range d.Claims {
		r.claims[c.Namespace+"/"+c.Name] = c
	}
	for _, t := range d.Templates {
		r.templates[t.Namespace+"/"+t.Name] = t
	}
	return r
}

// node returns the whole GPUs node publishes through NVIDIA's driver, and
// what they are; 0 for none.
func (r *replay) node(name string) (int, fabric.Hardware) {
	devs := r.inv.Node(name)
	if devs == nil {
		return 0, fabric.Hardware{}
	}
	df := fleet.ReadDevices(devs.Devices)
	if df.Devices == 0 {
		return 0, fabric.Hardware{}
	}
	if df.MIG {
		r.migNodes++
		return 0, fabric.Hardware{}
	}
	var hw fabric.Hardware
	if len(df.Products) == 1 {
		// The product as GPU feature discovery would label it: the
		// simulator's slice turns it back into the driver's spelling.
		hw.Product = strings.ReplaceAll(df.Products[0], " ", "-")
	}
	majorMinor := func(v fleet.Version) string {
		if v.IsZero() {
			return ""
		}
		return fmt.Sprintf("%d.%d", v.Part(0), v.Part(1))
	}
	hw.Compute, hw.CUDA = majorMinor(df.Compute), majorMinor(df.CUDA)
	if !df.Driver.IsZero() {
		hw.Driver = fmt.Sprintf("%d.%d.%d", df.Driver.Part(0), df.Driver.Part(1), df.Driver.Part(2))
	}
	return df.Devices, hw
}

// claimNames are the names of the ResourceClaims pod uses: those it names,
// and those made for it from templates, as its status records them.
func claimNames(pod *v1.Pod) []string {
	var out []string
	for _, c := range pod.Spec.ResourceClaims {
		if c.ResourceClaimName != nil {
			out = append(out, *c.ResourceClaimName)
		}
	}
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			out = append(out, *s.ResourceClaimName)
		}
	}
	return out
}

// boundGPUs counts the devices of NVIDIA's GPU driver allocated to pod's
// claims.
func (r *replay) boundGPUs(pod *v1.Pod) int {
	n := 0
	for _, name := range claimNames(pod) {
		for _, id := range capacity.AllocatedDevices(r.claims[pod.Namespace+"/"+name]) {
			if id.Driver.String() == scheduling.DRADriverGPU {
				n++
			}
		}
	}
	return n
}

// pendingGPUs counts the GPUs pod's claims request of the GPU DeviceClass.
func (r *replay) pendingGPUs(pod *v1.Pod) int {
	n, left := 0, false
	for _, c := range pod.Spec.ResourceClaims {
		var spec *resourceapi.ResourceClaimSpec
		switch {
		case c.ResourceClaimName != nil:
			if claim := r.claims[pod.Namespace+"/"+*c.ResourceClaimName]; claim != nil {
				spec = &claim.Spec
			}
		case c.ResourceClaimTemplateName != nil:
			if t := r.templates[pod.Namespace+"/"+*c.ResourceClaimTemplateName]; t != nil {
				spec = &t.Spec.Spec
			}
		}
		if spec == nil {
			left = true
			continue
		}
		for _, req := range spec.Devices.Requests {
			e := req.Exactly
			if e == nil || e.DeviceClassName != scheduling.DeviceClassGPU ||
				(e.AllocationMode != "" && e.AllocationMode != resourceapi.DeviceAllocationModeExactCount) {
				left = true
				continue
			}
			count := e.Count
			if count == 0 {
				count = 1
			}
			n += int(count)
		}
	}
	if left {
		r.unreplayed++
	}
	return n
}

// notes says what replay left out.
func (r *replay) notes() []string {
	var out []string
	if r.migNodes > 0 {
		out = append(out, fmt.Sprintf("%d nodes that publish MIG devices through DRA", r.migNodes))
	}
	if r.unreplayed > 0 {
		out = append(out, fmt.Sprintf("the claims of %d pods that name a missing claim or template, or request other than an exact count of DeviceClass %s (simulated with the GPUs they ask for otherwise)",
			r.unreplayed, scheduling.DeviceClassGPU))
	}
	return out
}
