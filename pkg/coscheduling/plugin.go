// Package coscheduling is gpu-gang's gang plugin: the pods of a PodGroup
// start together or not at all, and a running gang heals. A PodGroup is
// scheduler-plugins' (scheduling.x-k8s.io/v1alpha1, members labelled
// scheduling.x-k8s.io/pod-group) or Kubernetes' own (scheduling.k8s.io/v1beta1,
// members naming it in spec.schedulingGroup); source.go reads both into one
// gang model, and nothing after it knows which API a gang came from.
//
// A gang moves through the extension points like this (one file each):
//   - queue.go: QueueSort keeps a gang's members next to each other, in
//     rank order; PreEnqueue holds members until the PodGroup exists and
//     has minMember members, so no scheduling cycle is spent on a gang
//     without quorum.
//   - filter.go: PreFilter of the first member plans the whole gang, node
//     by node, in free capacity less what other gangs hold, on nodes every
//     Filter plugin of the profile accepts (feasibility.go), and holds the
//     plan's capacity (plan.go). A gang that does not fit holds nothing,
//     except the head of the queue, for a bounded time (hold.go). Filter
//     keeps other pods out of held capacity; PostFilter learns from a
//     member that Filter turned away where its plan put it.
//   - preempt.go, evict.go: a gang that does not fit, or a plain pod,
//     preempts pods of strictly lower priority in PostFilter, whole gangs
//     only (or members above minMember), inside one topology domain
//     (package preemption decides), and holds the freed room for itself.
//   - permit.go: Reserve/Unreserve count members; Permit holds them until
//     quorum is reserved, then lets them all bind. A timeout, a failed or a
//     deleted member rejects every waiting sibling.
//
// Once a gang has reached quorum it is running: members that reappear
// (replacements of evicted or deleted pods, new members of an elastic gang)
// schedule one by one, next to the gang's other members, without waiting for
// a quorum again.
package coscheduling

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	schedulinginformers "k8s.io/client-go/informers/scheduling/v1beta1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/utils/clock"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pglisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
	"github.com/gpu-gang/gpu-gang/pkg/apis/config/scheme"
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/preemption"
	"github.com/gpu-gang/gpu-gang/pkg/topology"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = "Coscheduling"

// Status messages for rejections people will read in pod conditions.
const (
	// ErrReasonHeld: the node's free capacity is held for gangs in flight.
	ErrReasonHeld = "capacity on this node is held for a gang that is being placed"
	// ErrReasonNoSlot: the gang's plan has no place for this member's shape.
	ErrReasonNoSlot = "the gang's plan has no place left for this member; it schedules once the gang reaches quorum"
)

// Plugin implements gang admission.
type Plugin struct {
	handle fwk.Handle
	args   *config.CoschedulingArgs
	clock  clock.WithTickerAndDelayedExecution
	// podIndex is the scheduler's pod informer, indexed by gang. It holds
	// no finished pods.
	podIndex cache.Indexer
	// finished holds succeeded pods, indexed by gang: they count towards
	// quorum, and the scheduler's own informer leaves them out.
	finished cache.Indexer
	// sources reads gangs, one API each (source.go).
	sources sources
	// nodeLister and podLister read the scheduler's informers, which run
	// ahead of a cycle's snapshot.
	nodeLister corelisters.NodeLister
	podLister  corelisters.PodLister
	planner    placement.Planner
	// runner runs the profile's PreFilter plugins for members being
	// planned; nil when the handle cannot (see feasibility.go).
	runner preFilterRunner
	gangs  *gangs
	events *eventRecorder
	// decider chooses preemption victims (preempt.go); nil when the
	// planner cannot give it a topology tree, and then nothing is
	// preempted.
	decider   decider
	pdbLister policylisters.PodDisruptionBudgetLister
	// nodeGeneration changes whenever a node is added or deleted or its
	// labels change, so planners may cache what they derive from labels.
	nodeGeneration atomic.Uint64
	// logger is for work that outlives a scheduling cycle (timers).
	logger klog.Logger
}

var (
	_ fwk.QueueSortPlugin   = &Plugin{}
	_ fwk.PreEnqueuePlugin  = &Plugin{}
	_ fwk.PreFilterPlugin   = &Plugin{}
	_ fwk.FilterPlugin      = &Plugin{}
	_ fwk.PostFilterPlugin  = &Plugin{}
	_ fwk.ReservePlugin     = &Plugin{}
	_ fwk.PermitPlugin      = &Plugin{}
	_ fwk.EnqueueExtensions = &Plugin{}
)

// New builds the plugin from its args. It starts a PodGroup informer on a
// JSON client (PodGroups are a CRD, which protobuf cannot carry) and fails if
// the PodGroup API is not served. It asks discovery whether Kubernetes' own
// PodGroups are served, and watches them if they are and this scheduler may
// schedule them (see gang.DecideNative); it says once which.
func New(ctx context.Context, obj runtime.Object, handle fwk.Handle) (fwk.Plugin, error) {
	args, err := scheme.DecodeCoschedulingArgs(obj, field.NewPath("pluginConfig").Key(Name).Child("args"))
	if err != nil {
		return nil, err
	}
	pgLister, informer, err := gang.StartPodGroupInformer(ctx, handle.KubeConfig(), nil)
	if err != nil {
		return nil, err
	}
	levels, err := scheduling.ResolveLevels(args.TopologyPreset, args.TopologyLevels)
	if err != nil {
		return nil, err // validation already named the field
	}
	planner, err := topology.NewPlanner(levels)
	if err != nil {
		return nil, err
	}
	native, note, err := gang.DecideNative(ctx, handle.ClientSet().Discovery(), utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload))
	if err != nil {
		return nil, err
	}
	pl, err := newPlugin(ctx, args, handle, pgLister, informer, clock.RealClock{}, planner)
	if err != nil {
		return nil, err
	}
	logger := klog.FromContext(ctx)
	if !native {
		pl.ignoreNative(note)
		logger.Info("Native PodGroups (scheduling.k8s.io/v1beta1) are ignored", "reason", note)
		return pl, nil
	}
	// The scheduler's own informer factory starts the informer, and waits
	// for it to sync before the first scheduling cycle.
	if err := pl.scheduleNative(handle.SharedInformerFactory().Scheduling().V1beta1().PodGroups()); err != nil {
		return nil, err
	}
	logger.Info("Native PodGroups (scheduling.k8s.io/v1beta1) are scheduled as gangs", "reason", note)
	return pl, nil
}

// scheduleNative makes native PodGroups a source of gangs, read from the
// informer, and follows their changes.
func (pl *Plugin) scheduleNative(informer schedulinginformers.PodGroupInformer) error {
	pl.sources[gang.Native] = nativeSource{lister: informer.Lister()}
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    pl.onNativePodGroupAdd,
		UpdateFunc: pl.onNativePodGroupUpdate,
		DeleteFunc: pl.onNativePodGroupDelete,
	}); err != nil {
		return fmt.Errorf("watching native PodGroups: %w", err)
	}
	return nil
}

// ignoreNative leaves native PodGroups unwatched: pods that name one are
// held with an Event that gives note.
func (pl *Plugin) ignoreNative(note string) {
	pl.sources[gang.Native] = unwatched{why: note}
}

// newPlugin wires the plugin to its informers. Tests call it with fake
// informers and a fake clock.
func newPlugin(ctx context.Context, args *config.CoschedulingArgs, handle fwk.Handle, pgLister pglisters.PodGroupLister,
	pgInformer cache.SharedIndexInformer, c clock.WithTickerAndDelayedExecution, planner placement.Planner) (*Plugin, error) {
	pl := &Plugin{
		handle:  handle,
		args:    args,
		clock:   c,
		sources: sources{gang.XK8s: xk8sSource{lister: pgLister}, gang.Native: unwatched{why: "native PodGroups are not watched"}},
		planner: planner,
		gangs:   newGangs(c),
		events:  newEventRecorder(handle.EventRecorder(), c),
		logger:  klog.FromContext(ctx).WithValues("plugin", Name),
	}
	if r, ok := handle.(preFilterRunner); ok {
		pl.runner = r
	}
	if trees, ok := planner.(preemption.TreeSource); ok {
		pl.decider = preemption.NewEngine(planner, trees)
	}
	// Asking for the lister registers the informer, which the scheduler
	// starts with its others once every plugin is built.
	pl.pdbLister = handle.SharedInformerFactory().Policy().V1().PodDisruptionBudgets().Lister()
	pl.nodeLister = handle.SharedInformerFactory().Core().V1().Nodes().Lister()
	pl.podLister = handle.SharedInformerFactory().Core().V1().Pods().Lister()
	podInformer := handle.SharedInformerFactory().Core().V1().Pods().Informer()
	// Members are looked up by gang on every PreEnqueue and PreFilter; an
	// index keeps that from scanning the whole namespace.
	if err := podInformer.AddIndexers(cache.Indexers{gangIndex: indexByGang}); err != nil {
		return nil, fmt.Errorf("indexing pods by gang: %w", err)
	}
	pl.podIndex = podInformer.GetIndexer()
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    pl.onPodAdd,
		UpdateFunc: pl.onPodUpdate,
		DeleteFunc: pl.onPodDelete,
	}); err != nil {
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	finished, err := startFinishedInformer(ctx, handle)
	if err != nil {
		return nil, err
	}
	pl.finished = finished
	nodeHandler := cache.ResourceEventHandlerFuncs{
		AddFunc: func(interface{}) { pl.nodeGeneration.Add(1) },
		DeleteFunc: func(obj interface{}) {
			pl.nodeGeneration.Add(1)
			pl.onNodeDelete(obj)
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			o, ok1 := oldObj.(*v1.Node)
			n, ok2 := newObj.(*v1.Node)
			if !ok1 || !ok2 || !maps.Equal(o.Labels, n.Labels) {
				pl.nodeGeneration.Add(1)
			}
		},
	}
	if _, err := handle.SharedInformerFactory().Core().V1().Nodes().Informer().AddEventHandler(nodeHandler); err != nil {
		return nil, fmt.Errorf("watching nodes: %w", err)
	}
	if pgInformer != nil {
		pgHandler := cache.ResourceEventHandlerFuncs{
			AddFunc:    pl.onPodGroupChange,
			UpdateFunc: func(_, newObj interface{}) { pl.onPodGroupChange(newObj) },
			DeleteFunc: pl.onPodGroupDelete,
		}
		if _, err := pgInformer.AddEventHandler(pgHandler); err != nil {
			return nil, fmt.Errorf("watching PodGroup deletions: %w", err)
		}
	}
	registerMetrics()
	instances.add(pl)
	go func() {
		<-ctx.Done()
		instances.remove(pl)
		pl.gangs.stop()
	}()
	return pl, nil
}

// startFinishedInformer watches succeeded pods, which the scheduler's own
// pod informer leaves out but quorum counts. It keeps only what counting
// needs of each pod.
func startFinishedInformer(ctx context.Context, handle fwk.Handle) (cache.Indexer, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(handle.ClientSet(), 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("status.phase", string(v1.PodSucceeded)).String()
		}))
	informer := factory.Core().V1().Pods().Informer()
	if err := informer.SetTransform(slimFinished); err != nil {
		return nil, fmt.Errorf("trimming finished pods: %w", err)
	}
	if err := informer.AddIndexers(cache.Indexers{gangIndex: indexByGang}); err != nil {
		return nil, fmt.Errorf("indexing finished pods by gang: %w", err)
	}
	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, gang.InformerSyncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), informer.HasSynced) {
		return nil, fmt.Errorf("succeeded pods could not be listed within %s: grant the scheduler list/watch on pods", gang.InformerSyncTimeout)
	}
	return informer.GetIndexer(), nil
}

// slimFinished keeps what counting a finished member needs, the gang it
// belongs to (its label or spec.schedulingGroup) among it.
func slimFinished(obj interface{}) (interface{}, error) {
	p, ok := obj.(*v1.Pod)
	if !ok {
		return obj, nil
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Labels: p.Labels,
			ResourceVersion: p.ResourceVersion, DeletionTimestamp: p.DeletionTimestamp},
		Spec:   v1.PodSpec{NodeName: p.Spec.NodeName, SchedulerName: p.Spec.SchedulerName, SchedulingGroup: p.Spec.SchedulingGroup},
		Status: v1.PodStatus{Phase: p.Status.Phase},
	}, nil
}

// Name returns the plugin's name.
func (pl *Plugin) Name() string { return Name }

const gangIndex = "gpu-gang/gang"

func indexByGang(obj interface{}) ([]string, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, nil
	}
	if key, ok := gang.Of(pod); ok {
		return []string{key.String()}, nil
	}
	return nil, nil
}

// members lists a gang's live members: pods in the PodGroup's own namespace
// that belong to it (gang.Of), have not finished and are not being deleted.
// newPlugin adds the index or fails, so ByIndex cannot miss it.
func (pl *Plugin) members(key gang.Key) ([]*v1.Pod, error) {
	objs, err := pl.podIndex.ByIndex(gangIndex, key.String())
	if err != nil {
		return nil, fmt.Errorf("listing the members of gang %s: %w", key, err)
	}
	pods := make([]*v1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok && p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	return pods, nil
}

// census counts a gang's members: the live ones (reserved ones apart), and
// the succeeded ones.
func (pl *Plugin) census(key gang.Key, members []*v1.Pod) gang.Census {
	reserved := pl.gangs.reservations(key)
	live := make(map[types.UID]bool, len(members))
	var c gang.Census
	for _, p := range members {
		live[p.UID] = true
		if _, ok := reserved[p.UID]; ok && p.Spec.NodeName == "" {
			c.Reserved++
			continue
		}
		c.Add(p)
	}
	objs, _ := pl.finished.ByIndex(gangIndex, key.String())
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok && !live[p.UID] && p.Status.Phase == v1.PodSucceeded && p.DeletionTimestamp == nil {
			c.Succeeded++
		}
	}
	return c
}

// running reports whether a gang is running: it reached quorum (in this
// scheduler, or its placed members show it) and some member still holds a
// node. A running gang's members that appear schedule one by one. Once no
// member holds a node, the next members are a new run of the job and gather
// as a whole again.
func (pl *Plugin) running(key gang.Key, spec *gang.Spec, c gang.Census) bool {
	if c.Bound+c.Reserved == 0 {
		pl.gangs.dropAdmission(key)
		return false
	}
	return pl.gangs.admitted(key) || gang.QuorumOf(spec.MinMember, c).Placed
}

// spec fetches and checks a member's gang. On a problem it records an Event
// saying what would fix it and returns the status to reject with.
func (pl *Plugin) spec(pod *v1.Pod, key gang.Key) (*gang.Spec, *fwk.Status) {
	spec, err := pl.sources.spec(key)
	switch {
	case apierrors.IsNotFound(err):
		pl.events.pod(pod, v1.EventTypeWarning, ReasonPodGroupNotFound,
			"PodGroup %s does not exist: create it in namespace %s, %s; until then the pod waits",
			key, key.Namespace, howToLeave(key))
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("PodGroup %s not found", key))
	case errors.Is(err, errNotWatched):
		pl.events.pod(pod, v1.EventTypeWarning, ReasonNativePodGroupsIgnored,
			"the pod names PodGroup %s in spec.schedulingGroup, but gpu-gang ignores native PodGroups: %s", key, err)
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("PodGroup %s: gpu-gang ignores native PodGroups", key))
	case err != nil:
		return nil, fwk.AsStatus(err)
	}
	if err := spec.Validate(); err != nil {
		pl.events.gang(spec, nil, v1.EventTypeWarning, ReasonInvalidPodGroup, "%v", err)
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("PodGroup %s has minMember %d; it must be at least 1", key, spec.MinMember))
	}
	return spec, nil
}

// timeout is how long an attempt of the gang may take: its own timeout, or
// the plugin default.
func (pl *Plugin) timeout(spec *gang.Spec) time.Duration {
	if spec.Timeout > 0 {
		return spec.Timeout
	}
	return time.Duration(pl.args.PermitWaitingTimeSeconds) * time.Second
}

// onPodAdd releases a gang's held-back members once the new member brings it
// to quorum. The new member itself passes PreEnqueue on its own.
func (pl *Plugin) onPodAdd(obj interface{}) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.Spec.NodeName != "" {
		return
	}
	key, ok := gang.Of(pod)
	if !ok {
		return
	}
	spec, ok := pl.lookup(key)
	if !ok {
		return
	}
	if members, err := pl.members(key); err == nil && gang.QuorumOf(spec.MinMember, pl.census(key, members)).Gathered {
		pl.releaseGated(key)
	}
}

// onPodUpdate follows a pod that was bound, which may complete a
// preemptor, and a pod whose gang changed (its label did, and it names no
// native PodGroup, which would win): it leaves the old gang's held-back
// members and may complete the new gang.
func (pl *Plugin) onPodUpdate(oldObj, newObj interface{}) {
	o, ok1 := oldObj.(*v1.Pod)
	n, ok2 := newObj.(*v1.Pod)
	if !ok1 || !ok2 {
		return
	}
	if o.Spec.NodeName == "" && n.Spec.NodeName != "" {
		pl.preemptorBound(n)
	}
	if sameGang(o, n) {
		return
	}
	if key, ok := gang.Of(o); ok {
		pl.memberGone(key, o)
	}
	pl.onPodAdd(n)
}

// onPodDelete handles a member that left the scheduler's view: deleted, or
// finished (the scheduler's informer drops finished pods).
func (pl *Plugin) onPodDelete(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	pl.gangs.victimGone(pod.UID)
	if key, ok := gang.Of(pod); ok {
		pl.memberGone(key, pod)
		return
	}
	// A plain preemptor that goes away gives up what it preempted for.
	pl.gangs.endPreemption(preemptorID(pod))
}

// preemptorBound observes a preemptor's time to bound once the members it
// preempted for are bound (for a gang, or minMember of its members), and
// forgets its preemption.
func (pl *Plugin) preemptorBound(pod *v1.Pod) {
	id := preemptorID(pod)
	created, minMember, all, ok := pl.gangs.memberBound(id, pod.UID)
	if !ok {
		return
	}
	if key, isMember := gang.Of(pod); isMember && !all {
		members, err := pl.members(key)
		if err != nil {
			return
		}
		if !gang.QuorumOf(minMember, pl.census(key, members)).Bound {
			return
		}
	}
	if pl.gangs.endPreemption(id) {
		preemptorTimeToBound.Observe(pl.clock.Since(created).Seconds())
		pl.logger.V(2).Info("Preemptor bound", "preemptor", id, "sinceCreated", pl.clock.Since(created))
	}
}

// memberGone updates a gang that lost a member. A member that waited in Permit
// fails its gang's attempt at once, so that its siblings give back their
// nodes and its replacement finds a fresh plan. A gang with no members left
// holds nothing. A running gang that drops below minMember says so.
func (pl *Plugin) memberGone(key gang.Key, pod *v1.Pod) {
	ctx := klog.NewContext(context.Background(), pl.logger)
	// Forget the reservation first: the rejections below run Unreserve,
	// which must not take the deletion for a failed plan.
	if pl.gangs.forgetPod(key, pod.UID) {
		pl.failGang(ctx, key, ReasonMemberDeleted, fmt.Sprintf("member %s was deleted while it waited for its gang", pod.Name), false)
	}
	if wp := pl.handle.GetWaitingPod(pod.UID); wp != nil {
		// The scheduler rejects a deleted pod that waits in Permit too;
		// whichever comes first gives its node back.
		wp.Reject(Name, fmt.Sprintf("pod %s was deleted", pod.Name))
	}
	members, err := pl.members(key)
	if err != nil {
		return
	}
	waiting := 0
	for _, p := range members {
		if p.Spec.NodeName == "" {
			waiting++
		}
	}
	if waiting == 0 {
		// No member needs the gang's hold any more.
		pl.gangs.idle(key)
		pl.activateBlocked()
	}
	if pod.Spec.NodeName != "" && pod.Status.Phase != v1.PodSucceeded && pl.gangs.admitted(key) {
		pl.reportLostMember(key, pod, members)
	}
}

// reportLostMember records that a running gang lost a member that had not
// finished, and, if the gang is now below minMember, what it has left.
func (pl *Plugin) reportLostMember(key gang.Key, pod *v1.Pod, members []*v1.Pod) {
	spec, ok := pl.lookup(key)
	if !ok || spec.Deleting {
		return // the job is going away as a whole
	}
	c := pl.census(key, members)
	q := gang.QuorumOf(spec.MinMember, c)
	how := "was deleted"
	if pod.Status.Phase == v1.PodFailed {
		how = "failed"
	}
	if q.Placed {
		pl.events.gang(spec, pod, v1.EventTypeNormal, ReasonMemberLost,
			"member %s on node %s %s; the gang still has %d of minMember %d placed", pod.Name, pod.Spec.NodeName, how, c.Placed(), spec.MinMember)
		return
	}
	pl.events.gang(spec, pod, v1.EventTypeWarning, ReasonMemberLost,
		"member %s on node %s %s: the gang runs below minMember with %d of %d placed (%d running, %d succeeded) and %d replacement(s) waiting; replacements schedule next to the gang as they appear",
		pod.Name, pod.Spec.NodeName, how, c.Placed(), spec.MinMember, c.Bound+c.Reserved, c.Succeeded, c.Waiting)
}

// onNodeDelete fails the attempts in flight that reserved the node for a
// member: that member would bind to a node that no longer exists. Its
// siblings give back their nodes and the gang plans again at once on the
// nodes that are left.
func (pl *Plugin) onNodeDelete(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	node, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	ctx := klog.NewContext(context.Background(), pl.logger)
	for _, key := range pl.gangs.inFlightOn(node.Name) {
		pl.failGang(ctx, key, ReasonGangRejected, fmt.Sprintf("node %s, which a member had reserved, was deleted", node.Name), false)
	}
}

// onPodGroupChange lets PreEnqueue look again at members held back for a
// PodGroup that was just created or changed. The scheduler's own PodGroup
// event may come before this informer has the object; this handler runs
// once the lister has it.
func (pl *Plugin) onPodGroupChange(obj interface{}) {
	if pg, ok := obj.(*v1alpha1.PodGroup); ok {
		pl.releaseGated(gang.Key{Namespace: pg.Namespace, Name: pg.Name})
	}
}

func (pl *Plugin) onPodGroupDelete(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if pg, ok := obj.(*v1alpha1.PodGroup); ok {
		pl.gangDeleted(gang.Key{Namespace: pg.Namespace, Name: pg.Name})
	}
}

// gangDeleted handles a gang whose PodGroup no longer exists, of either API.
// Its attempt in flight ends at once, so that members waiting in Permit give
// back their nodes instead of holding them until the timeout; its state and
// timers are forgotten; and its unscheduled members go back through
// PreEnqueue, which holds them with a PodGroupNotFound Event until a
// PodGroup of that name exists again. Bound members keep running.
func (pl *Plugin) gangDeleted(key gang.Key) {
	ctx := klog.NewContext(context.Background(), pl.logger)
	pl.failGang(ctx, key, ReasonGangRejected, "its PodGroup was deleted", false)
	pl.gangs.forgetGang(key)
	pl.activateBlocked()
	pl.activate(key)
}

// sameGang reports whether two versions of a pod belong to the same gang.
func sameGang(a, b *v1.Pod) bool {
	ka, _ := gang.Of(a)
	kb, _ := gang.Of(b)
	return ka == kb
}

// activateBlocked moves the pods held capacity turned away back to the
// active queue: a hold ended, and no cluster event says so.
func (pl *Plugin) activateBlocked() {
	if pods := pl.gangs.unblock(); len(pods) > 0 {
		pl.handle.Activate(pl.logger, pods)
	}
}
