package coscheduling

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/contract"
)

const scoreKey fwk.StateKey = "PreScore" + Name

// packingState is PreScore's score for each node that passed Filter, for
// Score to read.
type packingState struct {
	scores map[string]int64
}

// Clone returns the same state: nothing writes it after PreScore.
func (s *packingState) Clone() fwk.StateData { return s }

// PreScore scores a plain pod that takes accelerators by packing
// (core.Packing): the planner's best fit for that pod alone, so that plain
// pods fill the nodes and domains already in use and leave whole domains to
// gangs. A gang's members follow their plan, which packs the same way, and
// pods without accelerators are the stock scheduler's to spread: the plugin
// skips both.
func (pl *Plugin) PreScore(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	if contract.Simulated(ctx) {
		return fwk.NewStatus(fwk.Skip)
	}
	if _, isMember := pl.unitOf(pod); isMember {
		return fwk.NewStatus(fwk.Skip)
	}
	s, err := readState(cs)
	if err != nil {
		return fwk.NewStatus(fwk.Skip)
	}
	packing, err := pl.core.Packing(ctx, pod, s.held)
	if err != nil {
		// The pod still schedules, by the other plugins' scores.
		klog.FromContext(ctx).Error(err, "Packing order unavailable", "pod", klog.KObj(pod))
		return fwk.NewStatus(fwk.Skip)
	}
	if packing == nil {
		return fwk.NewStatus(fwk.Skip)
	}
	scores := packing.Scores(nodes)
	st := &packingState{scores: make(map[string]int64, len(nodes))}
	for i, ni := range nodes {
		st.scores[ni.Node().Name] = scores[i]
	}
	cs.Write(scoreKey, st)
	return nil
}

// Score returns the node's packing score from PreScore.
func (pl *Plugin) Score(_ context.Context, cs fwk.CycleState, _ *v1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	st, err := contract.ReadState[*packingState](cs, scoreKey)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	return st.scores[ni.Node().Name], nil
}

// ScoreExtensions returns nil: PreScore's scores are in range already.
func (pl *Plugin) ScoreExtensions() fwk.ScoreExtensions { return nil }
