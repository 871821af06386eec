// Package coscheduling is gpu-gang's gang plugin: the pods of a PodGroup
// start together or not at all, and a running gang heals. A PodGroup is
// scheduler-plugins' (scheduling.x-k8s.io/v1alpha1, members labelled
// scheduling.x-k8s.io/pod-group) or Kubernetes' own (scheduling.k8s.io/v1beta1,
// members naming it in spec.schedulingGroup); the scheduler's gang sources
// (gang.Sources, shared with the other plugins) read both into one gang
// model, and nothing after them knows which API a gang came from.
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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"

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
	// sources reads gangs, one informer per API; every plugin of the
	// scheduler shares them.
	sources *gang.Sources
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

// New builds the plugin from its args. It reads gangs from sources, which
// every plugin of the scheduler shares (pkg/scheduler builds them once, with
// gang.SharedSources).
func New(ctx context.Context, obj runtime.Object, handle fwk.Handle, sources *gang.Sources) (fwk.Plugin, error) {
	args, err := scheme.DecodeCoschedulingArgs(obj, field.NewPath("pluginConfig").Key(Name).Child("args"))
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
	return newPlugin(ctx, args, handle, sources, clock.RealClock{}, planner)
}

// newPlugin wires the plugin to its informers and gang sources. Tests call
// it with fake informers and a fake clock.
func newPlugin(ctx context.Context, args *config.CoschedulingArgs, handle fwk.Handle, sources *gang.Sources,
	c clock.WithTickerAndDelayedExecution, planner placement.Planner) (*Plugin, error) {
	pl := &Plugin{
		handle:  handle,
		args:    args,
		clock:   c,
		sources: sources,
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
	// index keeps that from scanning the whole namespace. The plugins of
	// several profiles share the informer, and the first adds the index.
	if _, ok := podInformer.GetIndexer().GetIndexers()[gangIndex]; !ok {
		if err := podInformer.AddIndexers(cache.Indexers{gangIndex: indexByGang}); err != nil {
			return nil, fmt.Errorf("indexing pods by gang: %w", err)
		}
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
	if err := sources.Subscribe(gang.Handler{Added: pl.onGangAdded, Updated: pl.onGangUpdated, Deleted: pl.onGangDeleted}); err != nil {
		return nil, err
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

// Name returns the plugin's name.
func (pl *Plugin) Name() string { return Name }

// spec fetches and checks a member's gang. On a problem it records an Event
// saying what would fix it and returns the status to reject with.
func (pl *Plugin) spec(pod *v1.Pod, key gang.Key) (*gang.Spec, *fwk.Status) {
	spec, err := pl.sources.Spec(key)
	switch {
	case apierrors.IsNotFound(err):
		pl.events.pod(pod, v1.EventTypeWarning, ReasonPodGroupNotFound,
			"PodGroup %s does not exist: create it in namespace %s, or %s; until then the pod waits",
			key, key.Namespace, key.HowToLeave())
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("PodGroup %s not found", key))
	case errors.Is(err, gang.ErrNotWatched):
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

// lookup returns a gang's Spec if its object exists. Callers that only say
// something about a gang (an Event, a metric) use it; admission uses spec.
func (pl *Plugin) lookup(key gang.Key) (*gang.Spec, bool) {
	s, err := pl.sources.Spec(key)
	return s, err == nil
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
