package podgroup

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// ParentIndex is the field index of native PodGroups and of
// CompositePodGroups by the parent composite they name
// (spec.parentCompositePodGroupName). As with the member indexes, a list
// with it must also say client.InNamespace.
const ParentIndex = "gpu-gang.x-k8s.io/parent-composite"

// compositePodGroups adapts CompositePodGroups (scheduling.k8s.io/v1alpha3)
// over native PodGroups whose members gpu-gang schedules. A composite's
// status is computed from its tree (gang.BuildTree, read from the cache)
// and the quorum pkg/gang decides for it (gang.TreeQuorumOf), as the
// scheduler admits it. The controller keeps two conditions:
//   - CompositePodGroupInitiallyScheduled, as the API documents it: True
//     (reason Scheduled) once minGroupCount children are each at quorum on
//     nodes, for good; until then False, with reason WaitingForMembers
//     while too few children have their members, Unschedulable with the
//     scheduler's message once it could not place a member, NotScheduled,
//     Invalid for a layout that cannot be honoured (a cycle, more than four
//     levels, PodGroups of another Workload, an invalid child) or
//     ParentMissing while a parent does not exist;
//   - BelowMinMember, once the composite ran: True while fewer than
//     minGroupCount children are at quorum on nodes, naming those below.
//
// The PodGroups under it keep theirs through the native adapter, each with
// its own quorum. It never touches metadata, and leaves alone a composite
// whose members name another scheduler.
type compositePodGroups struct {
	// schedulerNames are the scheduler names gpu-gang runs; empty means
	// DefaultSchedulerName.
	schedulerNames []string
}

var _ adapter[*schedulingv1alpha3.CompositePodGroup] = compositePodGroups{}

// treeObserved is what a composite's status is computed from.
type treeObserved struct {
	composite *gang.CompositeSpec
	// tree and quorum are the composite's subtree and its quorum at each
	// node; nil when invalid is set.
	tree   *gang.Tree
	quorum []gang.GroupQuorum
	// invalid is why the tree cannot be honoured (gang.ErrInvalidHierarchy)
	// or is not whole yet (gang.ErrMissingParent).
	invalid error
}

func (compositePodGroups) api() gang.API { return gang.Composite }
func (compositePodGroups) name() string  { return "composite-podgroup" }
func (compositePodGroups) newObject() *schedulingv1alpha3.CompositePodGroup {
	return &schedulingv1alpha3.CompositePodGroup{}
}
func (compositePodGroups) conditions(c *schedulingv1alpha3.CompositePodGroup) []metav1.Condition {
	return c.Status.Conditions
}
func (a compositePodGroups) reports(in observed) bool { return ours(a.schedulerNames, in.pods) }

// indexes are the children of a composite by parent. observe also lists the
// members of each PodGroup through NativePodGroupIndex, which the native
// reconciler registers: NewManager sets that one up first.
func (compositePodGroups) indexes() []fieldIndex {
	return []fieldIndex{
		{obj: &schedulingv1beta1.PodGroup{}, field: ParentIndex, extract: func(o client.Object) []string {
			if pg, ok := o.(*schedulingv1beta1.PodGroup); ok {
				return nonEmpty(gang.FromNativePodGroup(pg).Parent)
			}
			return nil
		}},
		{obj: &schedulingv1alpha3.CompositePodGroup{}, field: ParentIndex, extract: func(o client.Object) []string {
			if c, ok := o.(*schedulingv1alpha3.CompositePodGroup); ok {
				return nonEmpty(gang.FromCompositePodGroup(c).Parent)
			}
			return nil
		}},
	}
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// watch requeues every composite above a changed child composite, PodGroup
// or member pod: each one's status is a function of its whole subtree.
func (compositePodGroups) watch(b *builder.Builder, c client.Reader, _, _ handler.EventHandler) *builder.Builder {
	up := func(ctx context.Context, key gang.Key) []reconcile.Request { return ancestors(ctx, c, key) }
	return b.
		Watches(&schedulingv1alpha3.CompositePodGroup{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return up(ctx, gang.Key{API: gang.Composite, Namespace: o.GetNamespace(), Name: o.GetName()})
		})).
		Watches(&schedulingv1beta1.PodGroup{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return up(ctx, gang.Key{API: gang.Native, Namespace: o.GetNamespace(), Name: o.GetName()})
		})).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			if key, ok := memberOf(o, gang.Native); ok {
				return up(ctx, key)
			}
			return nil
		}), builder.WithPredicates(memberChanged))
}

// ancestors requeues the composites above key. A hierarchy the walk cannot
// finish (a missing parent, a cycle) requeues the nearest parent, whose
// status says so.
func ancestors(ctx context.Context, c client.Reader, key gang.Key) []reconcile.Request {
	r := cacheReader{ctx: ctx, c: c}
	path, err := gang.Ancestors(r, key)
	if err != nil {
		var parent string
		if key.API == gang.Native {
			if s, err := r.PodGroup(key.Namespace, key.Name); err == nil {
				parent = s.Parent
			}
		} else if cs, err := r.Composite(key.Namespace, key.Name); err == nil {
			parent = cs.Parent
		}
		if parent == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: key.Namespace, Name: parent}}}
	}
	out := make([]reconcile.Request, len(path))
	for i, cs := range path {
		out[i] = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: cs.Key.Namespace, Name: cs.Key.Name}}
	}
	return out
}

// observe reads the composite's tree from the cache and counts the members
// of each PodGroup in it. A tree that cannot be honoured is observed as
// such, with the members of the composite's own PodGroups, which say whose
// status it is.
func (compositePodGroups) observe(ctx context.Context, c client.Reader, cpg *schedulingv1alpha3.CompositePodGroup, at moment) (observed, error) {
	in := observed{now: at.now, grace: at.grace, tree: &treeObserved{composite: gang.FromCompositePodGroup(cpg)}}
	r := cacheReader{ctx: ctx, c: c}
	key := in.tree.composite.Key
	tree, err := gang.BuildTree(r, key)
	if err != nil {
		if !errors.Is(err, gang.ErrInvalidHierarchy) && !errors.Is(err, gang.ErrMissingParent) {
			return observed{}, fmt.Errorf("reading the tree of %s: %w", key, err)
		}
		in.tree.invalid = err
		_, specs, err := r.Children(key.Namespace, key.Name)
		if err != nil {
			return observed{}, err
		}
		for _, s := range specs {
			pods, err := membersOf(ctx, c, s.Key)
			if err != nil {
				return observed{}, err
			}
			in.pods = append(in.pods, pods...)
		}
		return in, nil
	}
	census := map[gang.Key]gang.Census{}
	for _, i := range tree.Leaves() {
		key := tree.Nodes[i].Key
		pods, err := membersOf(ctx, c, key)
		if err != nil {
			return observed{}, err
		}
		in.pods = append(in.pods, pods...)
		var cn gang.Census
		for j := range pods {
			cn.Add(&pods[j])
		}
		census[key] = cn
	}
	in.tree.tree = tree
	in.tree.quorum = gang.TreeQuorumOf(tree, func(k gang.Key) gang.Census { return census[k] })
	return in, nil
}

// membersOf lists the members of a native PodGroup.
func membersOf(ctx context.Context, c client.Reader, key gang.Key) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(key.Namespace), client.MatchingFields{NativePodGroupIndex: key.Name}); err != nil {
		return nil, fmt.Errorf("listing the members of %s: %w", key, err)
	}
	return pods.Items, nil
}

func (compositePodGroups) write(cpg *schedulingv1alpha3.CompositePodGroup, in observed) time.Duration {
	cpg.Status.Conditions = computeCompositeConditions(cpg, in)
	return 0
}

// record has nothing to add: a composite has no phase, and the reconciler
// records the Events of the shared conditions.
func (compositePodGroups) record(events.EventRecorder, *schedulingv1alpha3.CompositePodGroup, *schedulingv1alpha3.CompositePodGroup) {
}

// cacheReader reads hierarchies from the manager's cache, for pkg/gang.
type cacheReader struct {
	ctx context.Context
	c   client.Reader
}

var _ gang.HierarchyReader = cacheReader{}

func (r cacheReader) PodGroup(namespace, name string) (*gang.Spec, error) {
	var pg schedulingv1beta1.PodGroup
	if err := r.c.Get(r.ctx, types.NamespacedName{Namespace: namespace, Name: name}, &pg); err != nil {
		return nil, err
	}
	return gang.FromNativePodGroup(&pg), nil
}

func (r cacheReader) Composite(namespace, name string) (*gang.CompositeSpec, error) {
	var cpg schedulingv1alpha3.CompositePodGroup
	if err := r.c.Get(r.ctx, types.NamespacedName{Namespace: namespace, Name: name}, &cpg); err != nil {
		return nil, err
	}
	return gang.FromCompositePodGroup(&cpg), nil
}

func (r cacheReader) Children(namespace, parent string) ([]*gang.CompositeSpec, []*gang.Spec, error) {
	opts := []client.ListOption{client.InNamespace(namespace), client.MatchingFields{ParentIndex: parent}}
	var cpgs schedulingv1alpha3.CompositePodGroupList
	if err := r.c.List(r.ctx, &cpgs, opts...); err != nil {
		return nil, nil, fmt.Errorf("listing the CompositePodGroups under %s/%s: %w", namespace, parent, err)
	}
	var pgs schedulingv1beta1.PodGroupList
	if err := r.c.List(r.ctx, &pgs, opts...); err != nil {
		return nil, nil, fmt.Errorf("listing the PodGroups under %s/%s: %w", namespace, parent, err)
	}
	composites := make([]*gang.CompositeSpec, len(cpgs.Items))
	for i := range cpgs.Items {
		composites[i] = gang.FromCompositePodGroup(&cpgs.Items[i])
	}
	specs := make([]*gang.Spec, len(pgs.Items))
	for i := range pgs.Items {
		specs[i] = gang.FromNativePodGroup(&pgs.Items[i])
	}
	return composites, specs, nil
}
