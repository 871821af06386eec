package podgroup

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// adapter is one PodGroup API as the status reconciler sees it. The
// reconciler owns everything the APIs share: reading the PodGroup and its
// members, counting them (gang.Census), patching, the Events of the shared
// conditions and the watches. An adapter says only what differs: the type,
// the index of its members, how its object becomes a gang.Spec, and which
// status fields and conditions it writes. Another PodGroup API is one more
// adapter.
type adapter[T client.Object] interface {
	// api is the gang API the adapter reads: members are the pods whose
	// gang.Of names a PodGroup of it.
	api() gang.API
	// name names the controller in logs and metrics.
	name() string
	// index is the name of the field index of pods by the PodGroup of this
	// API they belong to (its extractor is indexMembers(api())).
	index() string
	// newObject returns an empty PodGroup to read into.
	newObject() T
	// spec adapts a PodGroup to the gang model (gang.FromPodGroup,
	// gang.FromNativePodGroup, ...).
	spec(pg T) *gang.Spec
	// conditions are pg's status conditions.
	conditions(pg T) []metav1.Condition
	// reports says whether this controller keeps the status of a PodGroup
	// with these members; another scheduler may keep it instead.
	reports(members []corev1.Pod) bool
	// write sets pg's status from what the reconciler observed, starting
	// from the status pg has, and returns when to look again even if
	// nothing changes (zero: only on a change).
	write(pg T, in observed) (recheckAfter time.Duration)
	// record records the API's own Events for the change from before to
	// after, once the patch succeeded; the reconciler records those of the
	// conditions every API shares.
	record(rec events.EventRecorder, before, after T)
}

// observed is what the reconciler read for one PodGroup, at now.
type observed struct {
	spec *gang.Spec
	// invalid is why spec cannot be honoured (gang.Spec.Validate), or nil.
	// While it is set, members is empty: without a quorum no quorum
	// condition can be judged.
	invalid error
	// pods are every pod the index lists for the group, those being
	// deleted included.
	pods    []corev1.Pod
	members members
	// lost are the members seen leaving while they held a node.
	lost  []lostMember
	now   time.Time
	grace time.Duration
}

// observe validates spec and counts the group's pods against its quorum.
func observe(spec *gang.Spec, pods []corev1.Pod, lost []lostMember, now time.Time, grace time.Duration) observed {
	in := observed{spec: spec, pods: pods, lost: lost, now: now, grace: grace}
	if err := spec.Validate(); err != nil {
		in.invalid = err
		return in
	}
	in.members = countMembers(spec.MinMember, pods)
	return in
}

// memberOf returns the PodGroup of api that obj, a pod, belongs to.
// Membership is pkg/gang's rule (gang.Of): a pod that names a native
// PodGroup belongs to it alone, whatever label it carries.
func memberOf(obj client.Object, api gang.API) (gang.Key, bool) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return gang.Key{}, false
	}
	key, ok := gang.Of(pod)
	return key, ok && key.API == api
}

// indexMembers is the extractor of an API's member index: the name of the
// PodGroup of api a pod belongs to. The cache keeps field indexes per
// namespace, so a list with it must also say client.InNamespace.
func indexMembers(api gang.API) client.IndexerFunc {
	return func(obj client.Object) []string {
		if key, ok := memberOf(obj, api); ok {
			return []string{key.Name}
		}
		return nil
	}
}

// requestsFor maps a pod to the PodGroup of api it belongs to.
func requestsFor(api gang.API) handler.MapFunc {
	return func(_ context.Context, obj client.Object) []reconcile.Request {
		if key, ok := memberOf(obj, api); ok {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: key.Namespace, Name: key.Name}}}
		}
		return nil
	}
}
