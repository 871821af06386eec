package podgroup

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// adapter is one PodGroup API as the status reconciler sees it. The
// reconciler owns everything the APIs share: reading the object, patching,
// the Events of the shared conditions and the controller's setup. An
// adapter says only what differs: the type, what its status is computed
// from and how it is read (a PodGroup's members through the index of its
// API; a CompositePodGroup's tree), and which status fields and conditions
// it writes. Another PodGroup API is one more adapter.
type adapter[T client.Object] interface {
	// api is the gang API the adapter reads.
	api() gang.API
	// name names the controller in logs and metrics.
	name() string
	// newObject returns an empty object to read into.
	newObject() T
	// indexes are the field indexes of the manager's cache that observe
	// lists with; SetupWithManager registers them.
	indexes() []fieldIndex
	// watch adds to b the watches that requeue an object when what its
	// status is computed from changes. members is the reconciler's handler
	// of member pods, which remembers members lost; nodes its handler of
	// node metadata, which remembers spot nodes.
	watch(b *builder.Builder, c client.Reader, members, nodes handler.EventHandler) *builder.Builder
	// observe reads what pg's status is computed from, through c, at.
	observe(ctx context.Context, c client.Reader, pg T, at moment) (observed, error)
	// conditions are pg's status conditions.
	conditions(pg T) []metav1.Condition
	// reports says whether this controller keeps the status of the object
	// it observed; another scheduler may keep it instead.
	reports(in observed) bool
	// write sets pg's status from what the reconciler observed, starting
	// from the status pg has, and returns when to look again even if
	// nothing changes (zero: only on a change).
	write(pg T, in observed) (recheckAfter time.Duration)
	// record records the API's own Events for the change from before to
	// after, once the patch succeeded; the reconciler records those of the
	// conditions every API shares.
	record(rec events.EventRecorder, before, after T)
}

// fieldIndex is a field index of the manager's cache.
type fieldIndex struct {
	obj     client.Object
	field   string
	extract client.IndexerFunc
}

// moment is what a reconcile knows besides the objects: when it runs, the
// members of the group seen leaving while they held a node, and the grace
// period of missing members.
type moment struct {
	now   time.Time
	lost  []lostMember
	grace time.Duration
}

// observed is what the reconciler read for one object, at now.
type observed struct {
	spec *gang.Spec
	// invalid is why spec cannot be honoured (gang.Spec.Validate), or nil.
	// While it is set, members is empty: without a quorum no quorum
	// condition can be judged.
	invalid error
	// pods are every pod the index lists for the group, those being
	// deleted included; for a composite, those of every PodGroup under it.
	pods    []corev1.Pod
	members members
	// tree is what a composite's status is computed from; nil for a
	// PodGroup.
	tree *treeObserved
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

// memberIndex is the field index of pods by the PodGroup of api they
// belong to, named index.
func memberIndex(api gang.API, index string) []fieldIndex {
	return []fieldIndex{{obj: &corev1.Pod{}, field: index, extract: indexMembers(api)}}
}

// watchMembers is the watch of a PodGroup API: its member pods and nodes.
func watchMembers(b *builder.Builder, members, nodes handler.EventHandler) *builder.Builder {
	return b.
		// A PodGroup's status is a function of its members: each change
		// to one that the status reads requeues its group. On an update
		// that moves a pod between groups, both are requeued.
		Watches(&corev1.Pod{}, members, builder.WithPredicates(memberChanged)).
		// Spot nodes, to name a member lost with one. Only nodes' labels
		// are read: a metadata watch keeps their specs and statuses out of
		// memory. Nodes requeue no PodGroup themselves: their pods do when
		// they go.
		Watches(&corev1.Node{}, nodes, builder.OnlyMetadata)
}

// observeMembers lists pg's members through the index and observes them
// (observe).
func observeMembers(ctx context.Context, c client.Reader, index string, spec *gang.Spec, pg client.Object, at moment) (observed, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(pg.GetNamespace()), client.MatchingFields{index: pg.GetName()}); err != nil {
		return observed{}, fmt.Errorf("listing the members of %s: %w", spec.Key, err)
	}
	return observe(spec, pods.Items, at.lost, at.now, at.grace), nil
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
