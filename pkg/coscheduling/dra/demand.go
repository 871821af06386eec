package dra

import (
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
)

// PassDemand is what the members of one planning pass ask for, plain
// resources and devices, read once per pass by DeviceSource.Demand. It is
// not capacity.Demand (the device part alone, in planner dimensions, which
// PassDemand.Gang holds) nor fleet.PodDemand (the GPU kinds one pod asks
// for, which the fleet plugin matches to node labels).
type PassDemand struct {
	// Requests[i] is member i's request: its plain amounts, plus device
	// dimensions when it takes devices.
	Requests []capacity.Amounts
	// Devices is the device source of the pass; nil when no member takes
	// devices and no dimension is served by them: the plain pass.
	Devices *capacity.Devices
	// Gang is the device demand in planner dimensions; nil on a plain
	// pass.
	Gang *capacity.Demand
	// Pods are the members' device demands, by member; nil when the
	// framework has no DRA manager.
	Pods []*capacity.PodDevices
	// Alternatives is how many firstAvailable alternatives the richest
	// request has: a pass may be retried with the next one.
	Alternatives int
}

// Accelerated reports whether member i is bound by topology: it asks for an
// accelerator, or takes devices (through its own claim or one it shares).
func (d *PassDemand) Accelerated(i int) bool {
	return UsesAccelerators(d.Requests[i]) || d.Gang != nil && d.Gang.Accelerated[i]
}

// Exact reports whether the model counts member i's devices exactly, so
// that DynamicResources' per-node verdict need not narrow its nodes.
func (d *PassDemand) Exact(i int) bool {
	return d.Gang == nil || d.Pods[i] == nil || !d.Pods[i].Any() || d.Gang.Exact[i]
}

// Unions are the pass's union dimensions.
func (d *PassDemand) Unions() map[v1.ResourceName][]v1.ResourceName {
	if d.Gang == nil {
		return nil
	}
	return d.Gang.Unions
}

// IsUnion reports whether a dimension of the pass is a union of kinds.
func (d *PassDemand) IsUnion(name v1.ResourceName) bool {
	_, ok := d.Unions()[name]
	return ok
}

// Columns resolves the pass's dimensions once.
func (d *PassDemand) Columns(dims []v1.ResourceName) []Column {
	out := make([]Column, len(dims))
	for i, name := range dims {
		out[i].Name = name
		if d.Devices == nil {
			continue
		}
		c := d.Devices.Column(name, d.Unions())
		if c.Devices() {
			out[i] = Column{Name: name, MayUseDevices: true, Devices: c}
		}
	}
	return out
}

// Describe names a dimension of the pass for people: a resource name, or
// the devices a kind takes.
func (d *PassDemand) Describe(name string) string {
	if d.Devices == nil || !capacity.IsDeviceDimension(v1.ResourceName(name)) {
		return name
	}
	return d.Devices.DescribeDimension(v1.ResourceName(name), d.Unions())
}

// Chosen names the firstAvailable subrequests the pass planned with, for
// the plan's Event; "" when there are none.
func (d *PassDemand) Chosen() string {
	if d.Gang == nil || len(d.Gang.Chosen) == 0 {
		return ""
	}
	return "; firstAvailable: " + strings.Join(d.Gang.Chosen, ", ")
}

// TemplateDevices is what a pass knows of the devices of the members that
// share one pod template.
type TemplateDevices struct {
	// Counted is set when the model counts the members' devices exactly.
	// DynamicResources' verdict on a node is then capacity, which the
	// planner counts itself (and counts what will free up), as it does
	// NodeResourcesFit's; otherwise DynamicResources narrows the
	// template's nodes to those where a member could allocate now.
	Counted bool
	// Devices is what the template's first member takes of devices; nil
	// on a plain pass.
	Devices *capacity.PodDevices
	// Pins are the allocated claims that pin the members to some nodes
	// (PinsOf), which the eligibility pass enforces whether or not
	// DynamicResources' Filter runs: that Filter is where kube-scheduler
	// enforces them, and a counted template skips it.
	Pins []capacity.PinnedClaim
}

// ForTemplate returns what the pass knows of the devices of members
// (indices into the pass, the template's first member first).
func (d *PassDemand) ForTemplate(members []int) TemplateDevices {
	var out TemplateDevices
	if d.Pods != nil {
		out.Pins = PinsOf(d.Pods, members)
	}
	if d.Gang == nil {
		return out
	}
	out.Devices = d.Pods[members[0]]
	takes, exact := false, true
	for _, i := range members {
		takes = takes || d.Pods[i] != nil && d.Pods[i].Any()
		exact = exact && d.Exact(i)
	}
	out.Counted = takes && exact
	return out
}

// PinsOf returns the allocated claims that pin any of members (indices into
// pods), each once, in member order. Members of one template share their
// spec's claims, but a claim made from a template is each member's own:
// the template keeps to the nodes every member's claims reach, which may
// leave it none (then the gang waits, and says which claim pins it).
func PinsOf(pods []*capacity.PodDevices, members []int) []capacity.PinnedClaim {
	var out []capacity.PinnedClaim
	for _, i := range members {
		if pods[i] == nil {
			continue
		}
		for _, p := range pods[i].Pinned {
			if !slices.ContainsFunc(out, func(q capacity.PinnedClaim) bool { return q.Name == p.Name }) {
				out = append(out, p)
			}
		}
	}
	return out
}
