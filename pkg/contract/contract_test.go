package contract

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

func TestSimulation(t *testing.T) {
	ctx := t.Context()
	require.False(t, Simulated(ctx), "a scheduling cycle")
	require.True(t, Simulated(WithSimulation(ctx)))
	type other struct{}
	require.True(t, Simulated(context.WithValue(WithSimulation(ctx), other{}, 1)), "a derived context stays simulated")
}

// fakeState stands for a plugin's own PreFilter state.
type fakeState struct{ inputs string }

func (s *fakeState) Clone() fwk.StateData { return s }
func (s *fakeState) FilterInputs() any    { return s.inputs }
func (s *fakeState) NodeGroups(_ []placement.Node, _ uint64) *placement.Groups {
	return &placement.Groups{}
}

func TestFilterInputs(t *testing.T) {
	cs := framework.NewCycleState()
	_, err := ReadFilterInputs(cs, GPUFleetStateKey)
	require.ErrorIs(t, err, fwk.ErrNotFound, "nothing written")

	WriteGPUFleetState(cs, &fakeState{inputs: "a"})
	in, err := ReadFilterInputs(cs, GPUFleetStateKey)
	require.NoError(t, err)
	require.Equal(t, "a", in)
	in, err = ReadFilterInputs(cs.Clone(), GPUFleetStateKey)
	require.NoError(t, err)
	require.Equal(t, "a", in, "a clone keeps it")

	cs.Write("other", &demandPod{})
	_, err = ReadFilterInputs(cs, "other")
	require.Error(t, err, "a state that does not say its inputs")
}

func TestNodeGroups(t *testing.T) {
	cs := framework.NewCycleState()
	_, err := ReadNodeGroups(cs)
	require.ErrorIs(t, err, fwk.ErrNotFound, "no plugin groups nodes")

	s := &fakeState{}
	WriteNodeGroups(cs, s)
	g, err := ReadNodeGroups(cs.Clone())
	require.NoError(t, err)
	require.Same(t, s, g)
}

func TestNodeOnlyFilter(t *testing.T) {
	inputs, ok := NodeOnlyFilter("NodeAffinity")
	require.True(t, ok)
	require.Empty(t, inputs)
	inputs, ok = NodeOnlyFilter("GPUFleet")
	require.True(t, ok)
	require.Equal(t, GPUFleetStateKey, inputs)
	_, ok = NodeOnlyFilter("InterPodAffinity")
	require.False(t, ok)
	require.IsIncreasing(t, NodeOnlyFilters())
}
