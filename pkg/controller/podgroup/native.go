package podgroup

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// NativePodGroupIndex is the field index of pods by the native PodGroup
// (scheduling.k8s.io/v1beta1) they belong to, through
// spec.schedulingGroup. As with PodGroupIndex, a list with it must also say
// client.InNamespace.
const NativePodGroupIndex = "gpu-gang.x-k8s.io/native-pod-group"

// Condition types and reasons kube-scheduler itself uses on native
// PodGroups (k8s.io/api/scheduling/v1beta1), which the NativeReconciler
// sets with the same meanings for the gangs gpu-gang schedules.
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
// NativeReconciler reports on unless told others: the profile
// manifests/scheduler-config.yaml runs.
const DefaultSchedulerName = "gpu-gang"

// NativeReconciler computes and patches the status conditions of native
// PodGroups (scheduling.k8s.io/v1beta1) whose members gpu-gang schedules:
//   - PodGroupInitiallyScheduled, as kube-scheduler sets it for the gangs
//     it schedules: True (reason Scheduled) once minCount members are bound,
//     for good; until then False, with reason Unschedulable and the
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
type NativeReconciler struct {
	// Client reads through the manager's cache, which must have
	// NativePodGroupIndex (SetupWithManager registers it).
	Client client.Client
	// Recorder records Events on PodGroups.
	Recorder events.EventRecorder
	// Clock is the time source; tests inject a fake one.
	Clock clock.PassiveClock
	// MissingMembersGrace: see Reconciler.MissingMembersGrace.
	MissingMembersGrace time.Duration
	// SchedulerNames are the scheduler names gpu-gang runs; empty means
	// DefaultSchedulerName.
	SchedulerNames []string

	lost  lostLedger
	nodes nodeLedger
}

var _ reconcile.Reconciler = &NativeReconciler{}

// IndexPodsByNativePodGroup is the NativePodGroupIndex extractor: the name
// of the native PodGroup a pod names in spec.schedulingGroup.
func IndexPodsByNativePodGroup(obj client.Object) []string {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil
	}
	if key, ok := gang.Of(pod); ok && key.API == gang.Native {
		return []string{key.Name}
	}
	return nil
}

// SetupWithManager registers the index and the controller with the manager.
// The manager's scheme must know scheduling.k8s.io/v1beta1 (Scheme does).
func (r *NativeReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, NativePodGroupIndex, IndexPodsByNativePodGroup); err != nil {
		return fmt.Errorf("indexing pods by native PodGroup: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("native-podgroup").
		For(&schedulingv1beta1.PodGroup{}).
		Watches(&corev1.Pod{}, r.memberHandler(), builder.WithPredicates(memberChanged)).
		// Spot nodes, to name a member lost with one, as for the
		// scheduler-plugins reconciler.
		Watches(&corev1.Node{}, r.nodes.handler(r.Clock), builder.OnlyMetadata).
		WithOptions(opts).
		Complete(r)
}

// memberHandler requeues a member's native PodGroup on every change that
// passes memberChanged, and remembers members that leave while they hold a
// node.
func (r *NativeReconciler) memberHandler() handler.EventHandler {
	enqueue := handler.EnqueueRequestsFromMapFunc(podToNativePodGroup)
	return handler.Funcs{
		CreateFunc: enqueue.Create,
		UpdateFunc: enqueue.Update,
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if pod, ok := e.Object.(*corev1.Pod); ok {
				gone, spot := r.nodes.spotReclaimed(pod.Spec.NodeName)
				r.lost.record(pod, gang.Native, gone || spot && lostWithNode(pod), r.Clock.Now())
			}
			enqueue.Delete(ctx, e, q)
		},
		GenericFunc: enqueue.Generic,
	}
}

func podToNativePodGroup(_ context.Context, obj client.Object) []reconcile.Request {
	if names := IndexPodsByNativePodGroup(obj); len(names) == 1 {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: names[0]}}}
	}
	return nil
}

// Reconcile brings one native PodGroup's conditions up to date with its pods.
func (r *NativeReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logger := klog.FromContext(ctx)
	pg := &schedulingv1beta1.PodGroup{}
	if err := r.Client.Get(ctx, req.NamespacedName, pg); err != nil {
		if apierrors.IsNotFound(err) {
			r.lost.forget(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(pg.Namespace), client.MatchingFields{NativePodGroupIndex: pg.Name}); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the members of PodGroup %s: %w", req.NamespacedName, err)
	}
	if !r.schedules(pods.Items) {
		logger.V(5).Info("Native PodGroup's members are not gpu-gang's", "podGroup", klog.KObj(pg))
		return reconcile.Result{}, nil
	}

	want := computeNativeConditions(pg, pods.Items, r.lost.of(req.NamespacedName), r.Clock.Now(), r.grace())
	result := reconcile.Result{RequeueAfter: want.recheckAfter}
	if equality.Semantic.DeepEqual(pg.Status.Conditions, want.conditions) {
		return result, nil
	}
	updated := pg.DeepCopy()
	updated.Status.Conditions = want.conditions
	patch := client.MergeFromWithOptions(pg, client.MergeFromWithOptimisticLock{})
	if err := r.Client.Status().Patch(ctx, updated, patch); err != nil {
		if apierrors.IsConflict(err) {
			logger.V(4).Info("PodGroup changed while its status was computed; it is requeued by the change", "podGroup", klog.KObj(pg))
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("patching the status of PodGroup %s: %w", req.NamespacedName, err)
	}
	logger.V(2).Info("Updated native PodGroup status", "podGroup", klog.KObj(pg),
		"initiallyScheduled", meta.IsStatusConditionTrue(updated.Status.Conditions, ConditionInitiallyScheduled))
	recordConditionTransitions(r.Recorder, updated, pg.Status.Conditions, updated.Status.Conditions)
	return result, nil
}

// schedules reports whether gpu-gang schedules these members: they exist
// and each names one of its schedulers. kube-scheduler writes the status of
// the native PodGroups it schedules itself.
func (r *NativeReconciler) schedules(pods []corev1.Pod) bool {
	names := r.SchedulerNames
	if len(names) == 0 {
		names = []string{DefaultSchedulerName}
	}
	for i := range pods {
		if !slices.Contains(names, pods[i].Spec.SchedulerName) {
			return false
		}
	}
	return len(pods) > 0
}

func (r *NativeReconciler) grace() time.Duration {
	if r.MissingMembersGrace > 0 {
		return r.MissingMembersGrace
	}
	return DefaultMissingMembersGrace
}

// nativeDesired is the conditions a native PodGroup should have, and when
// to look again even if nothing changes.
type nativeDesired struct {
	conditions   []metav1.Condition
	recheckAfter time.Duration
}

// computeNativeConditions derives a native PodGroup's conditions from its
// pods at now, starting from its current ones, so that conditions of other
// types (DisruptionTarget) are kept.
func computeNativeConditions(pg *schedulingv1beta1.PodGroup, pods []corev1.Pod, lost []lostMember, now time.Time, grace time.Duration) nativeDesired {
	spec := gang.FromNativePodGroup(pg)
	minMember := max(spec.MinMember, 1)
	conds := make([]metav1.Condition, 0, len(pg.Status.Conditions)+3)
	for _, c := range pg.Status.Conditions {
		conds = append(conds, *c.DeepCopy())
	}
	set := conditionSetter(&conds, pg.Generation, now)
	o := observe(pods)
	have := int32(len(o.present))

	// The requirement kube-scheduler checks is minCount members placed at
	// once; once met, the condition is terminal.
	initially := meta.IsStatusConditionTrue(conds, ConditionInitiallyScheduled)
	if !initially {
		switch {
		case o.bound >= minMember:
			set(ConditionInitiallyScheduled, metav1.ConditionTrue, ReasonScheduled,
				fmt.Sprintf("%d/%d members bound to nodes", o.bound, minMember))
			initially = true
		case have < minMember:
			set(ConditionInitiallyScheduled, metav1.ConditionFalse, ReasonWaitingForMembers,
				fmt.Sprintf("%d/%d members bound; the scheduler starts placing members once %d exist", o.bound, minMember, minMember))
		default:
			if pod, msg, ok := unschedulable(o.present); ok {
				set(ConditionInitiallyScheduled, metav1.ConditionFalse, schedulingv1beta1.PodGroupReasonUnschedulable,
					truncate(fmt.Sprintf("%d/%d members bound; pod %s: %s", o.bound, minMember, pod, msg), maxMessage))
			} else {
				set(ConditionInitiallyScheduled, metav1.ConditionFalse, ReasonNotScheduled,
					fmt.Sprintf("%d/%d members bound", o.bound, minMember))
			}
		}
	}

	var out nativeDesired
	out.recheckAfter = membersCreated(conds, initially, minMember, o, now, grace,
		func() string { return nativeMissingMembersHint(pg, spec, o.present) }, set)
	ran := initially || meta.FindStatusCondition(conds, ConditionBelowMinMember) != nil
	belowMinMember(conds, ran, minMember, pods, lost, set)
	for i := range conds {
		switch conds[i].Type {
		case ConditionInitiallyScheduled, ConditionMembersCreated, ConditionBelowMinMember:
			conds[i].ObservedGeneration = pg.Generation
		}
	}
	out.conditions = conds
	return out
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
