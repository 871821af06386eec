package core

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/topology"
)

// nodeFitter is the planner that orders nodes by its own best fit
// (topology.Planner.NodeFit).
type nodeFitter interface {
	NodeFit(req *placement.Request) (*topology.NodeFit, error)
}

// Packing orders nodes for a pod that does not wait for a plan of its gang:
// a plain pod that takes accelerators. It is the planner's best fit for a
// gang of that pod alone, on the same live nodes, free capacity (less what
// gangs hold, held) and topology tree a gang's plan reads, so plain pods
// fill the nodes and domains already broken into and leave whole domains to
// the gangs that need them.
type Packing struct {
	names []string
	fit   *topology.NodeFit
}

// Packing reads the order for pod. It returns nil, with no error, when
// there is nothing to pack: a pod that takes no accelerators, or a planner
// without a topology.
func (pl *Planner) Packing(ctx context.Context, pod *v1.Pod, held map[string]capacity.Amounts) (*Packing, error) {
	fitter, ok := pl.placement.(nodeFitter)
	if !ok {
		return nil, nil
	}
	d, status := pl.DemandOf(ctx, nil, []*v1.Pod{pod}, 0)
	if status != nil {
		// DynamicResources reports a pod's unreadable claims; its order is
		// the stock scheduler's.
		return nil, nil
	}
	if !d.Accelerated(0) {
		return nil, nil
	}
	nodeInfos, err := pl.framework.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, fmt.Errorf("listing nodes from the snapshot: %w", err)
	}
	sorted := pl.snapshot.Live(nodeInfos, pl.nodeGeneration.Load(), pl.LiveNodes)
	dims := Dimensions(d.Requests)
	nodes, _, epoch, release := pl.snapshot.Nodes(ctx, sorted, dims, d.Columns(dims), held, true)
	defer release()
	req := &placement.Request{
		Gang:           pod.Namespace + "/" + pod.Name,
		Resources:      dimNames(dims),
		Nodes:          nodes,
		NodeGeneration: pl.nodeGeneration.Load(),
		LabelsEpoch:    epoch,
		StableFree:     true,
		Members: []placement.Member{{
			Name:        pod.Namespace + "/" + pod.Name,
			Request:     toVector(dims, d.Requests[0]),
			Accelerated: true,
		}},
	}
	fit, err := fitter.NodeFit(req)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(nodes))
	for i := range nodes {
		names[i] = nodes[i].Name
	}
	return &Packing{names: names, fit: fit}, nil
}

// Scores scores the nodes a pod passed Filter on, fwk.MaxNodeScore for the
// one packing puts first, at most half that for the others, falling with
// their place in the order; nodes where the pod has no room by the
// planner's count (it disagrees with Filter) and nodes it does not know
// score 0. The gap above the rest lets the first node win over the stock
// spreading scores unless other plugins' preferences weigh far more.
func (p *Packing) Scores(nodes []fwk.NodeInfo) []int64 {
	// ranked are positions in nodes, at[k] node k's index in the order's
	// nodes; only nodes with room are ranked.
	at := make([]int, len(nodes))
	ranked := make([]int, 0, len(nodes))
	for k, ni := range nodes {
		i, found := slices.BinarySearch(p.names, ni.Node().Name)
		if found && p.fit.Room(i) > 0 {
			at[k] = i
			ranked = append(ranked, k)
		}
	}
	slices.SortFunc(ranked, func(a, b int) int { return p.fit.Compare(at[a], at[b]) })
	scores := make([]int64, len(nodes))
	n := int64(len(ranked))
	for r, k := range ranked {
		switch {
		case r == 0:
			scores[k] = fwk.MaxNodeScore
		case n > 1:
			scores[k] = fwk.MaxNodeScore / 2 * (n - 1 - int64(r)) / (n - 1)
		}
	}
	return scores
}
