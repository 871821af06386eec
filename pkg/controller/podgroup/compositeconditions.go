package podgroup

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// The condition type and reasons the CompositePodGroup API documents
// (k8s.io/api/scheduling/v1alpha3, CompositePodGroupStatus), which the
// controller sets with those meanings for the composites gpu-gang
// schedules. kube-scheduler 1.37 writes PodGroupInitiallyScheduled on a
// composite's PodGroups and nothing on the composite itself.
const (
	// ConditionCompositeInitiallyScheduled is True once the subtree's
	// scheduling requirement was first met (minGroupCount children at
	// quorum on nodes), and then stays True: BelowMinMember says when
	// children are lost.
	ConditionCompositeInitiallyScheduled = "CompositePodGroupInitiallyScheduled"
	// ReasonInvalid: the composite's layout cannot be honoured (a cycle,
	// more than four levels, PodGroups of another Workload, a child whose
	// own spec is invalid); the message names the fix.
	ReasonInvalid = "Invalid"
	// ReasonParentMissing: the composite, or one under it, names a parent
	// that does not exist (yet).
	ReasonParentMissing = "ParentMissing"
)

// computeCompositeConditions derives a composite's conditions from its
// observed tree, starting from its current ones, so that conditions of
// other types (DisruptionTarget) are kept. The quorum is the root's of
// gang.TreeQuorumOf: what the scheduler admits the composite by.
func computeCompositeConditions(cpg *schedulingv1alpha3.CompositePodGroup, in observed) []metav1.Condition {
	conds := make([]metav1.Condition, 0, len(cpg.Status.Conditions)+2)
	for _, c := range cpg.Status.Conditions {
		conds = append(conds, *c.DeepCopy())
	}
	set := conditionSetter(&conds, cpg.Generation, in.now)
	initially := meta.IsStatusConditionTrue(conds, ConditionCompositeInitiallyScheduled)
	t := in.tree
	if t.invalid != nil {
		if !initially {
			reason := ReasonInvalid
			if errors.Is(t.invalid, gang.ErrMissingParent) {
				reason = ReasonParentMissing
			}
			set(ConditionCompositeInitiallyScheduled, metav1.ConditionFalse, reason, truncate(t.invalid.Error(), maxMessage))
		}
		observedAt(conds, cpg.Generation, ConditionCompositeInitiallyScheduled)
		return conds
	}
	q := t.quorum[0]
	if !initially {
		compositeScheduled(t, presentPods(in.pods), set)
		initially = meta.IsStatusConditionTrue(conds, ConditionCompositeInitiallyScheduled)
	}
	ran := initially || meta.FindStatusCondition(conds, ConditionBelowMinMember) != nil
	setBelow(conds, ran, q.Census, q.Placed, set,
		func() string {
			return fmt.Sprintf("%d of minGroupCount %d child groups at quorum on nodes", q.Children.Placed, q.Need)
		},
		func() string {
			return fmt.Sprintf("%d of minGroupCount %d child groups at quorum on nodes; %d replacement(s) waiting for a node; below quorum: %s",
				q.Children.Placed, q.Need, q.Census.Waiting, describeChildren(t, func(g gang.GroupQuorum) bool { return !g.Placed }, placedOf))
		})
	observedAt(conds, cpg.Generation, ConditionCompositeInitiallyScheduled, ConditionBelowMinMember)
	return conds
}

// compositeScheduled sets CompositePodGroupInitiallyScheduled from the
// root's quorum, as scheduled does for a PodGroup.
func compositeScheduled(t *treeObserved, present []*corev1.Pod, set setCondition) {
	q := t.quorum[0]
	placed := fmt.Sprintf("%d of minGroupCount %d child groups at quorum on nodes", q.Children.Placed, q.Need)
	switch {
	case q.Placed:
		set(ConditionCompositeInitiallyScheduled, metav1.ConditionTrue, ReasonScheduled, placed)
	case !q.Gathered:
		set(ConditionCompositeInitiallyScheduled, metav1.ConditionFalse, ReasonWaitingForMembers, truncate(fmt.Sprintf(
			"%d of minGroupCount %d child groups have their members; the scheduler places the composite once %d do; waiting for: %s",
			q.Children.Gathered, q.Need, q.Need, describeChildren(t, func(g gang.GroupQuorum) bool { return !g.Gathered }, gatheredOf)), maxMessage))
	default:
		if pod, msg, ok := unschedulable(present); ok {
			set(ConditionCompositeInitiallyScheduled, metav1.ConditionFalse, ReasonUnschedulable,
				truncate(fmt.Sprintf("%s; pod %s: %s", placed, pod, msg), maxMessage))
		} else {
			set(ConditionCompositeInitiallyScheduled, metav1.ConditionFalse, ReasonNotScheduled, placed)
		}
	}
}

// describeChildren names the root's children that match, in the tree's
// order, each with the counts count gives.
func describeChildren(t *treeObserved, match func(gang.GroupQuorum) bool, count func(*gang.Node, gang.GroupQuorum) string) string {
	var out []string
	for _, c := range t.tree.Root().Children {
		if n, q := &t.tree.Nodes[c], t.quorum[c]; match(q) {
			out = append(out, count(n, q))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// gatheredOf says how far a child is from gathering.
func gatheredOf(n *gang.Node, q gang.GroupQuorum) string {
	if n.Spec != nil {
		return fmt.Sprintf("PodGroup %s (%d/%d members exist)", n.Key.Name, min(q.Census.Present(), q.Need), q.Need)
	}
	return fmt.Sprintf("CompositePodGroup %s (%d/%d child groups have their members)", n.Key.Name, q.Children.Gathered, q.Need)
}

// placedOf says how far a child is from its quorum on nodes.
func placedOf(n *gang.Node, q gang.GroupQuorum) string {
	if n.Spec != nil {
		return fmt.Sprintf("PodGroup %s (%d of minCount %d placed)", n.Key.Name, q.Need-q.Missing, q.Need)
	}
	return fmt.Sprintf("CompositePodGroup %s (%d of minGroupCount %d child groups placed)", n.Key.Name, q.Children.Placed, q.Need)
}

// presentPods are the pods not being deleted, sorted by name.
func presentPods(pods []corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range pods {
		if pods[i].DeletionTimestamp == nil {
			out = append(out, &pods[i])
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
