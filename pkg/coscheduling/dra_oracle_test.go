package coscheduling

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// The two judges TestPlannerAgreesWithDynamicResources compares the gang
// plugin with: its plan replayed through the framework, and a search over
// assignments that asks kube-scheduler's own plugins.

// replayPlan runs each member of a planned gang, in rank order, through the
// framework's Filter on the node its plan gives it, then Reserve, as the
// scheduler's cycles would; the first member's cycle is the one whose
// PreFilter planned the gang.
func (e *testEnv) replayPlan(key gang.Key, members []*v1.Pod, first fwk.CycleState) {
	e.t.Helper()
	for i, m := range members {
		nodes, ok := e.ledger().Reservations.PlanSlots(key, m.UID, nil)
		if !ok || len(nodes) != 1 {
			e.t.Fatalf("member %s has no slot of its own in the plan: %v", m.Name, nodes)
		}
		node := nodes[0]
		state := first
		if i > 0 {
			state = framework.NewCycleState()
			res, status, _ := e.fh.RunPreFilterPlugins(e.ctx, state, m)
			if !status.IsSuccess() {
				e.t.Fatalf("PreFilter of member %s, planned on %s: %v", m.Name, node, status)
			}
			if res == nil || !res.NodeNames.Has(node) {
				e.t.Fatalf("PreFilter of member %s leaves out its planned node %s: %v", m.Name, node, res)
			}
		}
		ni, err := e.snapshot.NodeInfos().Get(node)
		if err != nil {
			e.t.Fatal(err)
		}
		if status := e.fh.RunFilterPlugins(e.ctx, state, m, ni); !status.IsSuccess() {
			e.t.Fatalf("the plan puts member %s on node %s, where Filter rejects it: %v", m.Name, node, status)
		}
		assumed := m.DeepCopy()
		assumed.Spec.NodeName = node
		e.assume(assumed)
		if status := e.fh.RunReservePluginsReserve(e.ctx, state, assumed, node); !status.IsSuccess() {
			e.t.Fatalf("member %s cannot reserve its planned node %s: %v", m.Name, node, status)
		}
	}
}

// oracleProfile is a second profile of the env's scheduler, without the
// gang plugin: NodeResourcesFit and DynamicResources on the same informers,
// (the oracle tries only a case's own nodes, so it needs no NodeAffinity)
// snapshot, clientset and DRA manager, as kube-scheduler builds each profile
// of its configuration on what they share.
func (e *testEnv) oracleProfile() framework.Framework {
	e.t.Helper()
	fh, err := tf.NewFramework(e.ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		nodeResourcesFit(schedulerFeatures(), nil),
		dynamicResources(nil),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}, "oracle",
		frameworkruntime.WithInformerFactory(e.Informers),
		frameworkruntime.WithSnapshotSharedLister(e.snapshot),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
		frameworkruntime.WithClientSet(e.client),
		frameworkruntime.WithSharedDRAManager(e.DRA))
	if err != nil {
		e.t.Fatalf("building the oracle's profile: %v", err)
	}
	return fh
}

// draOracle searches every assignment of members to nodes, asking
// kube-scheduler's own plugins (NodeResourcesFit and DynamicResources, in a
// profile without the gang plugin) whether each member, in rank order,
// passes PreFilter and Filter there and reserves its devices, on a fresh
// cycle after its predecessors reserved theirs.
type draOracle struct {
	env     *testEnv
	profile framework.Framework
	// nodes are the ones to try, in order.
	nodes   []*v1.Node
	members []*v1.Pod
	demand  []string
	// nodeOf is the assignment being tried: member i on node nodeOf[i].
	nodeOf []int
}

// fits reports whether members i and after fit, given the reservations of
// those before; it leaves nothing reserved.
func (o *draOracle) fits(i int) bool {
	e := o.env
	if i == len(o.members) {
		return true
	}
	m := o.members[i]
	// Two members next to each other in rank that ask for the same are
	// interchangeable: trying them in one node order is enough.
	start := 0
	if i > 0 && o.demand[i] == o.demand[i-1] {
		start = o.nodeOf[i-1]
	}
	for n := start; n < len(o.nodes); n++ {
		node := o.nodes[n].Name
		state := framework.NewCycleState()
		if _, status, _ := o.profile.RunPreFilterPlugins(e.ctx, state, m); !status.IsSuccess() {
			if status.Code() == fwk.Error {
				e.t.Fatalf("oracle: PreFilter of %s: %v", m.Name, status)
			}
			return false
		}
		ni, err := e.snapshot.NodeInfos().Get(node)
		if err != nil {
			e.t.Fatal(err)
		}
		if status := o.profile.RunFilterPlugins(e.ctx, state, m, ni); !status.IsSuccess() {
			if status.Code() == fwk.Error {
				e.t.Fatalf("oracle: Filter of %s on %s: %v", m.Name, node, status)
			}
			continue
		}
		assumed := m.DeepCopy()
		assumed.Spec.NodeName = node
		e.assume(assumed)
		ok := false
		if status := o.profile.RunReservePluginsReserve(e.ctx, state, assumed, node); status.IsSuccess() {
			o.nodeOf[i] = n
			ok = o.fits(i + 1)
		}
		o.profile.RunReservePluginsUnreserve(e.ctx, state, assumed, node)
		e.forget(assumed)
		if ok {
			return true
		}
	}
	return false
}

// exhaustivePlanner tries every assignment of members to eligible nodes, in
// rank order and node order, and returns the first that fits the nodes'
// free capacity: with it, a gang that does not fit does not fit the
// capacity model, whatever a heuristic would have missed. It is for small
// flat gangs: it knows no topology, caps per node, groups or subgroups.
type exhaustivePlanner struct{}

var _ placement.Planner = exhaustivePlanner{}

func (exhaustivePlanner) Plan(_ context.Context, req *placement.Request) (*placement.Plan, error) {
	if req.Hierarchy != nil || req.Groups.Split() {
		return nil, fmt.Errorf("exhaustivePlanner: subgroups and node groups are not supported")
	}
	free := make([]placement.Vector, len(req.Nodes))
	for i := range req.Nodes {
		free[i] = req.Nodes[i].Free.Clone()
	}
	nodeOf := make([]int, len(req.Members))
	deepest := 0
	var place func(i int) bool
	place = func(i int) bool {
		deepest = max(deepest, i)
		if i == len(req.Members) {
			return true
		}
		m := &req.Members[i]
		for n := range req.Nodes {
			if !m.EligibleOn(n) || !m.Request.FitsIn(free[n]) {
				continue
			}
			free[n].Sub(m.Request)
			nodeOf[i] = n
			ok := place(i + 1)
			free[n].Add(m.Request)
			if ok {
				return true
			}
		}
		return false
	}
	if !place(0) {
		return nil, &placement.FitError{Placed: deepest, Wanted: len(req.Members), Reason: "no assignment of members to nodes fits"}
	}
	used := map[int]bool{}
	for _, n := range nodeOf {
		used[n] = true
	}
	return &placement.Plan{
		NodeOf:  nodeOf,
		Summary: fmt.Sprintf("%d pods on %d nodes", len(nodeOf), len(used)),
		Spans:   []placement.Span{{Level: v1.LabelHostname, Domains: len(used)}},
	}, nil
}
