// Package coscheduling is gpu-gang's gang plugin: the pods of a PodGroup
// (scheduling.x-k8s.io/v1alpha1) start together or not at all.
//
// A gang moves through the extension points like this:
//   - QueueSort keeps its members next to each other in the queue.
//   - PreEnqueue holds members until the PodGroup exists and has minMember
//     members, so no scheduling cycle is spent on a gang without quorum.
//   - PreFilter of the first member plans the whole gang node by node against
//     free capacity, minus what other gangs' plans hold, and holds the plan's
//     capacity. A gang that does not fit holds nothing and reserves nothing.
//   - Filter keeps other pods out of held capacity; members follow their plan.
//   - Reserve/Unreserve count members; Permit holds them until quorum is
//     reserved, then lets them all bind. A timeout or a failed member rejects
//     every waiting sibling and the gang backs off.
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
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	pginformers "sigs.k8s.io/scheduler-plugins/pkg/generated/informers/externalversions"
	pglisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
	"github.com/gpu-gang/gpu-gang/pkg/apis/config/scheme"
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
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

// pluginStartTimeout bounds how long New waits for the PodGroup informer.
const pluginStartTimeout = 30 * time.Second

// Plugin implements gang admission.
type Plugin struct {
	handle   fwk.Handle
	args     *config.CoschedulingArgs
	clock    clock.WithTickerAndDelayedExecution
	podIndex cache.Indexer
	pgLister pglisters.PodGroupLister
	planner  placement.Planner
	gangs    *gangs
	events   *eventRecorder
	// nodeGeneration changes whenever a node is added or deleted or its
	// labels change, so planners may cache what they derive from labels.
	nodeGeneration atomic.Uint64
	// logger is for work that outlives a scheduling cycle (backoff timers).
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
// the PodGroup API is not served.
func New(ctx context.Context, obj runtime.Object, handle fwk.Handle) (fwk.Plugin, error) {
	args, err := scheme.DecodeCoschedulingArgs(obj, field.NewPath("pluginConfig").Key(Name).Child("args"))
	if err != nil {
		return nil, err
	}
	if handle.KubeConfig() == nil {
		return nil, errors.New("the framework handle has no kubeconfig to watch PodGroups with")
	}
	cfg := rest.CopyConfig(handle.KubeConfig())
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	client, err := pgclientset.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building PodGroup client: %w", err)
	}
	factory := pginformers.NewSharedInformerFactory(client, 0)
	pgInformer := factory.Scheduling().V1alpha1().PodGroups()
	informer := pgInformer.Informer()
	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, pluginStartTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), informer.HasSynced) {
		return nil, fmt.Errorf("PodGroups (%s) could not be listed within %s: install the CRD from manifests/crds and grant the scheduler list/watch on podgroups",
			v1alpha1.SchemeGroupVersion.WithResource("podgroups"), pluginStartTimeout)
	}
	levels, err := scheduling.ResolveLevels(args.TopologyPreset, args.TopologyLevels)
	if err != nil {
		return nil, err // validation already named the field
	}
	planner, err := topology.NewPlanner(levels)
	if err != nil {
		return nil, err
	}
	return newPlugin(ctx, args, handle, pgInformer.Lister(), informer, clock.RealClock{}, planner)
}

// newPlugin wires the plugin to its informers. Tests call it with fake
// informers and a fake clock.
func newPlugin(ctx context.Context, args *config.CoschedulingArgs, handle fwk.Handle, pgLister pglisters.PodGroupLister,
	pgInformer cache.SharedIndexInformer, c clock.WithTickerAndDelayedExecution, planner placement.Planner) (*Plugin, error) {
	podInformer := handle.SharedInformerFactory().Core().V1().Pods()
	pl := &Plugin{
		handle:   handle,
		args:     args,
		clock:    c,
		pgLister: pgLister,
		planner:  planner,
		gangs:    newGangs(c),
		events:   newEventRecorder(handle.EventRecorder(), c),
		logger:   klog.FromContext(ctx).WithValues("plugin", Name),
	}
	registerMetrics(pl.gangs)
	// Members are looked up by gang on every PreEnqueue and PreFilter; an
	// index keeps that from scanning the whole namespace.
	if err := podInformer.Informer().AddIndexers(cache.Indexers{gangIndex: indexByGang}); err != nil {
		return nil, fmt.Errorf("indexing pods by gang: %w", err)
	}
	pl.podIndex = podInformer.Informer().GetIndexer()
	podHandler := cache.ResourceEventHandlerFuncs{
		AddFunc: pl.onPodAdd,
		UpdateFunc: func(oldObj, newObj interface{}) {
			o, ok1 := oldObj.(*v1.Pod)
			n, ok2 := newObj.(*v1.Pod)
			if ok1 && ok2 && o.Labels[scheduling.PodGroupLabel] != n.Labels[scheduling.PodGroupLabel] {
				pl.onPodAdd(n)
			}
		},
		DeleteFunc: pl.onPodDelete,
	}
	if _, err := podInformer.Informer().AddEventHandler(podHandler); err != nil {
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	nodeHandler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(interface{}) { pl.nodeGeneration.Add(1) },
		DeleteFunc: func(interface{}) { pl.nodeGeneration.Add(1) },
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
	return pl, nil
}

// Name returns the plugin's name.
func (pl *Plugin) Name() string { return Name }

const gangIndex = "gpu-gang/gang"

func indexByGang(obj interface{}) ([]string, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, nil
	}
	if key, ok := gangOf(pod); ok {
		return []string{key.String()}, nil
	}
	return nil, nil
}

// members lists a gang's live members: pods in the PodGroup's own namespace
// that carry its label and are not being deleted. The scheduler's pod
// informer already leaves out pods that have finished. newPlugin adds the
// index or fails, so ByIndex cannot miss it.
func (pl *Plugin) members(key gangKey) ([]*v1.Pod, error) {
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

// onPodAdd releases a gang's held-back members once the new member brings it
// to quorum. The new member itself passes PreEnqueue on its own.
func (pl *Plugin) onPodAdd(obj interface{}) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.Spec.NodeName != "" {
		return
	}
	key, ok := gangOf(pod)
	if !ok {
		return
	}
	pg, err := pl.pgLister.PodGroups(key.namespace).Get(key.name)
	if err != nil {
		return
	}
	if members, err := pl.members(key); err == nil && len(members) >= int(pg.Spec.MinMember) {
		pl.releaseGated(key)
	}
}

// onPodGroupChange lets PreEnqueue look again at members held back for a
// PodGroup that was just created or changed. The scheduler's own PodGroup
// event may come before this informer has the object; this handler runs
// once the lister has it.
func (pl *Plugin) onPodGroupChange(obj interface{}) {
	if pg, ok := obj.(*v1alpha1.PodGroup); ok {
		pl.releaseGated(gangKey{namespace: pg.Namespace, name: pg.Name})
	}
}

func (pl *Plugin) releaseGated(key gangKey) {
	if pods := pl.gangs.ungate(key); len(pods) > 0 {
		pl.logger.V(5).Info("Releasing held-back gang members", "podGroup", key, "pods", len(pods))
		pl.handle.Activate(pl.logger, pods)
	}
}

func (pl *Plugin) onPodDelete(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if pod, ok := obj.(*v1.Pod); ok {
		if key, ok := gangOf(pod); ok {
			pl.gangs.forgetPod(key, pod.UID)
		}
	}
}

func (pl *Plugin) onPodGroupDelete(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if pg, ok := obj.(*v1alpha1.PodGroup); ok {
		pl.gangs.forgetGang(gangKey{namespace: pg.Namespace, name: pg.Name})
	}
}

// timeout is how long a gang's attempt may take: the PodGroup's
// scheduleTimeoutSeconds, or the plugin default when that is unset or 0.
func (pl *Plugin) timeout(pg *v1alpha1.PodGroup) time.Duration {
	if s := pg.Spec.ScheduleTimeoutSeconds; s != nil && *s > 0 {
		return time.Duration(*s) * time.Second
	}
	return time.Duration(pl.args.PermitWaitingTimeSeconds) * time.Second
}

// Less orders the queue by priority, then by when the gang was created, then
// by gang, then by rank, so a gang's members leave the queue one after
// another. Pods outside gangs are their own gang, dated by their own
// creation; the head gang's hold (see gangs.head) uses the same order. It
// reads only the PodGroup lister.
func (pl *Plugin) Less(a, b fwk.QueuedEntityInfo) bool {
	if pa, pb := a.GetPriority(), b.GetPriority(); pa != pb {
		return pa > pb
	}
	ka, kb := pl.queueKey(a), pl.queueKey(b)
	if !ka.created.Equal(kb.created) {
		return ka.created.Before(kb.created)
	}
	if ka.group != kb.group {
		return ka.group < kb.group
	}
	if ka.rank != kb.rank {
		return ka.rank.less(kb.rank)
	}
	return a.GetTimestamp().Before(b.GetTimestamp())
}

type queueKey struct {
	created time.Time
	group   string
	rank    rankKey
}

type podInfoGetter interface{ GetPodInfo() fwk.PodInfo }

func (pl *Plugin) queueKey(e fwk.QueuedEntityInfo) queueKey {
	getter, ok := e.(podInfoGetter)
	if !ok || getter.GetPodInfo() == nil {
		return queueKey{created: e.GetTimestamp()}
	}
	pod := getter.GetPodInfo().GetPod()
	if key, ok := gangOf(pod); ok {
		k := queueKey{created: pod.CreationTimestamp.Time, group: key.String(), rank: rankOf(pod)}
		if pg, err := pl.pgLister.PodGroups(key.namespace).Get(key.name); err == nil {
			k.created = pg.CreationTimestamp.Time
		}
		return k
	}
	return queueKey{created: pod.CreationTimestamp.Time, group: pod.Namespace + "/" + pod.Name}
}

// PreEnqueue holds a member until its PodGroup exists, is valid, and has at
// least minMember members that all name the same scheduler. A held member is
// remembered, so that the member or PodGroup it waits for releases it.
func (pl *Plugin) PreEnqueue(ctx context.Context, pod *v1.Pod) *fwk.Status {
	key, ok := gangOf(pod)
	if !ok {
		return nil
	}
	seen := pl.gangs.releaseCount(key)
	status := pl.preEnqueue(ctx, pod, key)
	if !status.IsSuccess() && !pl.gangs.gate(key, pod, seen) {
		// What this pod waits for arrived while it was being looked at;
		// look again once the queue has parked it.
		pl.clock.AfterFunc(recheckDelay, func() { pl.releaseGated(key) })
	}
	return status
}

// recheckDelay is how long after a missed release a held member is looked
// at again: long enough for the queue to have parked it.
const recheckDelay = 100 * time.Millisecond

func (pl *Plugin) preEnqueue(ctx context.Context, pod *v1.Pod, key gangKey) *fwk.Status {
	pg, status := pl.podGroup(pod, key)
	if status != nil {
		return status
	}
	members, err := pl.members(key)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if names := schedulerNames(members); len(names) > 1 {
		pl.events.podGroup(pg, pod, v1.EventTypeWarning, ReasonMixedSchedulerNames,
			"members name different schedulers %v, so no single scheduler can start them together: set spec.schedulerName to %q on every pod labelled %s=%s",
			names, pod.Spec.SchedulerName, scheduling.PodGroupLabel, key.name)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("members of PodGroup %s name different schedulers %v", key, names))
	}
	if have := int32(len(members)); have < pg.Spec.MinMember {
		pl.events.podGroup(pg, pod, v1.EventTypeNormal, ReasonWaitingForMembers,
			"waiting for members: %d/%d present", have, pg.Spec.MinMember)
		klog.FromContext(ctx).V(5).Info("Gang has no quorum yet", "pod", klog.KObj(pod), "podGroup", key, "members", have, "minMember", pg.Spec.MinMember)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("waiting for members of PodGroup %s: %d/%d present", key, have, pg.Spec.MinMember))
	}
	return nil
}

// podGroup fetches and checks a member's PodGroup. On a problem it records an
// Event saying what would fix it and returns the status to reject with.
func (pl *Plugin) podGroup(pod *v1.Pod, key gangKey) (*v1alpha1.PodGroup, *fwk.Status) {
	pg, err := pl.pgLister.PodGroups(key.namespace).Get(key.name)
	if apierrors.IsNotFound(err) {
		pl.events.pod(pod, v1.EventTypeWarning, ReasonPodGroupNotFound,
			"PodGroup %s does not exist: create it in namespace %s, or remove the label %s from the pod",
			key, key.namespace, scheduling.PodGroupLabel)
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("PodGroup %s not found", key))
	}
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	if pg.Spec.MinMember < 1 {
		pl.events.podGroup(pg, nil, v1.EventTypeWarning, ReasonInvalidPodGroup,
			"spec.minMember is %d: set it to the number of pods that must start together (at least 1)", pg.Spec.MinMember)
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("PodGroup %s has minMember %d; it must be at least 1", key, pg.Spec.MinMember))
	}
	return pg, nil
}

func schedulerNames(pods []*v1.Pod) []string {
	names := sets.New[string]()
	for _, p := range pods {
		names.Insert(p.Spec.SchedulerName)
	}
	return sets.List(names)
}

// PreFilter plans the member's gang if it has no plan yet, and restricts the
// member to the nodes its plan has room on. For every pod it notes the
// capacity other gangs hold, for Filter.
func (pl *Plugin) PreFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	key, isMember := gangOf(pod)
	s := &cycleState{request: podAmounts(pod), held: pl.gangs.heldByOthers(key, pl.rankOf(pod, key, isMember))}
	cs.Write(stateKey, s)
	if !isMember {
		if len(s.held) == 0 {
			return nil, fwk.NewStatus(fwk.Skip)
		}
		return nil, nil
	}
	pg, status := pl.podGroup(pod, key)
	if status != nil {
		return nil, status
	}
	if until, reason, ok := pl.gangs.backoff(key); ok {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("gang %s retries at %s after: %s", key, until.UTC().Format(time.RFC3339), reason))
	}
	members, err := pl.members(key)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	assigned, pending := pl.gangs.split(key, members)
	if assigned >= int(pg.Spec.MinMember) {
		// Quorum is in place: later members of an elastic gang schedule
		// like any pod.
		return nil, nil
	}
	nodes, planned := pl.gangs.planSlots(key, pod.UID, s.request)
	if !planned {
		if status := pl.planGang(ctx, pg, key, pending, int(pg.Spec.MinMember)-assigned, s.held); !status.IsSuccess() {
			return nil, status
		}
		nodes, _ = pl.gangs.planSlots(key, pod.UID, s.request)
	}
	if len(nodes) == 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, ErrReasonNoSlot)
	}
	s.followsPlan = true
	return &fwk.PreFilterResult{NodeNames: sets.New(nodes...)}, nil
}

// rankOf places a pod in queue order as Less does: priority, then the
// creation of its gang (or of the pod itself outside gangs), then the key.
func (pl *Plugin) rankOf(pod *v1.Pod, key gangKey, isMember bool) queueRank {
	r := queueRank{priority: corev1helpers.PodPriority(pod), created: pod.CreationTimestamp.Time, key: pod.Namespace + "/" + pod.Name}
	if isMember {
		r.key = key.String()
		if pg, err := pl.pgLister.PodGroups(key.namespace).Get(key.name); err == nil {
			r.created = pg.CreationTimestamp.Time
		}
	}
	return r
}

// PreFilterExtensions returns nil: held capacity does not change when
// preemption simulates adding or removing pods.
func (pl *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter keeps a pod out of capacity that other gangs' plans hold.
func (pl *Plugin) Filter(_ context.Context, cs fwk.CycleState, _ *v1.Pod, ni fwk.NodeInfo) *fwk.Status {
	s, err := readState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	held := s.held[ni.Node().Name]
	if held == nil {
		return nil
	}
	if ok, _ := fitsWithHeld(ni, s.request, held); !ok {
		return fwk.NewStatus(fwk.Unschedulable, ErrReasonHeld)
	}
	return nil
}

// PostFilter runs when a pod found no node. If the pod was following its
// gang's plan, the plan no longer works: the gang gives back what it reserved
// and tries again after a backoff, with a fresh plan.
func (pl *Plugin) PostFilter(ctx context.Context, cs fwk.CycleState, pod *v1.Pod, _ fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	key, ok := gangOf(pod)
	if !ok {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if s, err := readState(cs); err != nil || !s.followsPlan {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	pl.failGang(ctx, key, ReasonGangRejected, fmt.Sprintf("member %s could not be placed on any node of the gang's plan", pod.Name))
	return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s gave back its reservations to try a new plan", key))
}

// Reserve counts the member and takes its place in the gang's plan.
func (pl *Plugin) Reserve(_ context.Context, cs fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	key, ok := gangOf(pod)
	if !ok {
		return nil
	}
	s, err := readState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	pl.gangs.reserve(key, pod.UID, nodeName, s.request)
	return nil
}

// Unreserve forgets the member. A member of the attempt in flight that gives
// back its node (its Permit wait timed out, it failed to bind, it was
// deleted) fails the whole attempt.
func (pl *Plugin) Unreserve(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) {
	key, ok := gangOf(pod)
	if !ok || !pl.gangs.unreserve(key, pod.UID) {
		return
	}
	if pl.gangs.expired(key) {
		pl.failGang(ctx, key, ReasonGangTimedOut, "the gang did not reach quorum within its schedule timeout")
		return
	}
	pl.failGang(ctx, key, ReasonGangRejected, fmt.Sprintf("member %s gave back its reservation on node %s", pod.Name, nodeName))
}

// Permit lets a member bind once quorum is reserved, and then all its waiting
// siblings too. Until then the member waits, at most until its gang's
// attempt times out.
func (pl *Plugin) Permit(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) (*fwk.Status, time.Duration) {
	key, ok := gangOf(pod)
	if !ok {
		return nil, 0
	}
	logger := klog.FromContext(ctx)
	pg, err := pl.pgLister.PodGroups(key.namespace).Get(key.name)
	if err != nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("PodGroup %s: %v", key, err)), 0
	}
	members, err := pl.members(key)
	if err != nil {
		return fwk.AsStatus(err), 0
	}
	assigned, _ := pl.gangs.split(key, members)
	if assigned >= int(pg.Spec.MinMember) {
		pl.allowGang(logger, pg, key, assigned)
		return nil, 0
	}
	wait, ok := pl.gangs.remaining(key)
	if !ok {
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s has no plan in flight", key)), 0
	}
	logger.V(4).Info("Member waits for its gang", "pod", klog.KObj(pod), "podGroup", key, "assigned", assigned, "minMember", pg.Spec.MinMember, "wait", wait)
	return fwk.NewStatus(fwk.Wait, fmt.Sprintf("waiting for gang %s: %d/%d members reserved", key, assigned, pg.Spec.MinMember)), wait
}

// allowGang ends the gang's attempt in success and releases its waiting
// members.
func (pl *Plugin) allowGang(logger klog.Logger, pg *v1alpha1.PodGroup, key gangKey, assigned int) {
	uids, done, started := pl.gangs.succeed(key)
	if !started {
		return
	}
	summary := done.summary
	for _, sp := range done.spans {
		domainsSpanned.WithLabelValues(sp.Level).Observe(float64(sp.Domains))
	}
	for _, uid := range uids {
		if wp := pl.handle.GetWaitingPod(uid); wp != nil {
			wp.Allow(Name)
		}
	}
	attempts.WithLabelValues(resultScheduled).Inc()
	timeToSchedule.Observe(pl.clock.Since(pg.CreationTimestamp.Time).Seconds())
	logger.V(2).Info("Gang reached quorum", "podGroup", key, "assigned", assigned, "plan", summary)
	pl.events.podGroup(pg, nil, v1.EventTypeNormal, ReasonGangScheduled, "%d/%d members reserved, binding: %s", assigned, pg.Spec.MinMember, summary)
}

// failGang ends the gang's attempt in flight: waiting members are rejected,
// the held capacity is released, and the members are retried after a
// backoff. Calls for an attempt that already ended do nothing.
func (pl *Plugin) failGang(ctx context.Context, key gangKey, reason, why string) {
	base := time.Duration(pl.args.PodGroupBackoffSeconds) * time.Second
	max := time.Duration(pl.args.PodGroupMaxBackoffSeconds) * time.Second
	uids, backoff, ok := pl.gangs.fail(key, why, base, max)
	if !ok {
		return
	}
	if reason == ReasonGangTimedOut {
		attempts.WithLabelValues(resultTimedOut).Inc()
	} else {
		attempts.WithLabelValues(resultRejected).Inc()
	}
	msg := fmt.Sprintf("gang %s: %s", key, why)
	for _, uid := range uids {
		if wp := pl.handle.GetWaitingPod(uid); wp != nil {
			wp.Reject(Name, msg)
		}
	}
	klog.FromContext(ctx).V(2).Info("Gang gave back its reservations", "podGroup", key, "reason", why, "rejected", len(uids), "backoff", backoff)
	if pg, err := pl.pgLister.PodGroups(key.namespace).Get(key.name); err == nil {
		pl.events.podGroup(pg, nil, v1.EventTypeWarning, reason, "%s; waiting members rejected: %d; retrying in %s", why, len(uids), backoff)
	}
	pl.clock.AfterFunc(backoff, func() { pl.activate(key) })
}

// activate moves a gang's unscheduled members back to the active queue when
// its backoff ends, instead of waiting for an unrelated cluster event.
func (pl *Plugin) activate(key gangKey) {
	members, err := pl.members(key)
	if err != nil {
		return
	}
	pods := map[string]*v1.Pod{}
	for _, p := range members {
		if p.Spec.NodeName == "" {
			pods[p.Namespace+"/"+p.Name] = p
		}
	}
	if len(pods) > 0 {
		pl.handle.Activate(pl.logger, pods)
	}
}
