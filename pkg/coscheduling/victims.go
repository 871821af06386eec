package coscheduling

import (
	"context"
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/preemption"
)

// Candidate victims: which running pods a preemptor may evict, and in which
// units they go. A gang goes whole, or loses members above its quorum only;
// a gang composite goes whole as one unit, unless its disruptionMode lets
// children above its minGroupCount go, each then a unit of its own
// (victimUnits).

// addUnits adds the candidate victims to req: every bound pod of lower
// priority than the preemptor that is not leaving already, grouped into
// gangs, and the disruption budgets that cover them.
func (pl *Plugin) addUnits(ctx context.Context, req *preemption.Request, p *preemptor, nodeInfos []fwk.NodeInfo, leaving map[types.UID]bool, d *dra.PassDemand) *candidates {
	index := make(map[string]int, len(nodeInfos))
	for i, ni := range nodeInfos {
		index[ni.Node().Name] = i
	}
	byGang := map[gang.Key][]*v1.Pod{}
	var plain []*v1.Pod
	for _, ni := range nodeInfos {
		for _, pi := range ni.GetPods() {
			q := pl.boundPod(pi.GetPod())
			if q == nil || q.DeletionTimestamp != nil || leaving[q.UID] || pl.ownerOf(q) == p.id {
				continue
			}
			if key, member := pl.unitOf(q); member {
				byGang[key] = append(byGang[key], q)
			} else if corev1helpers.PodPriority(q) < p.priority {
				plain = append(plain, q)
			}
		}
	}
	byGang = pl.victimUnits(byGang)
	keys := make([]gang.Key, 0, len(byGang))
	for key := range byGang {
		keys = append(keys, key)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })

	dims := make([]v1.ResourceName, len(req.Resources))
	for d, name := range req.Resources {
		dims[d] = v1.ResourceName(name)
	}
	cols := d.Columns(dims)
	podOf := func(q *v1.Pod, keep bool) preemption.Pod {
		node, ok := index[q.Spec.NodeName]
		if !ok {
			node = -1
		}
		a := capacity.PodAmounts(q)
		out := preemption.Pod{Name: q.Namespace + "/" + q.Name, Node: node, Request: toVector(dims, a), GPUs: acceleratorCount(a), Keep: keep}
		if d.Devices != nil && node >= 0 {
			// What the victim frees in a dimension devices serve is the
			// devices its claims hold there, counted as the preemptor's
			// kinds count them.
			ni := nodeInfos[node]
			taken := pl.devices.AllocatedPositions(d.Devices, q.Spec.NodeName, []*v1.Pod{q})
			for c := range cols {
				if cols[c].MayUseDevices && cols[c].Devices.ServedByDevices(ctx, dra.NodeCapacity{Info: ni}) {
					out.Request[c] = cols[c].Devices.Counted(ctx, dra.NodeCapacity{Info: ni}, taken)
				}
			}
			if n := int64(taken.Count()); n > out.GPUs {
				out.GPUs = n
			}
		}
		return out
	}
	cands := &candidates{}
	gangNames := map[string]bool{}
	for _, key := range keys {
		pods := byGang[key]
		gang.SortByRank(pods)
		prio := int32(0)
		for i, q := range pods {
			if pq := corev1helpers.PodPriority(q); i == 0 || pq > prio {
				prio = pq
			}
		}
		if prio >= p.priority {
			continue // a gang goes whole; one member of enough priority keeps it
		}
		// A gang whose PodGroup is gone is one unit, with no surplus. An
		// existing spec is read as it is, valid or not: pkg/gang's quorum
		// rules say what its minMember means here, as they do for the
		// running gangs' Events and metrics.
		// A composite goes whole (its children above quorum, if it lets
		// them go, are units of their own already): no surplus, and it
		// began to run when its last member did.
		minMember := int32(len(pods))
		spec, ok := pl.lookup(key)
		if ok && key.API != gang.Composite {
			minMember = spec.MinMember
		}
		u := preemption.Unit{Name: key.String(), Kind: preemption.KindGang, Priority: prio, Started: gang.StartedAt(pods, minMember)}
		// A gang that may only be disrupted whole (a native PodGroup's
		// disruptionMode all) offers no members above minMember.
		if ok && key.API != gang.Composite && spec.Disruption != gang.DisruptionAll {
			if members, err := pl.members(key); err == nil {
				u.Surplus = min(int(gang.SurplusOf(minMember, pl.census(key, members))), len(pods)-1)
			}
		}
		keep := gang.Essential(pods)
		for i, q := range pods {
			u.Pods = append(u.Pods, podOf(q, keep[i]))
		}
		gangNames[u.Name] = true
		req.Units = append(req.Units, u)
		cands.pods = append(cands.pods, pods)
		cands.specs = append(cands.specs, spec)
	}
	for _, q := range plain {
		name := q.Namespace + "/" + q.Name
		if gangNames[name] {
			name = "pod " + name // unit names must be unique; a PodGroup may share a pod's name
		}
		u := preemption.Unit{Name: name, Kind: preemption.KindPod, Priority: corev1helpers.PodPriority(q), Pods: []preemption.Pod{podOf(q, false)}}
		if q.Status.StartTime != nil {
			u.Started = q.Status.StartTime.Time
		}
		req.Units = append(req.Units, u)
		cands.pods = append(cands.pods, []*v1.Pod{q})
		cands.specs = append(cands.specs, nil)
	}
	pl.addBudgets(req, cands)
	return cands
}

// boundPod returns the informer's copy of a pod from the snapshot if the
// API shows it bound. A pod the snapshot has on a node that the API does
// not (assumed: waiting in Permit or binding) is not a candidate.
func (pl *Plugin) boundPod(q *v1.Pod) *v1.Pod {
	obj, ok, err := pl.podIndex.GetByKey(q.Namespace + "/" + q.Name)
	if err != nil || !ok {
		return nil
	}
	live, isPod := obj.(*v1.Pod)
	if !isPod || live.UID != q.UID || live.Spec.NodeName == "" {
		return nil
	}
	return live
}

// victimUnits splits the running members of each gang composite (grouped
// by unit, byGang) into the units preemption may take: the composite whole
// when its disruptionMode is all or no child is above its minGroupCount
// (gang.ChildSurplusOf); otherwise its newest placed children above
// minGroupCount, each a unit of its own (its own Terms say whether it goes
// whole), and the rest of the composite as one. It writes byGang and
// returns it.
func (pl *Plugin) victimUnits(byGang map[gang.Key][]*v1.Pod) map[gang.Key][]*v1.Pod {
	keys := make([]gang.Key, 0, len(byGang))
	for key := range byGang {
		if key.API == gang.Composite {
			keys = append(keys, key)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	for _, key := range keys {
		tree, err := pl.sources.Tree(key)
		if err != nil {
			continue // goes whole
		}
		members, err := pl.members(key)
		if err != nil {
			continue
		}
		q := pl.treeQuorum(key, tree, members)
		surplus := gang.ChildSurplusOf(tree.Root().Composite, q[0])
		children := tree.Root().Children
		for i := len(children) - 1; i >= 0 && surplus > 0; i-- {
			c := children[i]
			if !q[c].Placed {
				continue
			}
			surplus--
			leaves := subtreeLeaves(tree, c)
			var rest, split []*v1.Pod
			for _, p := range byGang[key] {
				if k, _ := gang.Of(p); slices.Contains(leaves, k) {
					split = append(split, p)
				} else {
					rest = append(rest, p)
				}
			}
			if len(split) == 0 {
				continue
			}
			byGang[tree.Nodes[c].Key] = split
			if byGang[key] = rest; len(rest) == 0 {
				delete(byGang, key)
			}
		}
	}
	return byGang
}

// subtreeLeaves returns the keys of the PodGroups in the subtree of node i.
func subtreeLeaves(t *gang.Tree, i int) []gang.Key {
	if t.Nodes[i].Spec != nil {
		return []gang.Key{t.Nodes[i].Key}
	}
	var out []gang.Key
	for _, c := range t.Nodes[i].Children {
		out = append(out, subtreeLeaves(t, c)...)
	}
	return out
}
