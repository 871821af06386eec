package core

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Rails in preemption. A preemptor gang that requires rail alignment is
// described to the engine with one rail set for its aligned members: for
// each aligned dimension (its GPUs, its NICs) and each rail of the set, a
// dimension of its own that counts, per node, the dimension's free devices
// on that rail and, per victim, the devices it frees there, and of which
// each aligned member asks one. A member takes one device of each rail of
// its set, so fitting those dimensions is fitting the set's slots
// (capacity.RailCounts.Slots), and the engine's victims free the same
// rails on every node it frees: the gang's plan after them is aligned.
// Without them, the engine counts GPUs alone and may evict pods whose
// devices free no aligned set, for a gang that then waits.
//
// One set for the whole gang is stricter than alignment per scalable unit,
// which the plan after the victims may still use.

// railDemand is the rail set a preemptor is described with, and the
// dimensions it adds to the request after the request's own.
type railDemand struct {
	set   capacity.RailSet
	added []railDim
}

// railDim is one added dimension: rail of aligned dimension dim.
type railDim struct {
	dim  v1.ResourceName
	rail int
}

// name is the dimension's name in the request, which the engine's words
// quote; DescribeText names the device kind within it.
func (r railDim) name() string { return fmt.Sprintf("rail %d of %s", r.rail, r.dim) }

// isRailDim reports whether a request's dimension is a railDim's.
func isRailDim(name string) bool {
	var r int
	var dim string
	n, _ := fmt.Sscanf(name, "rail %d of %s", &r, &dim)
	return n == 2
}

// HeldForRails notes a plan a preemption holds for a gang it described
// with a rail set (req has rail dimensions): the engine chose the nodes
// and the victims, not the members' devices, which DynamicResources would
// then pick first fit. Once the victims are gone, the gang is planned
// again on what they freed (Realigns), and that plan writes its members'
// claims on aligned rails.
func (pl *Planner) HeldForRails(key gang.Key, req *placement.Request) {
	if slices.ContainsFunc(req.Resources, isRailDim) {
		pl.realign.Store(key, true)
	}
}

// Realigns reports whether key's held plan is to be planned again for its
// rails (HeldForRails); a plan of the gang's own ends that.
func (pl *Planner) Realigns(key gang.Key) bool {
	_, ok := pl.realign.Load(key)
	return ok
}

// describes reports whether dims end with the added rail dimensions.
func describes(dims []v1.ResourceName, added []railDim) bool {
	if len(dims) < len(added) {
		return false
	}
	tail := dims[len(dims)-len(added):]
	for k, a := range added {
		if string(tail[k]) != a.name() {
			return false
		}
	}
	return true
}

// alignRequest adds the rail dimensions of a preemptor that requires rail
// alignment to req (see above); nil when it does not, or when no node has
// the rails the gang needs.
func (pd *preemptDemand) alignRequest(ctx context.Context, req *placement.Request) (*railDemand, *fwk.Status) {
	if pd.spec == nil || pd.pl.devices == nil {
		return nil, nil
	}
	rp, status := pd.pl.railsOf(ctx, pd.spec, pd.d, req)
	if status != nil || rp == nil || rp.mode != scheduling.RailAlignmentRequired {
		return nil, status
	}
	set := pd.railSet(ctx, rp, req)
	if set == 0 {
		return nil, nil
	}
	rd := &railDemand{set: set}
	for _, dim := range rp.dims {
		for _, r := range set.Rails() {
			a := railDim{dim: dim, rail: r}
			rd.added = append(rd.added, a)
			req.Resources = append(req.Resources, a.name())
		}
	}
	for n := range req.Nodes {
		node := &req.Nodes[n]
		node.Allocatable = slices.Clip(node.Allocatable)
		node.Free = slices.Clip(node.Free)
		for _, a := range rd.added {
			var total, free int64
			if r, ok := pd.d.Devices.Rails(ctx, node.Name, a.dim); ok {
				total, free = int64(r.Total[a.rail]), int64(r.Free[a.rail])
			}
			node.Allocatable = append(node.Allocatable, total)
			node.Free = append(node.Free, free)
		}
	}
	for i := range req.Members {
		m := &req.Members[i]
		m.Request = slices.Clip(m.Request)
		for range rd.added {
			one := int64(0)
			if rp.gang.Aligned[i] {
				one = 1
			}
			m.Request = append(m.Request, one)
		}
	}
	return rd, nil
}

// railSet chooses the set a preemptor is described with: the set its
// running members use, if any; else, of each node's best set (the gang's
// number of rails with the most devices that are free or held by pods of
// lower priority than the preemptor, the lowest rails first), the one with
// the most slots over all nodes if those pods were gone, then the most
// slots free now, then the lowest rails. 0 when no node has such a set.
func (pd *preemptDemand) railSet(ctx context.Context, rp *railPass, req *placement.Request) capacity.RailSet {
	for _, s := range rp.gang.Pinned {
		if s != 0 {
			return s
		}
	}
	infos := make(map[string]fwk.NodeInfo, len(pd.nodes))
	for _, ni := range pd.nodes {
		infos[ni.Node().Name] = ni
	}
	prio := corev1helpers.PodPriority(pd.members[0])
	free := make([]capacity.RailCounts, len(req.Nodes))
	could := make([]capacity.RailCounts, len(req.Nodes))
	var candidates []capacity.RailSet
	for n := range req.Nodes {
		name := req.Nodes[n].Name
		var lower []*v1.Pod
		if ni := infos[name]; ni != nil {
			for _, pi := range ni.GetPods() {
				if q := pi.GetPod(); corev1helpers.PodPriority(q) < prio {
					lower = append(lower, q)
				}
			}
		}
		var held capacity.Bits
		if len(lower) > 0 {
			held = pd.pl.devices.AllocatedPositions(pd.d.Devices, name, lower)
		}
		free[n], could[n] = pd.railReading(ctx, rp, name, held)
		if s := bestSet(could[n], rp.gang.Size); s != 0 && !slices.Contains(candidates, s) {
			candidates = append(candidates, s)
		}
	}
	type score struct {
		set         capacity.RailSet
		could, free int
	}
	var best score
	for _, s := range candidates {
		sc := score{set: s}
		for n := range req.Nodes {
			sc.could += could[n].Slots(s)
			sc.free += free[n].Slots(s)
		}
		if best.set == 0 || cmp.Or(cmp.Compare(sc.could, best.could), cmp.Compare(sc.free, best.free), cmp.Compare(best.set, sc.set)) > 0 {
			best = sc
		}
	}
	return best.set
}

// railReading counts, per rail of node, the aligned members' devices free
// in every aligned dimension, and those free or at positions held.
func (pd *preemptDemand) railReading(ctx context.Context, rp *railPass, node string, held capacity.Bits) (free, could capacity.RailCounts) {
	for k, dim := range rp.dims {
		r, ok := pd.d.Devices.Rails(ctx, node, dim)
		if !ok {
			return capacity.RailCounts{}, capacity.RailCounts{}
		}
		var h capacity.RailCounts
		if held != nil {
			h, _ = pd.d.Devices.RailsAt(ctx, node, dim, held)
		}
		for x := range free {
			f, c := r.Free[x], uint8(min(255, int(r.Free[x])+int(h[x])))
			if k == 0 || f < free[x] {
				free[x] = f
			}
			if k == 0 || c < could[x] {
				could[x] = c
			}
		}
	}
	return free, could
}

// bestSet is the set of size rails with the most counted in c, the lowest
// rails first among equals; 0 when fewer than size rails have any.
func bestSet(c capacity.RailCounts, size int) capacity.RailSet {
	rails := make([]int, 0, len(c))
	for r, n := range c {
		if n > 0 {
			rails = append(rails, r)
		}
	}
	if len(rails) < size || size <= 0 {
		return 0
	}
	slices.SortStableFunc(rails, func(a, b int) int { return cmp.Compare(c[b], c[a]) })
	var s capacity.RailSet
	for _, r := range rails[:size] {
		s |= 1 << r
	}
	return s
}
