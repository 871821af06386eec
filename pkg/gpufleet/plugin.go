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
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
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
	"github.com/gpu-gang/gpu-gang/pkg/fleet"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = "GPUFleet"

// informerSyncTimeout bounds how long New waits for the PodGroup informer.
const informerSyncTimeout = 30 * time.Second

// Plugin applies pkg/fleet's GPU rules.
type Plugin struct {
	handle fwk.Handle
	// opts are the plugin args as pkg/fleet reads them; set once in New.
	opts      fleet.Options
	pgLister  pglisters.PodGroupLister
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
	if err := informer.SetTransform(slimPodGroup); err != nil {
		return nil, fmt.Errorf("trimming PodGroups: %w", err)
	}
	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, informerSyncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), informer.HasSynced) {
		return nil, fmt.Errorf("PodGroups (%s) could not be listed within %s: install the CRD from manifests/crds and grant the scheduler list/watch on podgroups",
			v1alpha1.SchemeGroupVersion.WithResource("podgroups"), informerSyncTimeout)
	}
	return NewWithPodGroups(ctx, args, handle, pgInformer.Lister(), informer)
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

// podGroupOf returns the PodGroup of a gang member, nil for a pod outside
// any gang. A member whose PodGroup the informer has not seen yet gets a
// status to wait with: its requirements are not known. The gang plugin
// holds members back until their PodGroup exists, so that is only the lag
// between two informers; the member is activated when it ends. A member of
// a native PodGroup (scheduling.k8s.io/v1beta1) has its own annotations
// only: this plugin reads scheduler-plugins PodGroups.
func (pl *Plugin) podGroupOf(pod *v1.Pod) (*v1alpha1.PodGroup, *fwk.Status) {
	key, ok := gang.Of(pod)
	if !ok || key.API != gang.XK8s {
		return nil, nil
	}
	pg, err := pl.pgLister.PodGroups(key.Namespace).Get(key.Name)
	if err == nil {
		return pg, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fwk.AsStatus(fmt.Errorf("reading PodGroup %s: %w", key, err))
	}
	pl.mu.Lock()
	pl.awaiting[key] = true
	pl.mu.Unlock()
	// The informer may have added it between the Get and the line above.
	if _, err := pl.pgLister.PodGroups(key.Namespace).Get(key.Name); err == nil {
		pl.activateGang(key)
	}
	return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
		fmt.Sprintf("PodGroup %s, whose annotations may set the pod's GPU requirements, is not known yet; create it in namespace %s or remove the label %s from the pod",
			key, key.Namespace, scheduling.PodGroupLabel))
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
	if !waited {
		return
	}
	pods, err := pl.podLister.Pods(key.Namespace).List(labels.SelectorFromSet(labels.Set{scheduling.PodGroupLabel: key.Name}))
	if err != nil {
		return
	}
	waiting := map[string]*v1.Pod{}
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			waiting[p.Namespace+"/"+p.Name] = p
		}
	}
	if len(waiting) > 0 {
		pl.logger.V(4).Info("PodGroup arrived: activating its members", "podGroup", key, "pods", len(waiting))
		pl.handle.Activate(pl.logger, waiting)
	}
}
