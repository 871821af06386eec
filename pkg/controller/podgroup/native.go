package podgroup

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// NativePodGroupIndex is the field index of pods by the native PodGroup
// (scheduling.k8s.io/v1beta1) they belong to, through
// spec.schedulingGroup. As with PodGroupIndex, a list with it must also say
// client.InNamespace.
const NativePodGroupIndex = "gpu-gang.x-k8s.io/native-pod-group"

// Condition types and reasons kube-scheduler itself uses on native
// PodGroups (k8s.io/api/scheduling/v1beta1), which the controller sets with
// the same meanings for the gangs gpu-gang schedules.
const (
	// ConditionInitiallyScheduled is True once the gang's scheduling
	// requirement was first met, and then stays True: it does not go back
	// when members are lost (BelowMinMember says that).
	ConditionInitiallyScheduled = schedulingv1beta1.PodGroupInitiallyScheduled
	// ReasonScheduled is the reason kube-scheduler gives the condition
	// when it turns True.
	ReasonScheduled = "Scheduled"
)

// DefaultSchedulerName is the scheduler name whose native PodGroups the
// controller reports on unless told others: the profile
// manifests/scheduler-config.yaml runs.
const DefaultSchedulerName = "gpu-gang"

// nativeScheduled is the condition that says a native gang is placed.
var nativeScheduled = scheduledCondition{condType: ConditionInitiallyScheduled, trueReason: ReasonScheduled}

// nativePodGroups adapts native PodGroups (scheduling.k8s.io/v1beta1) whose
// members gpu-gang schedules. The controller keeps their status conditions:
//   - PodGroupInitiallyScheduled, as kube-scheduler sets it for the gangs
//     it schedules: True (reason Scheduled) once minCount members are
//     placed, for good; until then False, with reason Unschedulable and the
//     scheduler's message once a member was found unschedulable, or
//     WaitingForMembers, or NotScheduled;
//   - MembersCreated and BelowMinMember, with the meanings, reasons and
//     Events they have on scheduler-plugins PodGroups (minMember being
//     minCount), computed by the same functions.
//
// It never touches metadata: the API server's protection finalizer
// (scheduling.k8s.io/podgroup-protection) is kube-controller-manager's to
// remove, once no active pod names the PodGroup. It never reads the
// Workload a PodGroup's workloadRef names either, so deleting a Workload
// changes nothing here; the reference is only quoted in messages. A
// PodGroup whose members name another scheduler is left alone: that
// scheduler writes its status.
type nativePodGroups struct {
	// schedulerNames are the scheduler names gpu-gang runs; empty means
	// DefaultSchedulerName.
	schedulerNames []string
}

var _ adapter[*schedulingv1beta1.PodGroup] = nativePodGroups{}

func (nativePodGroups) api() gang.API                          { return gang.Native }
func (nativePodGroups) name() string                           { return "native-podgroup" }
func (nativePodGroups) newObject() *schedulingv1beta1.PodGroup { return &schedulingv1beta1.PodGroup{} }
func (nativePodGroups) indexes() []fieldIndex                  { return memberIndex(gang.Native, NativePodGroupIndex) }
func (nativePodGroups) watch(b *builder.Builder, _ client.Reader, members, nodes handler.EventHandler) *builder.Builder {
	return watchMembers(b, members, nodes)
}

func (a nativePodGroups) observe(ctx context.Context, c client.Reader, pg *schedulingv1beta1.PodGroup, at moment) (observed, error) {
	return observeMembers(ctx, c, NativePodGroupIndex, a.spec(pg), pg, at)
}
func (nativePodGroups) spec(pg *schedulingv1beta1.PodGroup) *gang.Spec {
	return gang.FromNativePodGroup(pg)
}
func (nativePodGroups) conditions(pg *schedulingv1beta1.PodGroup) []metav1.Condition {
	return pg.Status.Conditions
}

// reports says whether gpu-gang schedules these members: they exist and
// each names one of its schedulers. kube-scheduler writes the status of the
// native PodGroups it schedules itself.
func (a nativePodGroups) reports(in observed) bool { return ours(a.schedulerNames, in.pods) }

// ours says whether gpu-gang schedules pods: they exist and each names one
// of schedulerNames (empty means DefaultSchedulerName).
func ours(schedulerNames []string, pods []corev1.Pod) bool {
	if len(schedulerNames) == 0 {
		schedulerNames = []string{DefaultSchedulerName}
	}
	for i := range pods {
		if !slices.Contains(schedulerNames, pods[i].Spec.SchedulerName) {
			return false
		}
	}
	return len(pods) > 0
}

func (nativePodGroups) write(pg *schedulingv1beta1.PodGroup, in observed) time.Duration {
	conds, recheck := computeNativeConditions(pg, in)
	pg.Status.Conditions = conds
	return recheck
}

// record has nothing to add: a native PodGroup has no phase, and the
// reconciler records the Events of the shared conditions.
func (nativePodGroups) record(events.EventRecorder, *schedulingv1beta1.PodGroup, *schedulingv1beta1.PodGroup) {
}

// computeNativeConditions derives a native PodGroup's conditions from what
// was observed, starting from its current ones, so that conditions of other
// types (DisruptionTarget) are kept. An invalid spec is said on
// PodGroupInitiallyScheduled unless it is already True for good.
func computeNativeConditions(pg *schedulingv1beta1.PodGroup, in observed) ([]metav1.Condition, time.Duration) {
	conds := make([]metav1.Condition, 0, len(pg.Status.Conditions)+3)
	for _, c := range pg.Status.Conditions {
		conds = append(conds, *c.DeepCopy())
	}
	set := conditionSetter(&conds, pg.Generation, in.now)
	// The requirement kube-scheduler checks is minCount members placed at
	// once; once met, the condition is terminal.
	initially := meta.IsStatusConditionTrue(conds, ConditionInitiallyScheduled)
	if in.invalid != nil {
		if !initially {
			invalidSpec(nativeScheduled, in.invalid, set)
		}
		return conds, 0
	}
	m := in.members
	if !initially {
		scheduled(nativeScheduled, m, set)
		initially = meta.IsStatusConditionTrue(conds, ConditionInitiallyScheduled)
	}
	recheck := membersCreated(conds, initially, m, in.now, in.grace,
		func() string { return nativeMissingMembersHint(pg, in.spec, m.present) }, set)
	ran := initially || meta.FindStatusCondition(conds, ConditionBelowMinMember) != nil
	belowMinMember(conds, ran, m, in.pods, in.lost, set)
	observedAt(conds, pg.Generation, ConditionInitiallyScheduled, ConditionMembersCreated, ConditionBelowMinMember)
	return conds, recheck
}

// nativeMissingMembersHint is missingMembersHint for a native PodGroup,
// which names the Workload it was made from rather than an owner.
func nativeMissingMembersHint(pg *schedulingv1beta1.PodGroup, spec *gang.Spec, present []*corev1.Pod) string {
	if w := spec.Workload; w != nil && len(pg.OwnerReferences) == 0 {
		return fmt.Sprintf("Check what creates the pods of Workload %s (template %s): it has not created the rest, perhaps because it creates some pods only after others run (which deadlocks with any gang scheduler), or because it is failing to create them; or lower spec.schedulingPolicy.gang.minCount.",
			w.Name, w.Template)
	}
	return missingMembersHint(pg, present, "spec.schedulingPolicy.gang.minCount")
}
