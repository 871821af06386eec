package coscheduling

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

const stateKey fwk.StateKey = "PreFilter" + Name

// cycleState is what PreFilter works out once for Filter to read on every
// node.
type cycleState struct {
	// request is what the pod takes from a node, one pod slot included.
	request capacity.Amounts
	// held is, per node, the capacity that other gangs' plans hold. Filter
	// keeps the pod out of it.
	held map[string]capacity.Amounts
	// devices is set when the pod takes devices and some capacity is held:
	// Filter then also keeps it out of held devices. Nil otherwise.
	devices *dra.PodFit
	// planNodes are the nodes PreFilter restricted a gang member to, from
	// its plan, in name order; empty for pods that follow no plan. A
	// failure to place the member there teaches the planner or means the
	// plan went stale.
	planNodes []string
	// unplaced are the members PreFilter planned and could not place (the
	// gang's next members in rank order, or a running gang's replacement),
	// and spec their gang; unplacedStatus says why. PostFilter preempts for
	// exactly these members when evicting pods could help.
	unplaced       []*v1.Pod
	spec           *gang.Spec
	unplacedStatus *fwk.Status
}

// Clone returns the same state: nothing writes it after PreFilter, and the
// plugin implements no AddPod/RemovePod that would.
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
