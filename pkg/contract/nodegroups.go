package contract

import (
	"fmt"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// NodeGroupsStateKey is the CycleState key under which a PreFilter plugin
// whose policy groups nodes leaves a placement.Grouper for the pod.
//
// Writer: GPUFleet's PreFilter (a gang is uniform: one GPU product, driver
// and capacity type), through WriteNodeGroups. Reader: the gang plugin,
// which runs the profile's PreFilter plugins for the gang's members when it
// plans them and reads the Grouper of the gang's first accelerated member
// (ReadNodeGroups), so the policy stays with its owner and the gang plugin
// needs no knowledge of it. Clone shares the state: nothing writes it after
// PreFilter.
const NodeGroupsStateKey fwk.StateKey = "gpu-gang.x-k8s.io/node-groups"

// NodeGroupsState is what a plugin leaves under NodeGroupsStateKey: a
// Grouper the CycleState can hold. Its Clone may share it, as nothing
// writes it after PreFilter.
type NodeGroupsState interface {
	fwk.StateData
	placement.Grouper
}

// WriteNodeGroups leaves s in cs for the gang plugin (NodeGroupsStateKey).
func WriteNodeGroups(cs fwk.CycleState, s NodeGroupsState) {
	cs.Write(NodeGroupsStateKey, s)
}

// ReadNodeGroups returns the Grouper a PreFilter plugin left in cs; an
// error when none did.
func ReadNodeGroups(cs fwk.CycleState) (placement.Grouper, error) {
	data, err := cs.Read(NodeGroupsStateKey)
	if err != nil {
		return nil, fmt.Errorf("reading %q from cycle state: %w", NodeGroupsStateKey, err)
	}
	g, ok := data.(placement.Grouper)
	if !ok {
		return nil, fmt.Errorf("%q in cycle state has type %T, not a placement.Grouper", NodeGroupsStateKey, data)
	}
	return g, nil
}
