// Package gpufleet is gpu-gang's GPUFleet plugin: it keeps pods that ask
// for NVIDIA GPUs off nodes whose GPUs do not meet what the pod, or its
// gang, asks for. pkg/fleet owns every rule; this package wires them into
// the scheduling framework.
//
//   - filter.go: PreFilter reads a GPU pod's requirements (its PodGroup's
//     gpu-gang.x-k8s.io/ annotations and its own, the pod's winning) and
//     rejects it at once when no node admits it, with a sentence naming the
//     version it needs, the best in the cluster and the label read. Filter
//     applies the rules node by node: no driver upgrade in progress, CUDA
//     version and compute capability at least the minimum, a forced
//     capacity type, and no shared GPUs for pods that ask for whole ones.
//   - groups.go: a gang is uniform (one GPU product, driver major.minor and
//     capacity type by default). That is a rule over the gang's nodes
//     together, so it is the planner's to apply: PreFilter leaves a
//     placement.Grouper in the pod's CycleState, and the gang plugin, which
//     runs the profile's PreFilter and Filter plugins for the members it
//     plans, hands its groups to the planner. Node rules reach gang plans
//     the same way: the gang plugin plans only on nodes every Filter plugin
//     accepts.
//   - devices.go: GPUs that reach pods through Dynamic Resource Allocation.
//     Facts that no label gives are read from the attributes of the
//     devices NVIDIA's GPU DRA driver publishes (pkg/capacity's inventory,
//     shared by the scheduler's plugins), and pods that take the driver's
//     devices through ResourceClaims are GPU pods (fleet.PodDemand).
//   - nodes.go: facts read from a node's labels and devices are cached per
//     node and kept while they stay the same, so Filter costs a map lookup.
//   - hints.go: pods this plugin rejected are tried again when a node's
//     labels or published devices change so that it admits them, or when
//     their annotations (or their PodGroup's) change.
package gpufleet

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
	"github.com/gpu-gang/gpu-gang/pkg/apis/config/scheme"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/fleet"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = config.GPUFleetPluginName

// Plugin applies pkg/fleet's GPU rules.
type Plugin struct {
	handle fwk.Handle
	// opts are the plugin args as pkg/fleet reads them; set once in New.
	opts fleet.Options
	// sources reads gangs, whose PodGroups' annotations carry GPU
	// requirements, one informer per API; every plugin of the scheduler
	// shares them.
	sources *gang.Sources
	// podIndex is the scheduler's pod informer, indexed by gang
	// (gang.IndexMembers).
	podIndex cache.Indexer
	// nodeLister reads the labels of a node whose devices changed, for
	// hints.
	nodeLister corelisters.NodeLister
	// dra is the scheduler's DRA manager, nil when DRA is off: it reads
	// the claims and DeviceClasses that make a pod a GPU pod.
	dra fwk.SharedDRAManager
	// devices reads the devices ResourceSlices publish; nil reads node
	// labels only. Every plugin of the scheduler shares it (WithDevices).
	devices *capacity.Inventories
	// lastDevices is the matcher the last PreFilter read, for hints.
	lastDevices atomic.Pointer[capacity.Matcher]
	// kinds remembers which device kinds select GPUs.
	kinds *gpuKinds
	nodes *nodeCache
	// groupings keeps the last uniform groups per policy (groupmemo.go).
	groupings *groupings
	events    *eventRecorder
	logger    klog.Logger
}

// Option configures the plugin beyond its args.
type Option func(*Plugin)

// WithDevices has the plugin read what no node label says from the devices
// ResourceSlices publish, through devices, which every plugin of the
// scheduler shares (pkg/scheduler builds them once, keyed by the
// scheduler's DRA manager). nil, or no option, reads labels only.
func WithDevices(devices *capacity.Inventories) Option {
	return func(pl *Plugin) { pl.devices = devices }
}

var (
	_ fwk.PreFilterPlugin   = &Plugin{}
	_ fwk.FilterPlugin      = &Plugin{}
	_ fwk.EnqueueExtensions = &Plugin{}
)

// New builds the plugin from its args. It reads gangs from sources, which
// every plugin of the scheduler shares (pkg/scheduler builds them once, with
// gang.SharedSources), and devices as opts say (WithDevices).
func New(ctx context.Context, obj runtime.Object, handle fwk.Handle, sources *gang.Sources, opts ...Option) (fwk.Plugin, error) {
	args, err := scheme.DecodeGPUFleetArgs(obj, field.NewPath("pluginConfig").Key(Name).Child("args"))
	if err != nil {
		return nil, err
	}
	return newPlugin(ctx, args, handle, sources, opts...)
}

// newPlugin wires the plugin to its informers and gang sources. Tests call
// it with fake informers.
func newPlugin(ctx context.Context, args *config.GPUFleetArgs, handle fwk.Handle, sources *gang.Sources, opts ...Option) (*Plugin, error) {
	pl := &Plugin{
		handle:     handle,
		opts:       fleet.OptionsFromArgs(args),
		sources:    sources,
		nodeLister: handle.SharedInformerFactory().Core().V1().Nodes().Lister(),
		dra:        handle.SharedDRAManager(),
		kinds:      &gpuKinds{},
		events:     newEventRecorder(handle.EventRecorder(), clock.RealClock{}),
		logger:     klog.FromContext(ctx).WithValues("plugin", Name),
	}
	for _, o := range opts {
		o(pl)
	}
	if pl.dra == nil {
		pl.devices = nil // no DRA, no devices
	}
	pl.nodes = newNodeCache(&pl.opts, pl.reportProblems)
	pl.groupings = newGroupings()
	// A PodGroup that arrives or changes activates its members, found by
	// the same index the gang plugin reads (added by whichever is built
	// first).
	podInformer := handle.SharedInformerFactory().Core().V1().Pods().Informer()
	if err := gang.IndexMembers(podInformer); err != nil {
		return nil, err
	}
	pl.podIndex = podInformer.GetIndexer()
	nodeHandler := cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj interface{}) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if n, ok := obj.(*v1.Node); ok {
				pl.nodes.forget(n.Name)
			}
		},
	}
	if _, err := handle.SharedInformerFactory().Core().V1().Nodes().Informer().AddEventHandler(nodeHandler); err != nil {
		return nil, fmt.Errorf("watching nodes: %w", err)
	}
	if err := sources.Subscribe(gang.Handler{Added: pl.onGangAdded, Updated: pl.onGangUpdated}); err != nil {
		return nil, err
	}
	return pl, nil
}

// Name returns the plugin's name.
func (pl *Plugin) Name() string { return Name }

// fleetAnnotationsChanged reports whether a GPU requirement annotation
// differs between two annotation maps.
func fleetAnnotationsChanged(old, new map[string]string) bool {
	for _, k := range fleet.AnnotationKeys() {
		o, oldSet := old[k]
		n, newSet := new[k]
		if o != n || oldSet != newSet {
			return true
		}
	}
	return false
}

// groupOf returns the gang of a member, adapted from its PodGroup of
// either API; nil for a pod outside any gang, or in a native PodGroup where
// gpu-gang does not schedule native ones (its own annotations apply). A
// member whose PodGroup does not exist gets a status to wait with: its
// requirements are not known. The gang plugin holds members back until
// their PodGroup exists, so that is only the lag between the queue's
// PodGroup event and the gang sources; the member is activated when the
// sources have the PodGroup (onGangAdded).
func (pl *Plugin) groupOf(pod *v1.Pod) (*gang.Spec, *fwk.Status) {
	key, ok := gang.Of(pod)
	if !ok {
		return nil, nil
	}
	spec, err := pl.lookup(key)
	if err == nil {
		return spec, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fwk.AsStatus(fmt.Errorf("reading PodGroup %s: %w", key, err))
	}
	return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
		fmt.Sprintf("PodGroup %s, whose annotations may set the pod's GPU requirements, is not known yet; create it in namespace %s or %s",
			key, key.Namespace, key.HowToLeave()))
}

// lookup reads a gang's Spec from the gang sources. It returns nil and no
// error for a gang whose API this scheduler does not watch (native
// PodGroups where gpu-gang does not schedule them), and a NotFound error
// when the PodGroup does not exist.
func (pl *Plugin) lookup(key gang.Key) (*gang.Spec, error) {
	spec, err := pl.sources.Spec(key)
	if errors.Is(err, gang.ErrNotWatched) {
		return nil, nil
	}
	return spec, err
}

// onGangAdded activates the members of a gang whose PodGroup arrived: a
// member that came by before it waits for it (groupOf).
func (pl *Plugin) onGangAdded(s *gang.Spec) { pl.activateMembers(s.Key) }

// onGangUpdated activates a gang's members when its PodGroup's GPU
// annotations change, where the queue does not hear the API's events
// itself (native PodGroups, see gang.API.QueueHearsEvents); elsewhere the
// queue requeues them (gang.IsOwnPodGroup).
func (pl *Plugin) onGangUpdated(old, new *gang.Spec) {
	if !new.Key.API.QueueHearsEvents() && fleetAnnotationsChanged(old.Annotations, new.Annotations) {
		pl.activateMembers(new.Key)
	}
}

// activateMembers moves a gang's waiting members back to the active queue,
// as the gang plugin does when their gang changes: pkg/gang says which
// pods those are (Members, Waiting).
func (pl *Plugin) activateMembers(key gang.Key) {
	members, err := gang.Members(pl.podIndex, key)
	if err != nil {
		return
	}
	if waiting := gang.Waiting(members); len(waiting) > 0 {
		pl.logger.V(4).Info("PodGroup arrived or changed: activating its members", "podGroup", key, "pods", len(waiting))
		pl.handle.Activate(pl.logger, waiting)
	}
}
