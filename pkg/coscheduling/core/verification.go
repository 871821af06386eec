package core

import (
	"context"
	"fmt"
	"hash/fnv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/contract"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/eligibility"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Verification: a plan whose members may exclude each other is replayed
// member by member through the profile's Filter plugins, and what fails
// becomes a lesson in the ledger (see package eligibility, runner.go, for
// the whole scheme).

// feasiblePlan plans until Filter accepts the plan: a plan whose members
// exclude each other where it puts them teaches a lesson (see package
// eligibility) and the planner plans again. It returns the plan and its
// fingerprint (Fingerprint). A plan that failed before is never returned again.
func (pl *Planner) feasiblePlan(ctx context.Context, key gang.Key, members []*v1.Pod, req *placement.Request, nodeInfos []fwk.NodeInfo,
	templates []*eligibility.Template, of []int, planner placement.Planner) (*placement.Plan, uint64, error) {
	verify := false
	for _, t := range templates {
		verify = verify || (t.Relational && pl.eligibility.RunsPlugins())
	}
	var last *failure
	for range maxReplans + 1 {
		plan, err := planner.Plan(ctx, req)
		if err != nil {
			return nil, 0, err
		}
		fp := Fingerprint(members, plan, req)
		if pl.ledger.Lessons.View(key).Failed[fp] {
			return nil, 0, pl.unfit(members, req, last, "the only plan the planner finds failed before")
		}
		if !verify {
			return plan, fp, nil
		}
		failures := pl.verify(ctx, members, plan, nodeInfos, templates, of)
		if len(failures) == 0 {
			return plan, fp, nil
		}
		pl.ledger.Lessons.LearnFailedPlan(key, fp)
		last = &failures[0]
		if !pl.learn(ctx, key, members, nodeInfos, templates, of, failures) {
			return nil, 0, pl.unfit(members, req, last, "")
		}
		pl.applyLessons(key, req, nodeInfos, templates, of)
	}
	return nil, 0, pl.unfit(members, req, last, "")
}

// applyLessons narrows the request by what the gang's lessons say now.
func (pl *Planner) applyLessons(key gang.Key, req *placement.Request, nodeInfos []fwk.NodeInfo, templates []*eligibility.Template, of []int) {
	lv := pl.ledger.Lessons.View(key)
	for _, t := range templates {
		if n, ok := lv.PerNode[t.Sig]; ok && (t.PerNode == 0 || n < t.PerNode) {
			t.PerNode = n
		}
		if ex := lv.Excluded[t.Sig]; ex.Len() > 0 {
			for i, ni := range nodeInfos {
				if ex.Has(ni.Node().Name) {
					t.Eligible[i] = false
				}
			}
		}
	}
	for i := range req.Members {
		req.Members[i].MaxPerNode = templates[of[i]].PerNode
	}
}

func (pl *Planner) unfit(members []*v1.Pod, req *placement.Request, last *failure, why string) error {
	if last == nil {
		return &unfitError{status: fwk.NewStatus(fwk.Unschedulable, why)}
	}
	m := members[last.member]
	return &unfitError{member: types.NamespacedName{Namespace: m.Namespace, Name: m.Name}, node: req.Nodes[last.node].Name, status: last.status}
}

// maxReplans bounds how often one PreFilter plans again after verification
// failed. Each replan follows a new lesson, so the bound is only reached
// by gangs whose members exclude each other in ways a cap per node does not
// capture; they are reported as unschedulable with the last rejection.
const maxReplans = 8

// failure is a member that Filter rejected where a plan put it.
type failure struct {
	member int
	node   int
	status *fwk.Status
	// beside counts the member's template siblings already on the node.
	beside int
}

// verify replays a plan member by member in rank order and returns the
// members Filter rejects where the plan puts them. Members placed earlier
// are added to the copies of their nodes and to every template's PreFilter
// state, as the scheduler's own preemption does when it simulates pods.
func (pl *Planner) verify(ctx context.Context, members []*v1.Pod, plan *placement.Plan, nodeInfos []fwk.NodeInfo, templates []*eligibility.Template, of []int) []failure {
	simCtx := contract.WithSimulation(ctx)
	states := make([]fwk.CycleState, len(templates))
	for i, t := range templates {
		states[i] = t.State.Clone()
	}
	copies := map[int]fwk.NodeInfo{}
	beside := map[[2]int]int{} // (template, node) -> members placed
	var failures []failure
	for i, m := range members {
		n := plan.NodeOf[i]
		ni, ok := copies[n]
		if !ok {
			ni = nodeInfos[n].Snapshot()
			copies[n] = ni
		}
		t := of[i]
		if s := pl.framework.RunFilterPlugins(simCtx, states[t], m, ni); !eligibility.Acceptable(s) {
			failures = append(failures, failure{member: i, node: n, status: s, beside: beside[[2]int{t, n}]})
			continue
		}
		placed := m.DeepCopy()
		placed.Spec.NodeName = ni.Node().Name
		pi, err := framework.NewPodInfo(placed)
		if err != nil {
			failures = append(failures, failure{member: i, node: n, status: fwk.AsStatus(err)})
			continue
		}
		ni.AddPodInfo(pi)
		for j, o := range templates {
			if s := pl.framework.RunPreFilterExtensionAddPod(simCtx, states[j], o.Pod, pi, ni); !s.IsSuccess() {
				klog.FromContext(ctx).V(4).Info("Could not add a planned member to a sibling's view", "member", klog.KObj(m), "status", s)
			}
		}
		beside[[2]int{t, n}]++
	}
	return failures
}

// learn turns verification failures into lessons: a member that passes on
// the bare node but fails beside k of its template's siblings caps the
// template at k per node; anything else excludes the node for the
// template. It reports whether anything new was learned.
func (pl *Planner) learn(ctx context.Context, key gang.Key, members []*v1.Pod, nodeInfos []fwk.NodeInfo, templates []*eligibility.Template, of []int, failures []failure) bool {
	simCtx := contract.WithSimulation(ctx)
	logger := klog.FromContext(ctx)
	news := false
	for _, f := range failures {
		t := templates[of[f.member]]
		node := nodeInfos[f.node].Node().Name
		bare := pl.framework.RunFilterPlugins(simCtx, t.State, members[f.member], nodeInfos[f.node])
		if f.beside > 0 && eligibility.Acceptable(bare) {
			if pl.ledger.Lessons.LearnCap(key, t.Sig, f.beside) {
				logger.V(3).Info("Members exclude each other on a node: capping them", "podGroup", key, "member", klog.KObj(members[f.member]),
					"node", node, "perNode", f.beside, "plugin", f.status.Plugin(), "reason", f.status.Message())
				news = true
			}
			continue
		}
		if pl.ledger.Lessons.LearnExclusion(key, t.Sig, node) {
			logger.V(3).Info("Filter rejects the plan's node for a member: excluding it", "podGroup", key, "member", klog.KObj(members[f.member]),
				"node", node, "plugin", f.status.Plugin(), "reason", f.status.Message())
			news = true
		}
	}
	return news
}

// Fingerprint identifies a plan: which member goes where.
func Fingerprint(members []*v1.Pod, plan *placement.Plan, req *placement.Request) uint64 {
	h := fnv.New64a()
	for i, m := range members {
		fmt.Fprintf(h, "%s=%s;", m.UID, req.Nodes[plan.NodeOf[i]].Name)
	}
	return h.Sum64()
}

// unfitError says that Filter rejects every plan the planner could find,
// with the last rejection. Waiting for capacity does not help such a gang.
type unfitError struct {
	member types.NamespacedName
	node   string
	status *fwk.Status
}

func (e *unfitError) Error() string {
	return fmt.Sprintf("Filter plugin %s rejects member %s on node %s, the last place the plan could put it: %s",
		e.status.Plugin(), e.member, e.node, e.status.Message())
}
