package contract

import (
	"fmt"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
)

// GPUFleetStateKey is where GPUFleet's PreFilter leaves, in a pod's
// CycleState, what its Filter reads besides the node.
//
// Writer: GPUFleet's PreFilter, with a state of its own type that
// implements FilterInputs. Readers: GPUFleet's Filter, and the gang
// plugin's verdict cache through ReadFilterInputs, which joins the inputs
// into the key under which it keeps GPUFleet's verdicts. Clone shares the
// state: nothing writes it after PreFilter, and GPUFleet has no
// AddPod/RemovePod that would.
const GPUFleetStateKey fwk.StateKey = "PreFilter" + config.GPUFleetPluginName

// FilterInputs is implemented by the state a Filter plugin's PreFilter
// leaves when the plugin's verdict on a node depends on what PreFilter read
// as well as on the pod and the node.
type FilterInputs interface {
	// FilterInputs returns a comparable value that stands for everything
	// the plugin's Filter reads besides the pod and the node: a caller may
	// keep a node's verdict for as long as the node and this value stay
	// the same.
	FilterInputs() any
}

// GPUFleetState is what GPUFleet's PreFilter leaves under
// GPUFleetStateKey: its own state, which other plugins see only as
// FilterInputs. Its Clone may share it, as nothing writes it after
// PreFilter.
type GPUFleetState interface {
	fwk.StateData
	FilterInputs
}

// WriteGPUFleetState leaves s in cs under GPUFleetStateKey.
func WriteGPUFleetState(cs fwk.CycleState, s GPUFleetState) {
	cs.Write(GPUFleetStateKey, s)
}

// ReadFilterInputs returns the inputs (FilterInputs) of the state under key
// in cs; an error when there is none, or when it does not say its inputs.
func ReadFilterInputs(cs fwk.CycleState, key fwk.StateKey) (any, error) {
	data, err := cs.Read(key)
	if err != nil {
		return nil, fmt.Errorf("reading %q from cycle state: %w", key, err)
	}
	in, ok := data.(FilterInputs)
	if !ok {
		return nil, fmt.Errorf("%q in cycle state has type %T, which does not say its Filter inputs", key, data)
	}
	return in.FilterInputs(), nil
}
