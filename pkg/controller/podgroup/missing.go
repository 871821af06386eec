package podgroup

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// Labels that tell the members of operator-made gangs apart.
const (
	kubeflowJobRoleLabel     = "training.kubeflow.org/job-role"
	jobSetReplicatedJobLabel = "jobset.sigs.k8s.io/replicatedjob-name"
	trainerAncestorStepLabel = "trainer.kubeflow.org/trainjob-ancestor-step"
)

// lostMember is a member that left while it held a node and had not
// finished, as the controller saw it go.
type lostMember struct {
	name string
	node string
	// how says how it went, for people: "deleted from node n3",
	// "reclaimed with spot node n7".
	how string
	at  time.Time
}

// describeMissing names the members a gang below minMember misses: failed
// ones that are still listed, then those the controller saw deleted that no
// pod of the same name replaced, newest first. Names it cannot know (pods
// deleted before this controller started) are counted.
func describeMissing(pods []corev1.Pod, lost []lostMember, missing int32) string {
	present := map[string]bool{}
	var named []string
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil {
			named = append(named, fmt.Sprintf("%s (being deleted)", p.Name))
			continue
		}
		present[p.Name] = true
		if p.Status.Phase == corev1.PodFailed {
			why := "failed"
			if p.Status.Reason != "" {
				why += ": " + p.Status.Reason
			}
			named = append(named, fmt.Sprintf("%s (%s)", p.Name, why))
		}
	}
	sort.Strings(named)
	recent := append([]lostMember(nil), lost...)
	sort.SliceStable(recent, func(i, j int) bool { return recent[i].at.After(recent[j].at) })
	for _, l := range recent {
		if int32(len(named)) >= missing {
			break
		}
		if present[l.name] {
			continue
		}
		present[l.name] = true
		named = append(named, fmt.Sprintf("%s (%s)", l.name, l.how))
	}
	if n := missing - int32(len(named)); n > 0 {
		named = append(named, fmt.Sprintf("%d more whose names this controller did not see", n))
	}
	if len(named) == 0 {
		return "none named"
	}
	return strings.Join(named, ", ")
}

// unschedulable returns the first waiting member, by name, whose
// PodScheduled condition says the scheduler could not place it, and why.
func unschedulable(present []*corev1.Pod) (string, string, bool) {
	for _, p := range present {
		if p.Spec.NodeName != "" {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return p.Name, c.Message, true
			}
		}
	}
	return "", "", false
}

// missingMembersHint says what is known to keep a gang's remaining members
// from being created, from who owns the PodGroup and which members exist.
// quorumField is the field that sets minMember in the PodGroup's API.
func missingMembersHint(pg metav1.Object, present []*corev1.Pod, quorumField string) string {
	owner := metav1.GetControllerOf(pg)
	if refs := pg.GetOwnerReferences(); owner == nil && len(refs) > 0 {
		owner = &refs[0]
	}
	kind := ""
	if owner != nil {
		kind = owner.Kind
	}
	switch {
	case kind == "MPIJob" && !anyMember(present, isLauncher):
		return "MPIJob " + owner.Name + " has no launcher yet and minMember counts it: with launcherCreationPolicy WaitForWorkersReady, MPI Operator creates the launcher only once the workers are ready, and the workers wait for the launcher. Set spec.launcherCreationPolicy: AtStartup, or runPolicy.schedulingPolicy.minAvailable to the number of workers."
	case kind == "TrainJob" && allMembers(present, isInitializer):
		return "TrainJob " + owner.Name + " counts its initializer pods in minMember, but creates the training nodes only after the initializers complete, and the initializers wait for the nodes. Use a runtime without initializers for gang-scheduled jobs, or one without podGroupPolicy."
	case owner != nil:
		return fmt.Sprintf("Check %s %s: its controller has not created the rest, perhaps because it creates some pods only after others run (which deadlocks with any gang scheduler), or because it is failing to create them.", kind, owner.Name)
	default:
		return "Create the remaining members, or lower " + quorumField + " to the number that will exist."
	}
}

func isLauncher(p *corev1.Pod) bool {
	return p.Labels[scheduling.KubeflowReplicaTypeLabel] == "launcher" || p.Labels[kubeflowJobRoleLabel] == "launcher"
}

// isInitializer reports whether a pod is a Trainer v2 initializer: by the
// step label Trainer's runtimes set, or by its JobSet replicated job's name.
func isInitializer(p *corev1.Pod) bool {
	for _, name := range []string{p.Labels[trainerAncestorStepLabel], p.Labels[jobSetReplicatedJobLabel]} {
		if name == "initializer" || strings.HasSuffix(name, "-initializer") {
			return true
		}
	}
	return false
}

func anyMember(pods []*corev1.Pod, f func(*corev1.Pod) bool) bool {
	for _, p := range pods {
		if f(p) {
			return true
		}
	}
	return false
}

func allMembers(pods []*corev1.Pod, f func(*corev1.Pod) bool) bool {
	for _, p := range pods {
		if !f(p) {
			return false
		}
	}
	return len(pods) > 0
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
