package preempt

import (
	"context"
	"maps"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/preemption"
)

// Candidate victims: which running pods a preemptor may evict, and in which
// units they go. Each admission unit decides that for its own running
// members (gang.Unit.VictimUnits, gang.Unit.Disruption): a gang goes whole,
// or loses members above its quorum only; a gang composite goes whole, or
// lets its children above its minGroupCount go, each a unit of its own.

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
	units := pr.victimUnits(byGang)
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
	for _, vu := range units {
		pods := vu.pods
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
		spec, minMember, surplus := vu.terms()
		u := preemption.Unit{Name: vu.key.String(), Kind: preemption.KindGang, Priority: prio, Started: gang.StartedAt(pods, minMember), Surplus: surplus,
			Movable: pr.movable(spec)}
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

// movable reads whether a victim gang may be moved (gang.MovableOf): a gang
// whose object is gone is not. A malformed annotation counts as not
// movable, and a Warning Event on the gang's object names it and the fix.
func (pr *Preempter) movable(spec *gang.Spec) bool {
	if spec == nil {
		return false
	}
	m, err := gang.MovableOf(spec)
	if err != nil {
		pr.cfg.Reporter.GangEvent(spec, nil, v1.EventTypeWarning, scheduling.ReasonInvalidPodGroup,
			"gang %s: %v; preemption counts the gang as not movable until it is set to \"true\" or \"false\"", spec.Key, err)
	}
	return m
}

// victimUnit is one unit of running gang members that preemption may take
// (gang.Unit.VictimUnits), as the admission unit it belongs to reads it.
type victimUnit struct {
	key  gang.Key
	pods []*v1.Pod
	// unit and view are the unit key names, read for this preemption; unit
	// is nil when it cannot be read (its object is gone).
	unit gang.Unit
	view gang.View
}

// terms says how the victim unit may be disrupted: its spec (nil when its
// object is gone), the minMember that dates its start (gang.StartedAt), and
// how many members above it may go one by one (gang.Unit.Disruption). A
// unit that cannot be read goes whole, with no surplus.
func (vu victimUnit) terms() (spec *gang.Spec, minMember int32, surplus int) {
	if vu.unit == nil {
		return nil, int32(len(vu.pods)), 0
	}
	minMember, surplus = vu.unit.Disruption(vu.view, vu.pods)
	return vu.unit.Spec(), minMember, surplus
}

// victimUnits splits the running members of each admission unit (byUnit)
// into the units preemption may take them as, each admission unit deciding
// for its own (gang.Unit.VictimUnits), and returns them in key order. An
// admission unit that cannot be read goes whole. A unit split off a
// composite (a child above its minGroupCount) is read under its own key,
// which says how it may be disrupted.
func (pr *Preempter) victimUnits(byUnit map[gang.Key][]*v1.Pod) []victimUnit {
	type read struct {
		unit gang.Unit
		view gang.View
	}
	reads := make(map[gang.Key]read, len(byUnit))
	split := make(map[gang.Key][]*v1.Pod, len(byUnit))
	for _, key := range sortedKeys(byUnit) {
		u, view, err := pr.cfg.Gangs.Unit(key)
		if err != nil {
			split[key] = byUnit[key]
			continue
		}
		reads[key] = read{unit: u, view: view}
		maps.Copy(split, u.VictimUnits(view, byUnit[key]))
	}
	out := make([]victimUnit, 0, len(split))
	for _, key := range sortedKeys(split) {
		vu := victimUnit{key: key, pods: split[key]}
		r, ok := reads[key]
		if !ok {
			if u, view, err := pr.cfg.Gangs.Unit(key); err == nil {
				r = read{unit: u, view: view}
			}
		}
		vu.unit, vu.view = r.unit, r.view
		out = append(out, vu)
	}
	return out
}

// sortedKeys returns the keys of m in the order of their names, so that
// no decision depends on a map's order.
func sortedKeys(m map[gang.Key][]*v1.Pod) []gang.Key {
	keys := make([]gang.Key, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
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
