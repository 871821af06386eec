package preempt

import (
	"context"
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/preemption"
)

// Candidate victims: which running pods a preemptor may evict, and in which
// units they go. A gang goes whole, or loses members above its quorum only;
// a gang composite goes whole as one unit, unless its disruptionMode lets
// children above its minGroupCount go, each then a unit of its own
// (splitComposites).

// addUnits adds the candidate victims to req: every bound pod of lower
// priority than the preemptor that is not leaving already, grouped into
// gangs, and the disruption budgets that cover them.
func (pr *Preempter) addUnits(ctx context.Context, req *preemption.Request, p *Preemptor, nodeInfos []fwk.NodeInfo, leaving map[types.UID]bool, d Demand) *candidates {
	index := make(map[string]int, len(nodeInfos))
	for i, ni := range nodeInfos {
		index[ni.Node().Name] = i
	}
	byGang := map[gang.Key][]*v1.Pod{}
	var plain []*v1.Pod
	for _, ni := range nodeInfos {
		for _, pi := range ni.GetPods() {
			q := pr.boundPod(pi.GetPod())
			if q == nil || q.DeletionTimestamp != nil || leaving[q.UID] || pr.cfg.Gangs.OwnerOf(q) == p.ID {
				continue
			}
			if key, member := pr.cfg.Gangs.UnitOf(q); member {
				byGang[key] = append(byGang[key], q)
			} else if corev1helpers.PodPriority(q) < p.Priority {
				plain = append(plain, q)
			}
		}
	}
	byGang = pr.splitComposites(byGang)
	keys := make([]gang.Key, 0, len(byGang))
	for key := range byGang {
		keys = append(keys, key)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })

	dims := make([]v1.ResourceName, len(req.Resources))
	for d, name := range req.Resources {
		dims[d] = v1.ResourceName(name)
	}
	freed := d.VictimCounter(dims)
	podOf := func(q *v1.Pod, keep bool) preemption.Pod {
		node, ok := index[q.Spec.NodeName]
		var ni fwk.NodeInfo
		if ok {
			ni = nodeInfos[node]
		} else {
			node = -1
		}
		a := capacity.PodAmounts(q)
		out := preemption.Pod{Name: q.Namespace + "/" + q.Name, Node: node, GPUs: acceleratorCount(a), Keep: keep}
		var devices int64
		out.Request, devices = freed(ctx, q, a, ni)
		out.GPUs = max(out.GPUs, devices)
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
		if prio >= p.Priority {
			continue // a gang goes whole; one member of enough priority keeps it
		}
		spec, minMember, surplus := pr.victimTerms(key, pods)
		u := preemption.Unit{Name: key.String(), Kind: preemption.KindGang, Priority: prio, Started: gang.StartedAt(pods, minMember), Surplus: surplus}
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
	pr.addBudgets(req, cands)
	return cands
}

// victimTerms says how a victim unit of running pods may be disrupted:
// its spec (nil when its object is gone), the minMember that dates its
// start (gang.StartedAt), and how many members above it may go one by one.
//
// A gang whose PodGroup is gone is one unit, with no surplus. An existing
// spec is read as it is, valid or not: pkg/gang's quorum rules say what its
// minMember means here, as they do for the running gangs' Events and
// metrics. A composite goes whole (its children above quorum, if it lets
// them go, are units of their own already, splitComposites): no surplus,
// and it began to run when its last member did. A gang that may only be
// disrupted whole (a native PodGroup's disruptionMode all) offers no
// members above minMember.
func (pr *Preempter) victimTerms(key gang.Key, pods []*v1.Pod) (spec *gang.Spec, minMember int32, surplus int) {
	minMember = int32(len(pods))
	spec, ok := pr.cfg.Gangs.Lookup(key)
	if !ok || isComposite(key) {
		return spec, minMember, 0
	}
	minMember = spec.MinMember
	if spec.Disruption != gang.DisruptionAll {
		if members, err := pr.cfg.Gangs.Members(key); err == nil {
			surplus = min(int(gang.SurplusOf(minMember, pr.cfg.Gangs.Census(key, members))), len(pods)-1)
		}
	}
	return spec, minMember, surplus
}

// isComposite reports whether key names a gang composite: the kind of
// admission unit preemption splits (splitComposites) and takes whole
// (victimTerms).
func isComposite(key gang.Key) bool {
	return key.API == gang.Composite
}

// boundPod returns the informer's copy of a pod from the snapshot if the
// API shows it bound. A pod the snapshot has on a node that the API does
// not (assumed: waiting in Permit or binding) is not a candidate.
func (pr *Preempter) boundPod(q *v1.Pod) *v1.Pod {
	obj, ok, err := pr.cfg.Pods.GetByKey(q.Namespace + "/" + q.Name)
	if err != nil || !ok {
		return nil
	}
	live, isPod := obj.(*v1.Pod)
	if !isPod || live.UID != q.UID || live.Spec.NodeName == "" {
		return nil
	}
	return live
}

// splitComposites splits the running members of each gang composite
// (grouped by unit, byGang) into the units preemption may take: the
// composite whole when its disruptionMode is all or no child is above its
// minGroupCount (gang.ChildSurplusOf); otherwise its newest placed children
// above minGroupCount, each a unit of its own (its own Terms say whether it
// goes whole), and the rest of the composite as one. It writes byGang and
// returns it.
func (pr *Preempter) splitComposites(byGang map[gang.Key][]*v1.Pod) map[gang.Key][]*v1.Pod {
	keys := make([]gang.Key, 0, len(byGang))
	for key := range byGang {
		if isComposite(key) {
			keys = append(keys, key)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	for _, key := range keys {
		tree, q, ok := pr.cfg.Gangs.TreeQuorum(key)
		if !ok {
			continue // goes whole
		}
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
