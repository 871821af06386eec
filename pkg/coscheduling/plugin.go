// Package coscheduling is gpu-gang's gang plugin: the pods of a PodGroup
// start together or not at all, and a running gang heals. A PodGroup is
// scheduler-plugins' (scheduling.x-k8s.io/v1alpha1, members labelled
// scheduling.x-k8s.io/pod-group) or Kubernetes' own (scheduling.k8s.io/v1beta1,
// members naming it in spec.schedulingGroup); the scheduler's gang sources
// (gang.Sources, shared with the other plugins) read both into one gang
// model, and nothing after them knows which API a gang came from.
//
// The package is the plugin: its files follow the extension points and
// the plugin's informer handlers, each a short call into the packages
// below. Planning a gang is package core's (core.Planner); what the plugin
// promised each gang (reservations, claims, the head hold, lessons,
// preemptions) is kept in package ledger, which knows nothing of the
// framework. A gang moves through the extension points like this:
//   - queue.go: QueueSort keeps a gang's members next to each other, in
//     rank order; PreEnqueue holds members until the PodGroup exists and
//     has minMember members, so no scheduling cycle is spent on a gang
//     without quorum.
//   - prefilter.go: PreFilter of the first member runs the capacity
//     pre-check (core.Planner.PlanGang): it plans the whole gang, node by
//     node, in free capacity less what other gangs hold, on nodes every
//     Filter plugin of the profile accepts (package eligibility), in the
//     gang's segments and with members that share a claim on one node, and
//     holds the plan's capacity in the ledger. A gang that does not fit
//     holds nothing (core says why), except the head of the queue, for a
//     bounded time (core's head hold). planning.go is what core asks of
//     the plugin.
//   - filter.go: Filter keeps other pods out of held capacity.
//   - postfilter.go: PostFilter learns from a member that Filter turned
//     away where its plan put it; package preempt (preempt.go is its
//     side here): a gang that does not fit, or a plain pod, preempts pods
//     of strictly lower priority, whole gangs only (or members above
//     minMember), inside one topology domain (package preemption decides,
//     within PodDisruptionBudgets), and holds the freed room for itself;
//     when it cannot, and the args enable it, package consolidate
//     (consolidate.go) may move gangs that opted in out of a domain for a
//     gang that has waited.
//   - score.go: a plain pod that takes accelerators is scored by the
//     planner's own best fit (core.Packing), so that it fills the nodes and
//     domains already in use and leaves whole domains to gangs.
//   - permit.go: Reserve/Unreserve count members; Permit holds them until
//     quorum is reserved, then lets them all bind. A timeout, a failed or a
//     deleted member rejects every waiting sibling.
//   - hints.go: the cluster events that may help a pod it turned away;
//     handlers.go: what the plugin's own informer handlers do when pods and
//     nodes change; events.go and metrics.go: what people see.
//
// Once a gang has reached quorum it is running: members that reappear
// (replacements of evicted or deleted pods, new members of an elastic gang)
// schedule one by one, next to the gang's other members, without waiting for
// a quorum again.
package coscheduling

import (
	"context"
	"fmt"
	"maps"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
	"github.com/gpu-gang/gpu-gang/pkg/apis/config/scheme"
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/consolidate"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/core"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/eligibility"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/preempt"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/preemption"
	"github.com/gpu-gang/gpu-gang/pkg/topology"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = config.CoschedulingPluginName

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
	// core plans gangs (package core): demand, eligibility, the request,
	// verification, explanations and the head hold.
	core *core.Planner
	// ledger is the plugin's memory of gangs: what it promised each one.
	ledger *ledger.Ledger
	// devices reads capacity published through Dynamic Resource
	// Allocation (package dra); nil when the framework has no DRA manager.
	devices *dra.DeviceSource
	// claims are the allocations the plugin writes for members that
	// share a claim (dra.GangClaims), their writes and their releases.
	claims *dra.Allocations
	// gangClaims allocates the claims members share, hears claims change
	// under waiting gangs and explains bad DRA input (shared.go).
	gangClaims *dra.GangClaims
	// fences steer DynamicResources to the devices a rail-aligned plan
	// chose for members that ask for them through an extended resource
	// (railfence.go); nil without DRA.
	fences *dra.Fences
	// reconciler gives back allocations the plugin wrote that no pod came
	// to use (reconcile.go); nil when the framework has no DRA manager.
	reconciler *dra.Reconciler
	events     *eventRecorder
	// preempter makes room for pods by evicting pods of lower priority
	// (package preempt, preempt.go).
	preempter *preempt.Preempter
	// consolidator moves movable gangs for gangs that waited long enough
	// (package consolidate, consolidate.go); nil unless the args enable it.
	consolidator *consolidate.Consolidator
	pdbLister    policylisters.PodDisruptionBudgetLister
	// nominations are the nodes that may have a nominated pod.
	nominations eligibility.Nominations
	// logger is for work that outlives a scheduling cycle (timers).
	logger klog.Logger
}

var (
	_ fwk.QueueSortPlugin   = &Plugin{}
	_ fwk.PreEnqueuePlugin  = &Plugin{}
	_ fwk.PreFilterPlugin   = &Plugin{}
	_ fwk.FilterPlugin      = &Plugin{}
	_ fwk.PostFilterPlugin  = &Plugin{}
	_ fwk.PreScorePlugin    = &Plugin{}
	_ fwk.ScorePlugin       = &Plugin{}
	_ fwk.ReservePlugin     = &Plugin{}
	_ fwk.PermitPlugin      = &Plugin{}
	_ fwk.EnqueueExtensions = &Plugin{}
)

// New builds the plugin from its args. It reads gangs from sources, which
// every plugin of the scheduler shares (pkg/scheduler builds them once, with
// gang.SharedSources).
func New(ctx context.Context, obj runtime.Object, handle fwk.Handle, sources *gang.Sources) (fwk.Plugin, error) {
	args, planner, err := argsAndPlanner(obj)
	if err != nil {
		return nil, err
	}
	return newPlugin(ctx, args, handle, sources, clock.RealClock{}, planner)
}

// argsAndPlanner decodes the plugin's args and builds the topology planner
// of their levels.
func argsAndPlanner(obj runtime.Object) (*config.CoschedulingArgs, *topology.Planner, error) {
	args, err := scheme.DecodeCoschedulingArgs(obj, field.NewPath("pluginConfig").Key(Name).Child("args"))
	if err != nil {
		return nil, nil, err
	}
	levels, err := scheduling.ResolveLevels(args.TopologyPreset, args.TopologyLevels)
	if err != nil {
		return nil, nil, err // validation already named the field
	}
	planner, err := topology.NewPlanner(levels)
	return args, planner, err
}

// newPlugin wires the plugin to its informers and gang sources. Tests call
// it with fake informers and a fake clock.
func newPlugin(ctx context.Context, args *config.CoschedulingArgs, handle fwk.Handle, sources *gang.Sources,
	c clock.WithTickerAndDelayedExecution, planner placement.Planner) (*Plugin, error) {
	levels, err := scheduling.ResolveLevels(args.TopologyPreset, args.TopologyLevels)
	if err != nil {
		return nil, err
	}
	railUnit, err := scheduling.RailUnit(levels, args.RailUnitLevel)
	if err != nil {
		return nil, err
	}
	pl := &Plugin{
		handle:  handle,
		args:    args,
		clock:   c,
		sources: sources,
		ledger:  ledger.New(c),
		devices: dra.NewDeviceSource(ctx, handle),
		events:  newEventRecorder(handle.EventRecorder(), c),
		logger:  klog.FromContext(ctx).WithValues("plugin", Name),
	}
	claimsOpts := dra.AllocationsOptions(handle, pl.devices, pl.logger)
	claimsOpts.Clock, claimsOpts.Done = c, pl.claimsDone
	pl.claims = dra.NewAllocations(ctx, claimsOpts)
	pl.fences = dra.FencesFor(ctx, handle.SharedDRAManager())
	pl.gangClaims = dra.NewGangClaims(pl.devices, pl.claims, pl.fences, profileName(handle), handle.SharedInformerFactory().Core().V1().Nodes().Lister(),
		handle.SharedInformerFactory().Core().V1().Pods().Lister(), claimGangs{pl}, pl.logger)
	if pl.devices != nil {
		names := make([]resourceapi.QualifiedName, len(args.RailAttributes))
		for i, n := range args.RailAttributes {
			names[i] = resourceapi.QualifiedName(n)
		}
		pl.devices.Inventories().SetRailAttributes(names)
		// A member's claim deleted while it waits in Permit fails its
		// gang's attempt, as the member's own deletion does.
		claims := handle.SharedInformerFactory().Resource().V1().ResourceClaims().Informer()
		if _, err := claims.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: pl.gangClaims.ClaimAdded, DeleteFunc: pl.gangClaims.ClaimDeleted}); err != nil {
			return nil, fmt.Errorf("watching ResourceClaims: %w", err)
		}
		pl.reconciler = pl.startReconciler(ctx, handle)
	}
	// Asking for the lister registers the informer, which the scheduler
	// starts with its others once every plugin is built.
	pl.pdbLister = handle.SharedInformerFactory().Policy().V1().PodDisruptionBudgets().Lister()
	pl.nodeLister = handle.SharedInformerFactory().Core().V1().Nodes().Lister()
	pl.podLister = handle.SharedInformerFactory().Core().V1().Pods().Lister()
	pl.core = core.New(core.Config{
		Framework:      handle,
		Gangs:          planningAdapter{pl},
		Queue:          planningAdapter{pl},
		Reporter:       planningAdapter{pl},
		Placement:      planner,
		Levels:         levels,
		RailUnit:       railUnit,
		Eligibility:    eligibility.NewRunner(handle, Name, pl.devices),
		Ledger:         pl.ledger,
		Devices:        pl.devices,
		Claims:         pl.gangClaims,
		Nodes:          pl.nodeLister,
		Nominations:    &pl.nominations,
		Clock:          c,
		DefaultTimeout: time.Duration(args.PermitWaitingTimeSeconds) * time.Second,
		Logger:         pl.logger,
	})
	podInformer := handle.SharedInformerFactory().Core().V1().Pods().Informer()
	// Members are looked up by gang on every PreEnqueue and PreFilter; an
	// index keeps that from scanning the whole namespace. The plugins of
	// several profiles share the informer, and the first adds the index.
	if err := gang.IndexMembers(podInformer); err != nil {
		return nil, err
	}
	pl.podIndex = podInformer.GetIndexer()
	// The engine needs the planner's topology tree; without one, nothing
	// is preempted.
	var decider preempt.Decider
	if trees, ok := planner.(preemption.TreeSource); ok {
		decider = preemption.NewEngine(planner, trees)
	}
	pl.preempter = pl.newPreempter(decider)
	pl.consolidator = pl.newConsolidator(decider, planner)
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    pl.onPodAdd,
		UpdateFunc: pl.onPodUpdate,
		DeleteFunc: pl.onPodDelete,
	}); err != nil {
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	if err := pl.nominations.Watch(podInformer); err != nil {
		return nil, fmt.Errorf("watching nominations: %w", err)
	}
	finished, err := startFinishedInformer(ctx, handle)
	if err != nil {
		return nil, err
	}
	pl.finished = finished
	nodeHandler := cache.ResourceEventHandlerFuncs{
		AddFunc: func(interface{}) { pl.core.NodesChanged() },
		DeleteFunc: func(obj interface{}) {
			pl.core.NodesChanged()
			pl.onNodeDelete(obj)
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			o, ok1 := oldObj.(*v1.Node)
			n, ok2 := newObj.(*v1.Node)
			if !ok1 || !ok2 || !maps.Equal(o.Labels, n.Labels) {
				pl.core.NodesChanged()
			}
		},
	}
	if _, err := handle.SharedInformerFactory().Core().V1().Nodes().Informer().AddEventHandler(nodeHandler); err != nil {
		return nil, fmt.Errorf("watching nodes: %w", err)
	}
	if err := sources.Subscribe(gang.Handler{Added: pl.onGangAdded, Updated: pl.onGangUpdated, Deleted: pl.onGangDeleted}); err != nil {
		return nil, err
	}
	if err := sources.SubscribeComposites(gang.CompositeHandler{
		Added:   pl.onCompositeChanged,
		Updated: pl.onCompositeUpdated,
		Deleted: pl.onCompositeDeleted,
	}); err != nil {
		return nil, err
	}
	registerMetrics()
	instances.add(pl)
	go func() {
		<-ctx.Done()
		instances.remove(pl)
		pl.ledger.Timers.Stop()
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
	if err := gang.IndexMembers(informer); err != nil {
		return nil, fmt.Errorf("finished pods: %w", err)
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

// gangDeleted handles a gang whose PodGroup no longer exists, of either API.
// Its attempt in flight ends at once, so that members waiting in Permit give
// back their nodes instead of holding them until the timeout; its state and
// timers are forgotten; and its unscheduled members go back through
// PreEnqueue, which holds them with a PodGroupNotFound Event until a
// PodGroup of that name exists again. Bound members keep running.
func (pl *Plugin) gangDeleted(key gang.Key) {
	ctx := klog.NewContext(context.Background(), pl.logger)
	pl.failGang(ctx, key, ReasonGangRejected, "its PodGroup was deleted", false)
	// An attempt whose plan expired is no longer in flight for failGang
	// to end; what it wrote goes all the same.
	pl.abandon(key, "its PodGroup was deleted")
	pl.ledger.ForgetGang(key)
	pl.core.ForgetGang(key)
	pl.activateBlocked()
	pl.activate(key)
}
