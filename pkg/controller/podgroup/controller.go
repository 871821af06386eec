// Package podgroup is gpu-gang's PodGroup status controller. It keeps the
// status of every scheduling.x-k8s.io/v1alpha1 PodGroup true to its pods:
// the phase (Pending, Scheduling, Running, Finished, Failed), the running,
// succeeded and failed counts, scheduleStartTime, observedGeneration and two
// conditions, MembersCreated and Scheduled, whose reasons say why a gang
// waits. It records an Event at each phase change, and a warning when a
// gang's members wait for others that are never going to be created.
//
// Where the API server serves Kubernetes' own PodGroups
// (scheduling.k8s.io/v1beta1), it keeps the conditions of those gpu-gang
// schedules too: PodGroupInitiallyScheduled as kube-scheduler sets it, and
// MembersCreated and BelowMinMember with the meanings above. Where it also
// serves CompositePodGroups (scheduling.k8s.io/v1alpha3), it keeps theirs:
// CompositePodGroupInitiallyScheduled as the API documents it, and
// BelowMinMember counted in child groups at quorum (gang.TreeQuorumOf).
//
// One Reconciler serves every API, each through a small adapter (adapter.go;
// xk8s.go, native.go and composite.go): membership is gang.Of, counts and
// quorum are gang.Census, gang.QuorumOf and gang.TreeQuorumOf, and a spec
// gang.Spec.Validate (or a hierarchy gang.BuildTree) rejects is reported
// with its fix rather than mended.
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
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling/v1alpha1"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// Name is the controller's name in logs, metrics and as the reporting
// controller of its Events.
const Name = "podgroup-controller"

// DefaultMissingMembersGrace is how long a gang's members may wait without
// any new member being created before the controller says the rest are
// missing. Operators create a gang's pods within seconds; a few minutes
// leaves room for a slow API server and for webhooks.
const DefaultMissingMembersGrace = 5 * time.Minute

// Config is what a Reconciler of any API needs.
type Config struct {
	// Client reads through the manager's cache, which must have the API's
	// member index (SetupWithManager registers it).
	Client client.Client
	// Recorder records Events on PodGroups.
	Recorder events.EventRecorder
	// Clock is the time source; tests inject a fake one.
	Clock clock.PassiveClock
	// MissingMembersGrace is how long members may wait with no new member
	// created before the group is reported as missing members; zero means
	// DefaultMissingMembersGrace.
	MissingMembersGrace time.Duration
}

// Reconciler computes and patches the status of one API's PodGroups, of
// type T, from their members.
type Reconciler[T client.Object] struct {
	Config
	api adapter[T]

	// lost remembers members seen leaving while they held a node, to name
	// them while their gang runs below minMember. Each API's reconciler
	// keeps its own, so that two gangs of one name, one per API, keep
	// theirs apart.
	lost lostLedger
	// nodes remembers spot nodes, so that a member lost with one is named
	// a spot reclaim.
	nodes nodeLedger
}

var (
	_ reconcile.Reconciler = &Reconciler[*v1alpha1.PodGroup]{}
	_ reconcile.Reconciler = &Reconciler[*schedulingv1beta1.PodGroup]{}
	_ reconcile.Reconciler = &Reconciler[*schedulingv1alpha3.CompositePodGroup]{}
)

// NewPodGroupReconciler returns the Reconciler of scheduler-plugins
// PodGroups (scheduling.x-k8s.io/v1alpha1): phase, counts and conditions.
func NewPodGroupReconciler(cfg Config) *Reconciler[*v1alpha1.PodGroup] {
	return &Reconciler[*v1alpha1.PodGroup]{Config: cfg, api: podGroups{}}
}

// NewNativePodGroupReconciler returns the Reconciler of native PodGroups
// (scheduling.k8s.io/v1beta1) whose members name one of schedulerNames
// (empty means DefaultSchedulerName): their conditions, never their
// metadata.
func NewNativePodGroupReconciler(cfg Config, schedulerNames []string) *Reconciler[*schedulingv1beta1.PodGroup] {
	return &Reconciler[*schedulingv1beta1.PodGroup]{Config: cfg, api: nativePodGroups{schedulerNames: schedulerNames}}
}

// NewCompositePodGroupReconciler returns the Reconciler of CompositePodGroups
// (scheduling.k8s.io/v1alpha3) over native PodGroups whose members name one
// of schedulerNames (empty means DefaultSchedulerName): their conditions,
// never their metadata. It lists members through the native reconciler's
// index: set that one up first.
func NewCompositePodGroupReconciler(cfg Config, schedulerNames []string) *Reconciler[*schedulingv1alpha3.CompositePodGroup] {
	return &Reconciler[*schedulingv1alpha3.CompositePodGroup]{Config: cfg, api: compositePodGroups{schedulerNames: schedulerNames}}
}

// SetupWithManager registers the API's field indexes on the manager's cache
// and the controller with the manager, with opts (MaxConcurrentReconciles
// is how many PodGroups are reconciled at once). The manager's scheme must
// know T (Scheme does).
func (r *Reconciler[T]) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	for _, idx := range r.api.indexes() {
		if err := mgr.GetFieldIndexer().IndexField(ctx, idx.obj, idx.field, idx.extract); err != nil {
			return fmt.Errorf("indexing %T by %s: %w", idx.obj, idx.field, err)
		}
	}
	b := ctrl.NewControllerManagedBy(mgr).Named(r.api.name()).For(r.api.newObject())
	return r.api.watch(b, mgr.GetClient(), r.memberHandler(), r.nodes.handler(r.Clock)).
		WithOptions(opts).
		Complete(r)
}

// memberHandler requeues a member's PodGroup on every change that passes
// memberChanged, and remembers members that leave while they hold a node.
func (r *Reconciler[T]) memberHandler() handler.EventHandler {
	enqueue := handler.EnqueueRequestsFromMapFunc(requestsFor(r.api.api()))
	return handler.Funcs{
		CreateFunc: enqueue.Create,
		UpdateFunc: enqueue.Update,
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if pod, ok := e.Object.(*corev1.Pod); ok {
				gone, spot := r.nodes.spotReclaimed(pod.Spec.NodeName)
				r.lost.record(pod, r.api.api(), gone || spot && lostWithNode(pod), r.Clock.Now())
			}
			enqueue.Delete(ctx, e, q)
		},
		GenericFunc: enqueue.Generic,
	}
}

// memberChanged lets through pod updates that change what a status is
// computed from, and every create and delete. Pods update often (probes,
// container restarts); most such updates do not concern the group. A
// change of membership, of any API, is one: gang.Of says which gang a pod
// belongs to.
var memberChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*corev1.Pod)
		cur, okNew := e.ObjectNew.(*corev1.Pod)
		if !okOld || !okNew {
			return true
		}
		oldKey, oldIn := gang.Of(old)
		curKey, curIn := gang.Of(cur)
		return oldKey != curKey || oldIn != curIn ||
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
func (r *Reconciler[T]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logger := klog.FromContext(ctx)
	pg := r.api.newObject()
	if err := r.Client.Get(ctx, req.NamespacedName, pg); err != nil {
		if apierrors.IsNotFound(err) {
			r.lost.forget(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	in, err := r.api.observe(ctx, r.Client, pg, moment{now: r.Clock.Now(), lost: r.lost.of(req.NamespacedName), grace: r.grace()})
	if err != nil {
		return reconcile.Result{}, err
	}
	if !r.api.reports(in) {
		logger.V(5).Info("PodGroup's members are another scheduler's", "podGroup", klog.KObj(pg), "api", r.api.api())
		return reconcile.Result{}, nil
	}
	want := pg.DeepCopyObject().(T)
	result := reconcile.Result{RequeueAfter: r.api.write(want, in)}
	if equality.Semantic.DeepEqual(pg, want) {
		return result, nil
	}
	// The optimistic lock keeps a status computed from a stale cache from
	// overwriting a newer one; the write that made ours stale also
	// requeues the group through the watch.
	patch := client.MergeFromWithOptions(pg, client.MergeFromWithOptimisticLock{})
	if err := r.Client.Status().Patch(ctx, want, patch); err != nil {
		if apierrors.IsConflict(err) {
			logger.V(4).Info("PodGroup changed while its status was computed; it is requeued by the change", "podGroup", klog.KObj(pg), "api", r.api.api())
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("patching the status of PodGroup %s: %w", req.NamespacedName, err)
	}
	after := r.api.conditions(want)
	if logger.V(2).Enabled() {
		logger.V(2).Info("Updated PodGroup status", "podGroup", klog.KObj(pg), "api", r.api.api(), "conditions", summarize(after))
	}
	r.api.record(r.Recorder, pg, want)
	recordConditionTransitions(r.Recorder, want, r.api.conditions(pg), after)
	return result, nil
}

func (r *Reconciler[T]) grace() time.Duration {
	if r.MissingMembersGrace > 0 {
		return r.MissingMembersGrace
	}
	return DefaultMissingMembersGrace
}

// summarize renders conditions as Type=Status/Reason, in their order, for
// logs.
func summarize(conds []metav1.Condition) []string {
	out := make([]string, len(conds))
	for i, c := range conds {
		out[i] = fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason)
	}
	return out
}
