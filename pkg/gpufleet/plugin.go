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
//   - nodes.go: facts read from a node's labels are cached per node and
//     kept while its labels stay the same, so Filter costs a map lookup.
//   - hints.go: pods this plugin rejected are tried again when a node's
//     labels change so that it admits them, or when their annotations (or
//     their PodGroup's) change.
package gpufleet

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	schedulinginformers "k8s.io/client-go/informers/scheduling/v1beta1"
	corelisters "k8s.io/client-go/listers/core/v1"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1beta1"
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
	"github.com/gpu-gang/gpu-gang/pkg/fleet"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = "GPUFleet"

// Plugin applies pkg/fleet's GPU rules.
type Plugin struct {
	handle fwk.Handle
	// opts are the plugin args as pkg/fleet reads them; set once in New.
	opts     fleet.Options
	pgLister pglisters.PodGroupLister
	// native reads Kubernetes' own PodGroups (scheduling.k8s.io/v1beta1)
	// where gpu-gang schedules them (gang.DecideNative); nil elsewhere, and
	// then their members have their own annotations only.
	native    schedulinglisters.PodGroupLister
	podLister corelisters.PodLister
	nodes     *nodeCache
	events    *eventRecorder
	logger    klog.Logger

	// awaiting holds the gangs whose PodGroup this plugin's informer had
	// not seen when a member came by; their members are activated when it
	// does (see onPodGroupAdd). Guarded by mu.
	mu       sync.Mutex
	awaiting map[gang.Key]bool
}

var (
	_ fwk.PreFilterPlugin   = &Plugin{}
	_ fwk.FilterPlugin      = &Plugin{}
	_ fwk.EnqueueExtensions = &Plugin{}
)

// New builds the plugin from its args. It watches PodGroups, whose
// annotations carry a gang's requirements, on a JSON client (PodGroups are
// a CRD, which protobuf cannot carry), keeping only their metadata.
func New(ctx context.Context, obj runtime.Object, handle fwk.Handle) (fwk.Plugin, error) {
	args, err := scheme.DecodeGPUFleetArgs(obj, field.NewPath("pluginConfig").Key(Name).Child("args"))
	if err != nil {
		return nil, err
	}
	pgLister, informer, err := gang.StartPodGroupInformer(ctx, handle.KubeConfig(), slimPodGroup)
	if err != nil {
		return nil, err
	}
	pl, err := NewWithPodGroups(ctx, args, handle, pgLister, informer)
	if err != nil {
		return nil, err
	}
	native, _, err := gang.DecideNative(ctx, handle.ClientSet().Discovery(), utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload))
	if err != nil {
		return nil, err
	}
	if native {
		// The scheduler's own informer factory starts the informer, and
		// waits for it to sync before the first scheduling cycle.
		if err := pl.WatchNative(handle.SharedInformerFactory().Scheduling().V1beta1().PodGroups()); err != nil {
			return nil, err
		}
	}
	return pl, nil
}

// WatchNative reads the annotations of Kubernetes' own PodGroups from
// informer, as of scheduler-plugins ones, and activates the members that
// waited for a PodGroup, or whose PodGroup's GPU annotations changed.
// kube-scheduler queues no pod on native PodGroup events while its
// GenericWorkload gate is off (the only way gpu-gang schedules them), so
// the plugin follows them itself.
func (pl *Plugin) WatchNative(informer schedulinginformers.PodGroupInformer) error {
	pl.native = informer.Lister()
	_, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if pg, ok := obj.(*schedulingv1beta1.PodGroup); ok {
				pl.activateGang(gang.Key{API: gang.Native, Namespace: pg.Namespace, Name: pg.Name})
			}
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			o, ok1 := oldObj.(*schedulingv1beta1.PodGroup)
			n, ok2 := newObj.(*schedulingv1beta1.PodGroup)
			if ok1 && ok2 && fleetAnnotationsChanged(o.Annotations, n.Annotations) {
				pl.activateMembers(gang.Key{API: gang.Native, Namespace: n.Namespace, Name: n.Name})
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watching native PodGroups: %w", err)
	}
	return nil
}

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

// NewWithPodGroups builds the plugin on a PodGroup lister its caller keeps
// in sync: tests, and embedders that already watch PodGroups. pgInformer,
// when not nil, is the lister's informer; the plugin watches it for the
// PodGroups members wait for.
func NewWithPodGroups(ctx context.Context, args *config.GPUFleetArgs, handle fwk.Handle, pgLister pglisters.PodGroupLister,
	pgInformer cache.SharedIndexInformer) (*Plugin, error) {
	pl := &Plugin{
		handle:    handle,
		opts:      fleet.OptionsFromArgs(args),
		pgLister:  pgLister,
		podLister: handle.SharedInformerFactory().Core().V1().Pods().Lister(),
		events:    newEventRecorder(handle.EventRecorder(), clock.RealClock{}),
		logger:    klog.FromContext(ctx).WithValues("plugin", Name),
		awaiting:  map[gang.Key]bool{},
	}
	pl.nodes = newNodeCache(&pl.opts, pl.reportLabelProblems)
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
	if pgInformer != nil {
		if _, err := pgInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: pl.onPodGroupAdd}); err != nil {
			return nil, fmt.Errorf("watching PodGroups: %w", err)
		}
	}
	return pl, nil
}

// Name returns the plugin's name.
func (pl *Plugin) Name() string { return Name }

// slimPodGroup keeps what the plugin reads of a PodGroup: its identity and
// annotations.
func slimPodGroup(obj interface{}) (interface{}, error) {
	pg, ok := obj.(*v1alpha1.PodGroup)
	if !ok {
		return obj, nil
	}
	return &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{
		Namespace: pg.Namespace, Name: pg.Name, UID: pg.UID, ResourceVersion: pg.ResourceVersion,
		Annotations: pg.Annotations, DeletionTimestamp: pg.DeletionTimestamp,
	}}, nil
}

// groupOf returns the gang of a member, adapted from its PodGroup of
// either API; nil for a pod outside any gang, or in a native PodGroup where
// gpu-gang does not schedule native ones (its own annotations apply). A
// member whose PodGroup the informer has not seen yet gets a status to
// wait with: its requirements are not known. The gang plugin holds members
// back until their PodGroup exists, so that is only the lag between two
// informers; the member is activated when it ends.
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
	pl.mu.Lock()
	pl.awaiting[key] = true
	pl.mu.Unlock()
	// The informer may have added it between the lookup and the line above.
	if _, err := pl.lookup(key); err == nil {
		pl.activateGang(key)
	}
	leave := "remove the label " + scheduling.PodGroupLabel + " from the pod"
	if key.API == gang.Native {
		leave = "recreate the pod without spec.schedulingGroup"
	}
	return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
		fmt.Sprintf("PodGroup %s, whose annotations may set the pod's GPU requirements, is not known yet; create it in namespace %s or %s",
			key, key.Namespace, leave))
}

// lookup reads a gang's PodGroup from the lister of its API. It returns
// nil and no error for a native gang when native PodGroups are not read,
// and a NotFound error when the PodGroup does not exist.
func (pl *Plugin) lookup(key gang.Key) (*gang.Spec, error) {
	if key.API == gang.Native {
		if pl.native == nil {
			return nil, nil
		}
		pg, err := pl.native.PodGroups(key.Namespace).Get(key.Name)
		if err != nil {
			return nil, err
		}
		return gang.FromNativePodGroup(pg), nil
	}
	pg, err := pl.pgLister.PodGroups(key.Namespace).Get(key.Name)
	if err != nil {
		return nil, err
	}
	return gang.FromPodGroup(pg), nil
}

// onPodGroupAdd activates the members that waited for a PodGroup.
func (pl *Plugin) onPodGroupAdd(obj interface{}) {
	pg, ok := obj.(*v1alpha1.PodGroup)
	if !ok {
		return
	}
	pl.activateGang(gang.Key{Namespace: pg.Namespace, Name: pg.Name})
}

func (pl *Plugin) activateGang(key gang.Key) {
	pl.mu.Lock()
	waited := pl.awaiting[key]
	delete(pl.awaiting, key)
	pl.mu.Unlock()
	if waited {
		pl.activateMembers(key)
	}
}

// activateMembers moves a gang's unbound members back to the active queue.
func (pl *Plugin) activateMembers(key gang.Key) {
	var pods []*v1.Pod
	var err error
	if key.API == gang.Native {
		// Native members name their PodGroup in the spec, which no
		// selector reaches.
		pods, err = pl.podLister.Pods(key.Namespace).List(labels.Everything())
	} else {
		pods, err = pl.podLister.Pods(key.Namespace).List(labels.SelectorFromSet(labels.Set{scheduling.PodGroupLabel: key.Name}))
	}
	if err != nil {
		return
	}
	waiting := map[string]*v1.Pod{}
	for _, p := range pods {
		if k, ok := gang.Of(p); ok && k == key && p.Spec.NodeName == "" {
			waiting[p.Namespace+"/"+p.Name] = p
		}
	}
	if len(waiting) > 0 {
		pl.logger.V(4).Info("PodGroup arrived or changed: activating its members", "podGroup", key, "pods", len(waiting))
		pl.handle.Activate(pl.logger, waiting)
	}
}
