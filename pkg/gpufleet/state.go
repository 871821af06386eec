package gpufleet

import (
	"fmt"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/fleet"
)

const stateKey fwk.StateKey = "PreFilter" + Name

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
