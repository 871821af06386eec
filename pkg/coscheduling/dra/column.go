package dra

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/fleet"
)

// Column reads one dimension of a pass node by node, from the node's
// allocatable or its devices.
type Column struct {
	Name v1.ResourceName
	// MayUseDevices is set when the dimension may be served by devices
	// (Devices then reads them); the zero column reads the node's
	// allocatable alone.
	MayUseDevices bool
	Devices       capacity.Column
}

// Allocatable is node ni's whole capacity in the column.
func (c *Column) Allocatable(ctx context.Context, ni fwk.NodeInfo) int64 {
	if c.MayUseDevices {
		return c.Devices.Allocatable(ctx, NodeCapacity{ni})
	}
	return ResourceQuantity(ni.GetAllocatable(), c.Name)
}

// Free is what a gang may use of the column on node ni now, less held.
func (c *Column) Free(ctx context.Context, ni fwk.NodeInfo, held capacity.Amounts) int64 {
	if c.MayUseDevices {
		return c.Devices.Free(ctx, NodeCapacity{ni}, held)
	}
	return NodeFree(ni, c.Name) - held[c.Name]
}

// NodeCapacity reads a NodeInfo as pkg/capacity's allocatable source.
type NodeCapacity struct{ Info fwk.NodeInfo }

// Name is the node's name.
func (n NodeCapacity) Name() string { return n.Info.Node().Name }

// Allocatable is the node's whole capacity of a resource.
func (n NodeCapacity) Allocatable(name v1.ResourceName) int64 {
	return ResourceQuantity(n.Info.GetAllocatable(), name)
}

// Free is the node's allocatable less what its pods request.
func (n NodeCapacity) Free(name v1.ResourceName) int64 { return NodeFree(n.Info, name) }

// ResourceQuantity reads one resource from a framework Resource in the same
// units as capacity.Amounts.
func ResourceQuantity(r fwk.Resource, name v1.ResourceName) int64 {
	switch name {
	case v1.ResourceCPU:
		return r.GetMilliCPU()
	case v1.ResourceMemory:
		return r.GetMemory()
	case v1.ResourceEphemeralStorage:
		return r.GetEphemeralStorage()
	case v1.ResourcePods:
		return int64(r.GetAllowedPodNumber())
	}
	return r.GetScalarResources()[name]
}

// NodeFree is what is left on a node for one resource: allocatable minus what
// its pods (assumed ones included) request. The pod count comes from the pod
// list, since Resource does not track it.
func NodeFree(ni fwk.NodeInfo, name v1.ResourceName) int64 {
	if name == v1.ResourcePods {
		return int64(ni.GetAllocatable().GetAllowedPodNumber() - len(ni.GetPods()))
	}
	return ResourceQuantity(ni.GetAllocatable(), name) - ResourceQuantity(ni.GetRequested(), name)
}

// FitsWithHeld reports whether pod fits on the node once held is set aside,
// and if not, the first resource (in name order) that is short.
func FitsWithHeld(ni fwk.NodeInfo, pod, held capacity.Amounts) (bool, v1.ResourceName) {
	for _, name := range pod.Names() {
		if pod[name] == 0 || held[name] == 0 {
			continue
		}
		if pod[name]+held[name] > NodeFree(ni, name) {
			return false, name
		}
	}
	return true, ""
}

// UsesAccelerators reports whether a requests any accelerator
// (fleet.IsAccelerator), such as nvidia.com/gpu. Only such members are
// bound by topology.
func UsesAccelerators(a capacity.Amounts) bool {
	for name, q := range a {
		if q > 0 && fleet.IsAccelerator(name) {
			return true
		}
	}
	return false
}
