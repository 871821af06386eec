package coscheduling

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/topology"
)

// planGang is the capacity pre-check. It plans members (the gang's next
// members in rank order, or a running gang's replacement) node by node: in
// the snapshot's free capacity less what other gangs hold, on nodes every
// Filter plugin of the profile accepts, next to the gang's members that
// already hold a node. It holds the plan until the attempt's deadline.
//
// A gang that does not fit holds nothing, except that the first such gang
// in queue order may hold the free part of its plan for a bounded time (see
// hold.go). The status says why: Unschedulable if room can free up,
// UnschedulableAndUnresolvable (with an Event) if the gang could never fit.
func (pl *Plugin) planGang(ctx context.Context, spec *gang.Spec, members []*v1.Pod, held map[string]amounts) *fwk.Status {
	logger := klog.FromContext(ctx)
	key := spec.Key
	nodeInfos, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("listing nodes from the snapshot: %w", err))
	}
	sorted := pl.liveNodes(nodeInfos)
	held = pl.withNominated(held, sorted, corev1helpers.PodPriority(members[0]))
	placed := pl.placedMembers(key)
	if status := pl.checkMinResources(spec, sorted, held, placed); status != nil {
		return status
	}

	reqs := requestsOf(members)
	templates, of := templatesOf(members, reqs)
	pl.eligibility(ctx, templates, sorted, pl.gangs.lessonsFor(key))
	if status := pl.explainIneligible(spec, templates, len(sorted)); status != nil {
		return status
	}
	req := pl.buildRequest(key, members, reqs, sorted, held, templates, of)
	req.Policy = gang.PolicyOf(spec, members[0])
	req.Anchors = anchors(sorted, placed)
	plan, fp, err := pl.feasiblePlan(ctx, key, members, req, sorted, templates, of)
	if err != nil {
		var fitErr *placement.FitError
		var unfit *unfitError
		switch {
		case errors.Is(err, topology.ErrUnknownLevel):
			pl.events.gang(spec, nil, v1.EventTypeWarning, ReasonInvalidPodGroup,
				"topology level %q is not one the scheduler is configured with: %v; name a configured level's label key or %s", req.Policy.Level, err, scheduling.HostnameKey)
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gang %s: %v", key, err))
		case errors.As(err, &unfit):
			pl.events.gang(spec, nil, v1.EventTypeWarning, ReasonFilterRejectsPlan,
				"no plan for %d member(s) passes the scheduler's filters: %v; it is tried again when the cluster changes", len(members), unfit)
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s: %v", key, unfit))
		case errors.As(err, &fitErr):
			return pl.explainNoFit(ctx, spec, members, req, reqs, fitErr, len(held) > 0)
		}
		return fwk.AsStatus(fmt.Errorf("planning gang %s: %w", key, err))
	}
	slots := make([]slot, len(members))
	for i, p := range members {
		slots[i] = slot{uid: p.UID, node: req.Nodes[plan.NodeOf[i]].Name, req: reqs[i]}
	}
	if wasHead := pl.gangs.setClaim(key, slots, pl.clock.Now().Add(pl.timeout(spec)), plan, fp); wasHead {
		holdsEnded.WithLabelValues(holdFilled).Inc()
	}
	logger.V(4).Info("Planned gang", "podGroup", key, "members", len(members), "plan", plan.Summary)
	// Members turned away before (for capacity, or while a sibling was
	// gated) wait in the unschedulable queue, and a new plan is no cluster
	// event: bring them back now that they have a place.
	pl.activate(key)
	return nil
}

// withNominated adds to held what plain pods nominated to each node ask for,
// when their priority is at least priority (see nominatedOn): the plan then
// keeps out of a preemptor's freed room, as kube-scheduler's Filter does. It
// copies held rather than write it.
func (pl *Plugin) withNominated(held map[string]amounts, nodeInfos []fwk.NodeInfo, priority int32) map[string]amounts {
	var out map[string]amounts
	for _, ni := range nodeInfos {
		name := ni.Node().Name
		a := pl.nominatedOn(name, priority, "")
		if a == nil {
			continue
		}
		if out == nil {
			out = make(map[string]amounts, len(held)+1)
			for n, h := range held {
				out[n] = h
			}
		}
		sum := amounts{}
		sum.add(out[name])
		sum.add(a)
		out[name] = sum
	}
	if out == nil {
		return held
	}
	return out
}

// liveNodes returns the snapshot's nodes in name order, less those the node
// informer no longer has: a cycle's snapshot can lag behind a node's
// deletion, and the API server binds pods to nodes that do not exist.
func (pl *Plugin) liveNodes(nodeInfos []fwk.NodeInfo) []fwk.NodeInfo {
	type named struct {
		name string
		ni   fwk.NodeInfo
	}
	live := make([]named, 0, len(nodeInfos))
	for _, ni := range nodeInfos {
		if name := ni.Node().Name; pl.nodeExists(name) {
			live = append(live, named{name, ni})
		}
	}
	slices.SortFunc(live, func(a, b named) int { return strings.Compare(a.name, b.name) })
	out := make([]fwk.NodeInfo, len(live))
	for i, n := range live {
		out[i] = n.ni
	}
	return out
}

// nodeExists reports whether the node informer has the node.
func (pl *Plugin) nodeExists(name string) bool {
	_, err := pl.nodeLister.Get(name)
	return err == nil
}

// feasiblePlan plans until Filter accepts the plan: a plan whose members
// exclude each other where it puts them teaches a lesson (see
// feasibility.go) and the planner plans again. It returns the plan and its
// fingerprint. A plan that failed before is never returned again.
func (pl *Plugin) feasiblePlan(ctx context.Context, key gang.Key, members []*v1.Pod, req *placement.Request, nodeInfos []fwk.NodeInfo,
	templates []*template, of []int) (*placement.Plan, uint64, error) {
	verify := false
	for _, t := range templates {
		verify = verify || (t.relational && pl.runner != nil)
	}
	var last *failure
	for range maxReplans + 1 {
		plan, err := pl.planner.Plan(ctx, req)
		if err != nil {
			return nil, 0, err
		}
		fp := fingerprint(members, plan, req)
		if pl.gangs.lessonsFor(key).failed[fp] {
			return nil, 0, pl.unfit(members, req, last, "the only plan the planner finds failed before")
		}
		if !verify {
			return plan, fp, nil
		}
		failures := pl.verify(ctx, members, plan, nodeInfos, templates, of)
		if len(failures) == 0 {
			return plan, fp, nil
		}
		pl.gangs.learnFailedPlan(key, fp)
		last = &failures[0]
		if !pl.learn(ctx, key, members, nodeInfos, templates, of, failures) {
			return nil, 0, pl.unfit(members, req, last, "")
		}
		pl.applyLessons(key, req, nodeInfos, templates, of)
	}
	return nil, 0, pl.unfit(members, req, last, "")
}

// applyLessons narrows the request by what the gang's lessons say now.
func (pl *Plugin) applyLessons(key gang.Key, req *placement.Request, nodeInfos []fwk.NodeInfo, templates []*template, of []int) {
	lv := pl.gangs.lessonsFor(key)
	for _, t := range templates {
		if n, ok := lv.perNode[t.sig]; ok && (t.perNode == 0 || n < t.perNode) {
			t.perNode = n
		}
		if ex := lv.excluded[t.sig]; ex.Len() > 0 {
			for i, ni := range nodeInfos {
				if ex.Has(ni.Node().Name) {
					t.eligible[i] = false
				}
			}
		}
	}
	for i := range req.Members {
		req.Members[i].MaxPerNode = templates[of[i]].perNode
	}
}

func (pl *Plugin) unfit(members []*v1.Pod, req *placement.Request, last *failure, why string) error {
	if last == nil {
		return &unfitError{status: fwk.NewStatus(fwk.Unschedulable, why)}
	}
	m := members[last.member]
	return &unfitError{member: types.NamespacedName{Namespace: m.Namespace, Name: m.Name}, node: req.Nodes[last.node].Name, status: last.status}
}

// placedMembers returns the gang's members that hold a node: bound ones,
// and reserved ones with the node they reserved.
func (pl *Plugin) placedMembers(key gang.Key) []*v1.Pod {
	members, err := pl.members(key)
	if err != nil {
		return nil
	}
	reserved := pl.gangs.reservations(key)
	var out []*v1.Pod
	for _, p := range members {
		if p.Spec.NodeName != "" {
			out = append(out, p)
			continue
		}
		if r, ok := reserved[p.UID]; ok {
			q := p.DeepCopy()
			q.Spec.NodeName = r.node
			out = append(out, q)
		}
	}
	return out
}

// anchors are the positions, in nodeInfos, of the placed members that
// topology binds.
func anchors(nodeInfos []fwk.NodeInfo, placed []*v1.Pod) []int {
	if len(placed) == 0 {
		return nil
	}
	index := make(map[string]int, len(nodeInfos))
	for i, ni := range nodeInfos {
		index[ni.Node().Name] = i
	}
	var out []int
	for _, p := range placed {
		if i, ok := index[p.Spec.NodeName]; ok && podAmounts(p).usesAccelerators() {
			out = append(out, i)
		}
	}
	sort.Ints(out)
	return out
}

// requestsOf is what each member takes from a node (podAmounts).
func requestsOf(members []*v1.Pod) []amounts {
	reqs := make([]amounts, len(members))
	for i, p := range members {
		reqs[i] = podAmounts(p)
	}
	return reqs
}

// buildRequest describes the members and the nodes to a planner. Nodes come
// in name order; reqs are the members' requests (requestsOf).
func (pl *Plugin) buildRequest(key gang.Key, members []*v1.Pod, reqs []amounts, nodeInfos []fwk.NodeInfo, held map[string]amounts,
	templates []*template, of []int) *placement.Request {
	dims := dimensions(reqs)
	nodes := make([]placement.Node, len(nodeInfos))
	for i, ni := range nodeInfos {
		n := ni.Node()
		alloc := make(placement.Vector, len(dims))
		free := make(placement.Vector, len(dims))
		for d, name := range dims {
			alloc[d] = resourceQuantity(ni.GetAllocatable(), name)
			free[d] = nodeFree(ni, name) - held[n.Name][name]
		}
		nodes[i] = placement.Node{Name: n.Name, Labels: n.Labels, Allocatable: alloc, Free: free}
	}
	ms := make([]placement.Member, len(members))
	for i, p := range members {
		t := templates[of[i]]
		ms[i] = placement.Member{
			Name:        p.Namespace + "/" + p.Name,
			Rank:        i,
			Request:     toVector(dims, reqs[i]),
			Eligible:    t.eligible,
			Accelerated: reqs[i].usesAccelerators(),
			MaxPerNode:  t.perNode,
		}
	}
	return &placement.Request{
		Gang:           key.String(),
		Resources:      dimNames(dims),
		Nodes:          nodes,
		NodeGeneration: pl.nodeGeneration.Load(),
		Members:        ms,
		Groups:         gangGroups(templates, of, reqs, nodes),
	}
}

// gangGroups asks for the groups of nodes the gang's accelerated members
// must not mix. A PreFilter plugin whose policy groups nodes (GPUFleet's
// uniform gangs: one GPU product, driver and capacity type) leaves a
// placement.Grouper in the CycleState of the members it binds; eligibility
// ran the profile's PreFilter plugins for each template, so the state of
// the gang's first accelerated member holds it. Nil when no plugin does,
// or when the framework could not run PreFilter plugins for the plugin.
func gangGroups(templates []*template, of []int, reqs []amounts, nodes []placement.Node) *placement.Groups {
	for i, r := range reqs {
		if !r.usesAccelerators() {
			continue
		}
		state := templates[of[i]].state
		if state == nil {
			return nil
		}
		data, err := state.Read(placement.GroupsStateKey)
		if err != nil {
			return nil // no plugin groups this member's nodes
		}
		if g, ok := data.(placement.Grouper); ok {
			return g.NodeGroups(nodes)
		}
		return nil
	}
	return nil
}

// explainIneligible fails a gang some of whose members no node accepts at
// all, naming the Filter plugins that turned them away, instead of letting
// the planner report it as a lack of room.
func (pl *Plugin) explainIneligible(spec *gang.Spec, templates []*template, nodes int) *fwk.Status {
	for _, t := range templates {
		if t.rejected != nil {
			msg := fmt.Sprintf("gang %s: member %s is rejected before any node is tried by %s: %s", spec.Key, t.pod.Name, t.rejected.Plugin(), t.rejected.Message())
			pl.events.gang(spec, t.pod, v1.EventTypeWarning, ReasonNoFeasibleNodes, "%s", msg)
			return fwk.NewStatus(t.rejected.Code(), msg)
		}
		if nodes > 0 && !anyTrue(t.eligible) {
			msg := fmt.Sprintf("gang %s: no node accepts member %s%s", spec.Key, t.pod.Name, t.why())
			pl.events.gang(spec, t.pod, v1.EventTypeWarning, ReasonNoFeasibleNodes, "%s; it is tried again when nodes or pods change", msg)
			return fwk.NewStatus(fwk.Unschedulable, msg)
		}
	}
	return nil
}

func anyTrue(b []bool) bool {
	for _, v := range b {
		if v {
			return true
		}
	}
	return false
}

// explainNoFit turns a failed plan into a status that gives the numbers. It
// plans again against the capacity that can free up, and against an empty
// cluster, to tell "not now" from "not while long-running pods stay" from
// "never". Only a gang that would fit once running jobs finish may hold
// capacity as the head of the queue.
func (pl *Plugin) explainNoFit(ctx context.Context, spec *gang.Spec, members []*v1.Pod, req *placement.Request, reqs []amounts,
	fitErr *placement.FitError, othersHold bool) *fwk.Status {
	key := spec.Key
	demand := describeDemand(req)
	nodeInfos, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("listing nodes from the snapshot: %w", err))
	}
	topologyUnsatisfied := func() {
		if req.Policy.Required {
			pl.events.gang(spec, nil, v1.EventTypeNormal, ReasonTopologyUnsatisfied,
				"waiting: no single domain of level %s has room for the gang now (%s); it starts when one does, or relax %s to %s",
				req.Policy.Level, fitErr.Reason, scheduling.AnnotationTopologyRequired, scheduling.AnnotationTopologyPreferred)
		}
	}
	eventual := withFree(req, pl.eventualFree(req, nodeInfos))
	if plan, err := pl.planner.Plan(ctx, eventual); err == nil {
		msg := fmt.Sprintf("gang %s needs %s; free capacity fits %d of its %d members now (%s); it fits once running jobs finish",
			key, demand, fitErr.Placed, fitErr.Wanted, fitErr.Reason)
		topologyUnsatisfied()
		if othersHold {
			msg += "; part of the free capacity is held for other gangs being placed"
		}
		pl.holdAsHead(ctx, spec, members, req, reqs, plan)
		return fwk.NewStatus(fwk.Unschedulable, msg)
	}
	empty := withFree(req, nil)
	if _, err := pl.planner.Plan(ctx, empty); err != nil {
		var never *placement.FitError
		if !errors.As(err, &never) {
			return fwk.AsStatus(fmt.Errorf("planning gang %s on an empty cluster: %w", key, err))
		}
		msg := fmt.Sprintf("gang %s needs %s, but even with all %d nodes empty only %d of its %d members would fit (%s)",
			key, demand, len(req.Nodes), never.Placed, never.Wanted, never.Reason)
		pl.events.gang(spec, nil, v1.EventTypeWarning, ReasonGangTooLarge,
			"%s: lower spec.minMember or the members' requests, or add capacity", msg)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	topologyUnsatisfied()
	msg := fmt.Sprintf("gang %s needs %s; it would fit an empty cluster, but pods that do not finish on their own (services, DaemonSets: restartPolicy Always, outside any gang) leave room for too little of it even once every job finishes (%s)",
		key, demand, fitErr.Reason)
	pl.events.gang(spec, nil, v1.EventTypeWarning, ReasonPermanentPodsInTheWay,
		"%s; it waits without holding capacity, so other gangs run meanwhile; free capacity or add nodes", msg)
	return fwk.NewStatus(fwk.Unschedulable, msg)
}

// withFree returns a copy of req whose nodes have free capacity free[i], or
// their whole allocatable when free is nil.
func withFree(req *placement.Request, free []placement.Vector) *placement.Request {
	out := *req
	out.Nodes = make([]placement.Node, len(req.Nodes))
	for i, n := range req.Nodes {
		if free == nil {
			n.Free = n.Allocatable
		} else {
			n.Free = free[i]
		}
		out.Nodes[i] = n
	}
	return &out
}

// eventualFree is, per node of req, the capacity that is free once every
// pod that finishes on its own has finished: allocatable less what pods
// that stay request. Pods stay when they are outside any gang and restart
// always (services, DaemonSets, static pods); gang members and batch pods
// finish.
func (pl *Plugin) eventualFree(req *placement.Request, nodeInfos []fwk.NodeInfo) []placement.Vector {
	byName := make(map[string]fwk.NodeInfo, len(nodeInfos))
	for _, ni := range nodeInfos {
		byName[ni.Node().Name] = ni
	}
	dims := make([]v1.ResourceName, len(req.Resources))
	for d, name := range req.Resources {
		dims[d] = v1.ResourceName(name)
	}
	out := make([]placement.Vector, len(req.Nodes))
	for i, n := range req.Nodes {
		free := n.Allocatable.Clone()
		if ni, ok := byName[n.Name]; ok {
			for _, pi := range ni.GetPods() {
				p := pi.GetPod()
				if !stays(p) {
					continue
				}
				a := podAmounts(p)
				for d, name := range dims {
					free[d] -= a[name]
				}
			}
		}
		out[i] = free
	}
	return out
}

// stays reports whether a pod keeps its node until someone removes it.
func stays(p *v1.Pod) bool {
	if _, member := gang.Of(p); member || p.DeletionTimestamp != nil {
		return false
	}
	return p.Spec.RestartPolicy == v1.RestartPolicyAlways || p.Spec.RestartPolicy == ""
}

// holdAsHead lets a gang that would fit once running jobs finish, but does
// not fit now, hold the part of that eventual plan that is free now, if it
// is the first such gang in queue order (see hold.go).
func (pl *Plugin) holdAsHead(ctx context.Context, spec *gang.Spec, members []*v1.Pod, req *placement.Request, reqs []amounts, eventual *placement.Plan) {
	free := make([]placement.Vector, len(req.Nodes))
	var slots []slot
	for i, p := range members {
		n := eventual.NodeOf[i]
		if free[n] == nil {
			free[n] = req.Nodes[n].Free.Clone()
		}
		if !req.Members[i].Request.FitsIn(free[n]) {
			continue
		}
		free[n].Sub(req.Members[i].Request)
		slots = append(slots, slot{uid: p.UID, node: req.Nodes[n].Name, req: reqs[i]})
	}
	if len(slots) == 0 {
		return
	}
	turn := pl.timeout(spec)
	holds, since := pl.gangs.takeHead(spec.Key, pl.queueOrderOf(members[0]), slots, turn)
	if !holds || since.IsZero() {
		return
	}
	heldTotal := amounts{}
	for _, s := range slots {
		heldTotal.add(s.req)
	}
	holdsTaken.Inc()
	klog.FromContext(ctx).V(3).Info("Gang holds the free part of its plan while it waits for room",
		"podGroup", spec.Key, "held", len(slots), "members", len(members), "turn", turn)
	pl.events.gang(spec, nil, v1.EventTypeNormal, ReasonGangHolding,
		"first in the queue, the gang holds the free places of %d of its %d members (%s) for up to %s, gathering the rest as running jobs finish; pods queued behind it stay out of them",
		len(slots), len(members), heldTotal.describe(), turn)
	key := spec.Key
	pl.gangs.after(key, timerHoldEnd, turn, func() { pl.endHeadTurn(key, since) })
}

// endHeadTurn ends a head turn that ran out of time: the gang yields for as
// long as it held, so the gangs behind it can use the capacity (backfill),
// and it is tried again when the yield ends.
func (pl *Plugin) endHeadTurn(key gang.Key, since time.Time) {
	yield, ok := pl.gangs.endTurn(key, since)
	if !ok {
		return
	}
	holdsEnded.WithLabelValues(holdExpired).Inc()
	pl.logger.V(3).Info("Head hold expired: the gangs behind it may use the capacity", "podGroup", key, "yield", yield)
	if spec, ok := pl.lookup(key); ok {
		pl.events.gang(spec, nil, v1.EventTypeNormal, ReasonHoldExpired,
			"held its places for %s without room for the whole gang; they are released for %s so the gangs queued behind it can run (backfill), then it may hold again",
			yield, yield)
	}
	pl.activateBlocked()
	pl.gangs.after(key, timerYieldEnd, yield, func() { pl.activate(key) })
}

// checkMinResources honours a PodGroup's minResources for what the gang
// still misses: the declared total, less what its placed members request,
// must fit in the cluster's free capacity (less what other gangs hold), and
// could ever fit in its allocatable.
func (pl *Plugin) checkMinResources(spec *gang.Spec, nodeInfos []fwk.NodeInfo, held map[string]amounts, placed []*v1.Pod) *fwk.Status {
	if len(spec.MinResources) == 0 {
		return nil
	}
	have := amounts{}
	for _, p := range placed {
		have.add(podAmounts(p))
	}
	names := make([]v1.ResourceName, 0, len(spec.MinResources))
	for name := range spec.MinResources {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	for _, name := range names {
		q := spec.MinResources[name]
		want := q.Value()
		if name == v1.ResourceCPU {
			want = q.MilliValue()
		}
		var total, free int64
		for _, ni := range nodeInfos {
			total += resourceQuantity(ni.GetAllocatable(), name)
			free += nodeFree(ni, name) - held[ni.Node().Name][name]
		}
		if total < want {
			msg := fmt.Sprintf("gang %s: spec.minResources asks for %s %s, but the cluster has %s in all",
				spec.Key, placement.FormatQuantity(string(name), want), name, placement.FormatQuantity(string(name), total))
			pl.events.gang(spec, nil, v1.EventTypeWarning, ReasonGangTooLarge, "%s: lower spec.minResources or add capacity", msg)
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
		}
		if missing := want - have[name]; missing > free {
			return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s: spec.minResources asks for %s %s; its placed members hold %s, and %s is free now",
				spec.Key, placement.FormatQuantity(string(name), want), name, placement.FormatQuantity(string(name), have[name]), placement.FormatQuantity(string(name), free)))
		}
	}
	return nil
}

// describeDemand summarises members by shape in rank order of first
// appearance: "1 × {cpu=2} + 3 × {cpu=4 nvidia.com/gpu=8}".
func describeDemand(req *placement.Request) string {
	var shapes []string
	count := map[string]int{}
	for i := range req.Members {
		s := placement.Describe(req.Resources, req.Members[i].Request)
		if count[s] == 0 {
			shapes = append(shapes, s)
		}
		count[s]++
	}
	parts := make([]string, len(shapes))
	for i, s := range shapes {
		parts[i] = fmt.Sprintf("%d × {%s}", count[s], s)
	}
	return strings.Join(parts, " + ")
}

var unschedulableTaint = v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}

// eligibleNodes tells, node by node, whether the pod may run there at all
// by the checks that need no framework: the node is schedulable, its
// NoSchedule/NoExecute taints are tolerated, and it matches the pod's node
// selector and required node affinity. It stands in for the profile's
// Filter plugins when the framework cannot run them for the plugin.
func eligibleNodes(logger klog.Logger, pod *v1.Pod, nodeInfos []fwk.NodeInfo) []bool {
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	hardTaints := func(t *v1.Taint) bool {
		return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
	}
	out := make([]bool, len(nodeInfos))
	for i, ni := range nodeInfos {
		node := ni.Node()
		if node.Spec.Unschedulable && !corev1helpers.TolerationsTolerateTaint(logger, pod.Spec.Tolerations, &unschedulableTaint, false) {
			continue
		}
		if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, pod.Spec.Tolerations, hardTaints, false); untolerated {
			continue
		}
		if ok, err := affinity.Match(node); err != nil || !ok {
			continue
		}
		out[i] = true
	}
	return out
}
