package core

import (
	"slices"
	"strings"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/preempt"
)

// WithNominated adds to held what plain pods nominated to each node ask for,
// when their priority is at least priority (see preempt.NominatedRoom): the
// plan then keeps out of a preemptor's freed room, as kube-scheduler's
// Filter does. It asks only about the live nodes (nodeInfos, in name order)
// that may have a nominated pod (every node until the set is known), and
// copies held rather than write it.
func (pl *Planner) WithNominated(held map[string]capacity.Amounts, nodeInfos []fwk.NodeInfo, priority int32) map[string]capacity.Amounts {
	names, known := pl.nominations.Nodes()
	if !known {
		names = make([]string, len(nodeInfos))
		for i, ni := range nodeInfos {
			names[i] = ni.Node().Name
		}
	}
	var out map[string]capacity.Amounts
	for _, name := range names {
		if _, live := slices.BinarySearchFunc(nodeInfos, name, func(ni fwk.NodeInfo, name string) int {
			return strings.Compare(ni.Node().Name, name)
		}); !live {
			continue
		}
		a := preempt.NominatedRoom(pl.framework, name, priority, "")
		if a == nil {
			continue
		}
		if out == nil {
			out = make(map[string]capacity.Amounts, len(held)+1)
			for n, h := range held {
				out[n] = h
			}
		}
		sum := capacity.Amounts{}
		sum.Add(out[name])
		sum.Add(a)
		out[name] = sum
	}
	if out == nil {
		return held
	}
	return out
}
