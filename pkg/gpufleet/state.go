package gpufleet

import (
	"fmt"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/contract"
	"github.com/gpu-gang/gpu-gang/pkg/fleet"
)

// stateKey is where PreFilter leaves the pod's cycleState. The gang plugin
// reads it too, as contract.FilterInputs (the contract's GPUFleetStateKey).
const stateKey = contract.GPUFleetStateKey

var (
	_ contract.GPUFleetState   = &cycleState{}
	_ contract.NodeGroupsState = &cycleState{}
)

// cycleState is what PreFilter read of a pod that asks for NVIDIA GPUs, for
// Filter, and for the gang plugin's planner as a placement.Grouper (see
// groups.go). Nothing writes it after PreFilter.
type cycleState struct {
	req    fleet.Requirements
	demand fleet.Demand
	// nodes is the plugin's node cache, shared; NodeGroups reads it.
	nodes *nodeCache
	// groupings is the plugin's memo of groupings, shared.
	groupings *groupings
	// devices are the devices ResourceSlices published when PreFilter
	// ran, shared read-only with every cycle that read the same; nil when
	// the plugin reads labels only. Filter and NodeGroups judge nodes by
	// these, so one cycle sees one set of devices.
	devices *capacity.Matcher
}

// filterInputs is everything Filter reads besides the node's labels and
// devices: equal inputs give every node the same verdict. It is comparable.
type filterInputs struct {
	req     fleet.Requirements
	demand  fleet.Demand
	devices *capacity.Matcher
}

// FilterInputs returns a comparable value that stands for everything the
// plugin's Filter reads of the pod and its gang (requirements, demand) and
// of the devices it judges nodes by: a caller may keep a node's verdict for
// as long as the node and these inputs stay the same.
func (s *cycleState) FilterInputs() any {
	return filterInputs{req: s.req, demand: s.demand, devices: s.devices}
}

// nodeDevices returns a node's devices as PreFilter saw them.
func (s *cycleState) nodeDevices(node string) []capacity.Device { return nodeDevices(s.devices, node) }

// Clone returns the same state: it is never written after PreFilter, and
// the plugin has no AddPod/RemovePod that would.
func (s *cycleState) Clone() fwk.StateData { return s }

func readState(cs fwk.CycleState) (*cycleState, error) {
	data, err := cs.Read(stateKey)
	if err != nil {
		return nil, fmt.Errorf("reading %q from cycle state: %w", stateKey, err)
	}
	s, ok := data.(*cycleState)
	if !ok {
		return nil, fmt.Errorf("%q in cycle state has type %T", stateKey, data)
	}
	return s, nil
}
