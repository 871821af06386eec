package podgroup

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	upstream "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling/v1alpha1"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// Condition types the controller sets on a PodGroup.
const (
	// ConditionMembersCreated is True once at least minMember members exist.
	// The scheduler holds every member until then.
	ConditionMembersCreated = "MembersCreated"
	// ConditionScheduled is True once at least minMember members are bound
	// to nodes.
	ConditionScheduled = "Scheduled"
	// ConditionBelowMinMember is True while a gang that ran has fewer than
	// minMember members placed (bound, running or succeeded) because
	// members were lost: deleted, evicted, failed, or gone with their node.
	// Its message gives the counts and names the missing members, for the
	// operator or person who restarts or repairs the job.
	ConditionBelowMinMember = "BelowMinMember"
)

// Condition reasons.
const (
	// ReasonEnoughMembers: at least minMember members exist.
	ReasonEnoughMembers = "EnoughMembers"
	// ReasonWaitingForMembers: fewer than minMember members exist, and one
	// was created recently enough that more may follow.
	ReasonWaitingForMembers = "WaitingForMembers"
	// ReasonMembersMissing: some members exist and wait, but no member has
	// been created for longer than the grace period, so the rest are
	// probably never going to be. The members that exist wait forever.
	ReasonMembersMissing = "MembersMissing"
	// ReasonQuorumScheduled: at least minMember members are bound.
	ReasonQuorumScheduled = "QuorumScheduled"
	// ReasonUnschedulable: a member waits and the scheduler said why.
	ReasonUnschedulable = "Unschedulable"
	// ReasonNotScheduled: fewer than minMember members are bound.
	ReasonNotScheduled = "NotScheduled"
	// ReasonMembersLost: the gang runs below minMember and no replacement
	// exists yet.
	ReasonMembersLost = "MembersLost"
	// ReasonReplacementsPending: the gang runs below minMember and
	// replacements wait for a node.
	ReasonReplacementsPending = "ReplacementsPending"
	// ReasonAtLeastMinMember: the running gang has minMember placed.
	ReasonAtLeastMinMember = "AtLeastMinMember"
	// ReasonNotRunning: no member of the gang holds a node any more.
	ReasonNotRunning = "NotRunning"
)

// maxMessage bounds a condition message copied from a pod's condition; a
// scheduler's message lists node counts and can be long.
const maxMessage = 1024

// Labels that tell the members of operator-made gangs apart.
const (
	kubeflowJobRoleLabel     = "training.kubeflow.org/job-role"
	jobSetReplicatedJobLabel = "jobset.sigs.k8s.io/replicatedjob-name"
	trainerAncestorStepLabel = "trainer.kubeflow.org/trainjob-ancestor-step"
)

// observation is what a PodGroup's pods say about the group.
type observation struct {
	// present are the members not being deleted, in any phase, sorted by
	// name.
	present []*corev1.Pod
	// bound counts present members with a node, finished ones included.
	bound int32
	// pending counts present members in phase Pending, bound or not.
	pending int32
	// running, succeeded and failed count members by phase, members being
	// deleted included: they are what a person listing the pods sees.
	running, succeeded, failed int32
	// lastCreated is when the newest present member was created.
	lastCreated time.Time
}

func observe(pods []corev1.Pod) observation {
	var o observation
	for i := range pods {
		p := &pods[i]
		switch p.Status.Phase {
		case corev1.PodRunning:
			o.running++
		case corev1.PodSucceeded:
			o.succeeded++
		case corev1.PodFailed:
			o.failed++
		}
		if p.DeletionTimestamp != nil {
			continue
		}
		o.present = append(o.present, p)
		if p.Spec.NodeName != "" {
			o.bound++
		}
		if p.Status.Phase == corev1.PodPending || p.Status.Phase == "" {
			o.pending++
		}
		if t := p.CreationTimestamp.Time; t.After(o.lastCreated) {
			o.lastCreated = t
		}
	}
	sort.Slice(o.present, func(i, j int) bool { return o.present[i].Name < o.present[j].Name })
	return o
}

// active counts present members that have not finished.
func (o observation) active() int32 { return o.pending + o.running }

// started reports whether the group has been Running before: its phase
// says so.
func started(phase upstream.PodGroupPhase) bool {
	switch phase {
	case upstream.PodGroupRunning, upstream.PodGroupFinished, upstream.PodGroupFailed:
		return true
	}
	return false
}

// phaseOf decides the group's phase. The rules, first match wins:
//
//   - no pods at all after Finished or Failed: unchanged (the workload's
//     controller cleaned up after the run);
//   - every member has finished, none failed, and the group had started or
//     minMember succeeded: Finished;
//   - every member has finished, some failed, and the group had started or
//     minMember finished: Failed;
//   - minMember members are running or have succeeded: Running;
//   - some member failed and the members that have not cannot make
//     minMember: Failed (a replacement member brings the group back);
//   - the group had started and members still run: Running, below
//     minMember (the BelowMinMember condition says so);
//   - minMember members exist: Scheduling;
//   - otherwise: Pending.
func phaseOf(prev upstream.PodGroupPhase, minMember int32, pods int, o observation) upstream.PodGroupPhase {
	wasStarted := started(prev)
	switch {
	case pods == 0 && (prev == upstream.PodGroupFinished || prev == upstream.PodGroupFailed):
		return prev
	case o.active() == 0 && o.succeeded > 0 && o.failed == 0 && (wasStarted || o.succeeded >= minMember):
		return upstream.PodGroupFinished
	case o.active() == 0 && o.failed > 0 && (wasStarted || o.succeeded+o.failed >= minMember):
		return upstream.PodGroupFailed
	case o.running+o.succeeded >= minMember:
		return upstream.PodGroupRunning
	case o.failed > 0 && o.active()+o.succeeded < minMember && wasStarted:
		return upstream.PodGroupFailed
	case wasStarted && o.running > 0:
		return upstream.PodGroupRunning
	case int32(len(o.present)) >= minMember:
		return upstream.PodGroupScheduling
	default:
		return upstream.PodGroupPending
	}
}

// desired is the status a PodGroup should have, and when the controller
// should look again even if nothing changes.
type desired struct {
	status v1alpha1.PodGroupStatus
	// recheckAfter is zero unless a condition turns on the passing of time:
	// the grace period of a group waiting for members.
	recheckAfter time.Duration
}

// computeStatus derives pg's status from its pods at now. It starts from
// pg's current status, so conditions of other types and fields it does not
// own (occupiedBy) are kept, and a condition's lastTransitionTime moves only
// when its status does.
func computeStatus(pg *v1alpha1.PodGroup, pods []corev1.Pod, lost []lostMember, now time.Time, grace time.Duration) desired {
	minMember := max(pg.Spec.MinMember, 1)
	// A gang ran if it was scheduled, as this or an earlier status says.
	ran := meta.IsStatusConditionTrue(pg.Status.Conditions, ConditionScheduled) ||
		meta.FindStatusCondition(pg.Status.Conditions, ConditionBelowMinMember) != nil
	o := observe(pods)
	st := *pg.Status.DeepCopy()
	st.Running, st.Succeeded, st.Failed = o.running, o.succeeded, o.failed
	st.Phase = phaseOf(pg.Status.Phase, minMember, len(pods), o)
	st.ObservedGeneration = pg.Generation
	if st.Phase != upstream.PodGroupPending && st.ScheduleStartTime.IsZero() {
		st.ScheduleStartTime = metav1.NewTime(now)
	}

	var out desired
	set := conditionSetter(&st.Conditions, pg.Generation, now)
	have := int32(len(o.present))
	out.recheckAfter = membersCreated(st.Conditions, started(st.Phase), minMember, o, now, grace,
		func() string { return missingMembersHint(pg, o.present, "spec.minMember") }, set)

	// A finished group keeps the Scheduled condition it ended with.
	if st.Phase == upstream.PodGroupFinished || st.Phase == upstream.PodGroupFailed {
		if !meta.IsStatusConditionTrue(st.Conditions, ConditionScheduled) {
			set(ConditionScheduled, metav1.ConditionTrue, ReasonQuorumScheduled,
				fmt.Sprintf("the gang ran: %d members succeeded, %d failed", o.succeeded, o.failed))
		}
	} else {
		switch {
		case o.bound >= minMember:
			set(ConditionScheduled, metav1.ConditionTrue, ReasonQuorumScheduled,
				fmt.Sprintf("%d/%d members bound to nodes", o.bound, minMember))
		case have < minMember:
			set(ConditionScheduled, metav1.ConditionFalse, ReasonWaitingForMembers,
				fmt.Sprintf("%d/%d members bound; the scheduler starts placing members once %d exist", o.bound, minMember, minMember))
		default:
			if pod, msg, ok := unschedulable(o.present); ok {
				set(ConditionScheduled, metav1.ConditionFalse, ReasonUnschedulable,
					truncate(fmt.Sprintf("%d/%d members bound; pod %s: %s", o.bound, minMember, pod, msg), maxMessage))
			} else {
				set(ConditionScheduled, metav1.ConditionFalse, ReasonNotScheduled,
					fmt.Sprintf("%d/%d members bound", o.bound, minMember))
			}
		}
	}
	ran = ran || meta.IsStatusConditionTrue(st.Conditions, ConditionScheduled)
	belowMinMember(st.Conditions, ran, minMember, pods, lost, set)
	// A condition kept as it was has still been checked against this
	// generation.
	for i := range st.Conditions {
		if c := &st.Conditions[i]; c.Type == ConditionMembersCreated || c.Type == ConditionScheduled || c.Type == ConditionBelowMinMember {
			c.ObservedGeneration = pg.Generation
		}
	}
	out.status = st
	return out
}

// setCondition sets one condition of a status; see conditionSetter.
type setCondition func(condType string, status metav1.ConditionStatus, reason, message string)

// conditionSetter returns a setCondition on conds for an object of the given
// generation at now. A condition's lastTransitionTime moves only when its
// status does (meta.SetStatusCondition keeps it otherwise).
func conditionSetter(conds *[]metav1.Condition, generation int64, now time.Time) setCondition {
	return func(condType string, status metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(conds, metav1.Condition{
			Type: condType, Status: status, Reason: reason, Message: message,
			ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now),
		})
	}
}

// membersCreated sets ConditionMembersCreated, for PodGroups of either API:
// True once minMember members exist; False while fewer do, with reason
// MembersMissing and hint() once no member has been created for grace. It
// returns how long until that grace runs out, if the condition turns on it.
//
// Once a gang has started, its members finishing or being cleaned up is not
// a gang waiting for members: MembersCreated keeps what it said when the
// gang started.
func membersCreated(conds []metav1.Condition, started bool, minMember int32, o observation, now time.Time, grace time.Duration,
	hint func() string, set setCondition) (recheckAfter time.Duration) {
	have := int32(len(o.present))
	if started {
		if !meta.IsStatusConditionTrue(conds, ConditionMembersCreated) {
			set(ConditionMembersCreated, metav1.ConditionTrue, ReasonEnoughMembers,
				fmt.Sprintf("the gang started with at least minMember (%d) members", minMember))
		}
		return 0
	}
	switch {
	case have >= minMember:
		set(ConditionMembersCreated, metav1.ConditionTrue, ReasonEnoughMembers,
			fmt.Sprintf("%d members exist; minMember is %d", have, minMember))
	case have > 0 && now.Sub(o.lastCreated) >= grace:
		set(ConditionMembersCreated, metav1.ConditionFalse, ReasonMembersMissing,
			fmt.Sprintf("%d/%d members exist and no member has been created for %s; the scheduler holds these %d until %d exist, so they wait for members that are not coming. %s",
				have, minMember, grace, have, minMember, hint()))
	default:
		set(ConditionMembersCreated, metav1.ConditionFalse, ReasonWaitingForMembers,
			fmt.Sprintf("waiting for members: %d/%d present", have, minMember))
		if have > 0 {
			return o.lastCreated.Add(grace).Sub(now)
		}
	}
	return 0
}

// belowMinMember sets ConditionBelowMinMember on a gang that ran, for
// PodGroups of either API: True while it has fewer than minMember members
// placed, with the counts and the missing members. conds are the status's
// conditions before this call. Quorum is decided by the gang package, as the
// scheduler decides it.
func belowMinMember(conds []metav1.Condition, ran bool, minMember int32, pods []corev1.Pod, lost []lostMember, set setCondition) {
	if !ran {
		return
	}
	ptrs := make([]*corev1.Pod, len(pods))
	for i := range pods {
		ptrs[i] = &pods[i]
	}
	c := gang.Count(ptrs)
	q := gang.QuorumOf(minMember, c)
	switch {
	case c.Bound == 0:
		if meta.IsStatusConditionTrue(conds, ConditionBelowMinMember) || meta.FindStatusCondition(conds, ConditionBelowMinMember) == nil {
			set(ConditionBelowMinMember, metav1.ConditionFalse, ReasonNotRunning,
				fmt.Sprintf("no member holds a node (%d succeeded, %d failed)", c.Succeeded, c.Failed))
		}
	case q.Placed:
		set(ConditionBelowMinMember, metav1.ConditionFalse, ReasonAtLeastMinMember,
			fmt.Sprintf("%d of minMember %d placed (%d bound, %d succeeded)", c.Placed(), minMember, c.Bound, c.Succeeded))
	default:
		reason := ReasonMembersLost
		if c.Waiting > 0 {
			reason = ReasonReplacementsPending
		}
		set(ConditionBelowMinMember, metav1.ConditionTrue, reason, truncate(fmt.Sprintf(
			"%d of minMember %d placed (%d bound, %d succeeded); %d replacement(s) waiting for a node; missing: %s",
			c.Placed(), minMember, c.Bound, c.Succeeded, c.Waiting, describeMissing(pods, lost, q.Missing)), maxMessage))
	}
}

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
