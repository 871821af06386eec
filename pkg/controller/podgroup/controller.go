// Package podgroup is gpu-gang's PodGroup status controller. It keeps the
// status of every scheduling.x-k8s.io/v1alpha1 PodGroup true to its pods:
// the phase (Pending, Scheduling, Running, Finished, Failed), the running,
// succeeded and failed counts, scheduleStartTime, observedGeneration and two
// conditions, MembersCreated and Scheduled, whose reasons say why a gang
// waits. It records an Event at each phase change, and a warning when a
// gang's members wait for others that are never going to be created.
//
// Where the API server serves Kubernetes' own PodGroups
// (scheduling.k8s.io/v1beta1), the NativeReconciler (native.go) keeps the
// conditions of those gpu-gang schedules: PodGroupInitiallyScheduled as
// kube-scheduler sets it, and MembersCreated and BelowMinMember with the
// meanings above, computed by the same functions.
//
// The scheduler plugin (pkg/coscheduling) decides; this controller reports.
// It runs in its own process, cmd/podgroup-controller, beside the
// scheduler.
package podgroup

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling/v1alpha1"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// Name is the controller's name in logs, metrics and as the reporting
// controller of its Events.
const Name = "podgroup-controller"

// PodGroupIndex is the field index of pods by the PodGroup they belong to.
// The cache keeps field indexes per namespace, so a list with this index
// must also say client.InNamespace to get one group's members.
const PodGroupIndex = "gpu-gang.x-k8s.io/pod-group"

// DefaultMissingMembersGrace is how long a gang's members may wait without
// any new member being created before the controller says the rest are
// missing. Operators create a gang's pods within seconds; a few minutes
// leaves room for a slow API server and for webhooks.
const DefaultMissingMembersGrace = 5 * time.Minute

// Reconciler computes and patches PodGroup status.
type Reconciler struct {
	// Client reads through the manager's cache, which must have
	// PodGroupIndex (SetupWithManager registers it).
	Client client.Client
	// Recorder records Events on PodGroups.
	Recorder events.EventRecorder
	// Clock is the time source; tests inject a fake one.
	Clock clock.PassiveClock
	// MissingMembersGrace is how long members may wait with no new member
	// created before the group is reported as missing members.
	MissingMembersGrace time.Duration

	// lost remembers members seen leaving while they held a node, to name
	// them while their gang runs below minMember.
	lost lostLedger
	// nodes remembers spot nodes, so that a member lost with one is named
	// a spot reclaim.
	nodes nodeLedger
}

var _ reconcile.Reconciler = &Reconciler{}

// IndexPodsByPodGroup is the PodGroupIndex extractor: the name of the
// scheduling.x-k8s.io PodGroup a pod belongs to. A pod that also names a
// native PodGroup belongs to that one alone (gang.Of), and is left out.
func IndexPodsByPodGroup(obj client.Object) []string {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil
	}
	if key, ok := gang.Of(pod); ok && key.API == gang.XK8s {
		return []string{key.Name}
	}
	return nil
}

// SetupWithManager registers the pod index on the manager's cache and the
// controller with the manager, with opts (MaxConcurrentReconciles is how
// many PodGroups are reconciled at once).
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, PodGroupIndex, IndexPodsByPodGroup); err != nil {
		return fmt.Errorf("indexing pods by PodGroup: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("podgroup").
		For(&v1alpha1.PodGroup{}).
		// A PodGroup's status is a function of its members: each change
		// to one that the status reads requeues its group. On an update
		// that moves a pod between groups, both are requeued.
		Watches(&corev1.Pod{}, r.memberHandler(), builder.WithPredicates(memberChanged)).
		// Only nodes' labels are read: a metadata watch keeps their specs
		// and statuses out of memory.
		Watches(&corev1.Node{}, r.nodeHandler(), builder.OnlyMetadata).
		WithOptions(opts).
		Complete(r)
}

// memberHandler requeues a member's PodGroup on every change that passes
// memberChanged, and remembers members that leave while they hold a node.
func (r *Reconciler) memberHandler() handler.EventHandler {
	enqueue := handler.EnqueueRequestsFromMapFunc(podToPodGroup)
	return handler.Funcs{
		CreateFunc: enqueue.Create,
		UpdateFunc: enqueue.Update,
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if pod, ok := e.Object.(*corev1.Pod); ok {
				gone, spot := r.nodes.spotReclaimed(pod.Spec.NodeName)
				r.lost.record(pod, gang.XK8s, gone || spot && lostWithNode(pod), r.Clock.Now())
			}
			enqueue.Delete(ctx, e, q)
		},
		GenericFunc: enqueue.Generic,
	}
}

func podToPodGroup(_ context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[scheduling.PodGroupLabel]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
}

// memberChanged lets through pod updates that change what the status is
// computed from, and every create and delete. Pods update often (probes,
// container restarts); most such updates do not concern the group.
var memberChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*corev1.Pod)
		cur, okNew := e.ObjectNew.(*corev1.Pod)
		if !okOld || !okNew {
			return true
		}
		return old.Labels[scheduling.PodGroupLabel] != cur.Labels[scheduling.PodGroupLabel] ||
			old.Status.Phase != cur.Status.Phase ||
			old.Spec.NodeName != cur.Spec.NodeName ||
			(old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil) ||
			!equality.Semantic.DeepEqual(podScheduled(old), podScheduled(cur))
	},
}

func podScheduled(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodScheduled {
			c := p.Status.Conditions[i]
			c.LastProbeTime = c.LastTransitionTime // times alone are no change
			return &c
		}
	}
	return nil
}

// Reconcile brings one PodGroup's status up to date with its pods.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logger := klog.FromContext(ctx)
	pg := &v1alpha1.PodGroup{}
	if err := r.Client.Get(ctx, req.NamespacedName, pg); err != nil {
		if apierrors.IsNotFound(err) {
			r.lost.forget(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(pg.Namespace), client.MatchingFields{PodGroupIndex: pg.Name}); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the members of PodGroup %s: %w", req.NamespacedName, err)
	}

	want := computeStatus(pg, pods.Items, r.lost.of(req.NamespacedName), r.Clock.Now(), r.grace())
	result := reconcile.Result{RequeueAfter: want.recheckAfter}
	if equality.Semantic.DeepEqual(pg.Status, want.status) {
		return result, nil
	}
	updated := pg.DeepCopy()
	updated.Status = want.status
	// The optimistic lock keeps a status computed from a stale cache from
	// overwriting a newer one; the write that made ours stale also
	// requeues the group through the watch.
	patch := client.MergeFromWithOptions(pg, client.MergeFromWithOptimisticLock{})
	if err := r.Client.Status().Patch(ctx, updated, patch); err != nil {
		if apierrors.IsConflict(err) {
			logger.V(4).Info("PodGroup changed while its status was computed; it is requeued by the change", "podGroup", klog.KObj(pg))
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("patching the status of PodGroup %s: %w", req.NamespacedName, err)
	}
	logger.V(2).Info("Updated PodGroup status", "podGroup", klog.KObj(pg), "phase", updated.Status.Phase,
		"running", updated.Status.Running, "succeeded", updated.Status.Succeeded, "failed", updated.Status.Failed)
	recordTransitions(r.Recorder, pg, updated)
	return result, nil
}

func (r *Reconciler) grace() time.Duration {
	if r.MissingMembersGrace > 0 {
		return r.MissingMembersGrace
	}
	return DefaultMissingMembersGrace
}
