package podgroup

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling/v1alpha1"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// Options configures the manager NewManager builds.
type Options struct {
	// LeaderElection turns on leader election on the Lease
	// LeaderElectionNamespace/LeaderElectionID. Run with it on wherever
	// more than one replica may run.
	LeaderElection          bool
	LeaderElectionNamespace string
	LeaderElectionID        string

	// MetricsBindAddress serves Prometheus metrics over HTTPS, behind
	// delegated authentication and authorization (the caller needs RBAC to
	// GET /metrics, as with kube-scheduler's). "0" turns metrics off.
	MetricsBindAddress string
	// HealthProbeBindAddress serves /healthz and /readyz over HTTP. "0" or
	// "" turns them off.
	HealthProbeBindAddress string

	// MissingMembersGrace: see Config.MissingMembersGrace.
	MissingMembersGrace time.Duration
	// Workers is how many PodGroups are reconciled at once.
	Workers int
	// Clock is the reconciler's time source; nil means the real clock.
	Clock clock.PassiveClock
	// SchedulerNames are the scheduler names gpu-gang's profiles run, whose
	// native PodGroups the controller reports on; empty means
	// DefaultSchedulerName. Native PodGroups of other schedulers are theirs
	// to report on.
	SchedulerNames []string
	// SkipNameValidation lets more than one manager in a process run the
	// controller, one after another: tests do. controller-runtime refuses
	// a second controller of the same name otherwise.
	SkipNameValidation bool
}

// Scheme returns a scheme with the built-in types (Kubernetes' own
// scheduling.k8s.io/v1beta1 PodGroup and v1alpha3 CompositePodGroup among
// them) and the PodGroup of package
// scheduling/v1alpha1 (with status conditions), and not scheduler-plugins'
// PodGroup type: a scheme maps each kind to one Go type.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

// NewManager builds a controller-runtime manager running the PodGroup status
// controller against the cluster cfg points at, with a Reconciler of
// scheduler-plugins PodGroups and, if the API server serves Kubernetes' own
// PodGroups (scheduling.k8s.io/v1beta1), one of those beside it, and one of
// CompositePodGroups (scheduling.k8s.io/v1alpha3) if it serves those too;
// it logs once which. Start it with its Start method.
func NewManager(ctx context.Context, cfg *rest.Config, opts Options) (ctrl.Manager, error) {
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the discovery client: %w", err)
	}
	native, err := gang.NativeServed(ctx, disc, gang.DiscoveryTimeout)
	if err != nil {
		return nil, err
	}
	composites := false
	if native {
		if composites, err = gang.CompositeServed(ctx, disc, gang.DiscoveryTimeout); err != nil {
			return nil, err
		}
	}
	pods, err := podCache(native)
	if err != nil {
		return nil, err
	}
	metrics := metricsserver.Options{BindAddress: opts.MetricsBindAddress}
	if metrics.BindAddress != "0" && metrics.BindAddress != "" {
		metrics.SecureServing = true
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: Scheme(),
		Cache: cache.Options{
			ByObject:         map[client.Object]cache.ByObject{&corev1.Pod{}: pods},
			DefaultTransform: cache.TransformStripManagedFields(),
		},
		Metrics:                 metrics,
		HealthProbeBindAddress:  opts.HealthProbeBindAddress,
		LeaderElection:          opts.LeaderElection,
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
		LeaderElectionID:        opts.LeaderElectionID,
		// A replica that shuts down (a rollout, a drained node) hands the
		// lease over at once instead of making the next leader wait for it
		// to expire. Start returns right after, so nothing runs unled.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return nil, fmt.Errorf("building the manager: %w", err)
	}
	c := opts.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	rc := Config{
		Client:              mgr.GetClient(),
		Recorder:            mgr.GetEventRecorder(Name),
		Clock:               c,
		MissingMembersGrace: opts.MissingMembersGrace,
	}
	ctrlOpts := controller.Options{MaxConcurrentReconciles: max(opts.Workers, 1)}
	if opts.SkipNameValidation {
		ctrlOpts.SkipNameValidation = &opts.SkipNameValidation
	}
	if err := NewPodGroupReconciler(rc).SetupWithManager(ctx, mgr, ctrlOpts); err != nil {
		return nil, err
	}
	logger := klog.FromContext(ctx)
	if native {
		if err := NewNativePodGroupReconciler(rc, opts.SchedulerNames).SetupWithManager(ctx, mgr, ctrlOpts); err != nil {
			return nil, err
		}
		logger.Info("Native PodGroups (scheduling.k8s.io/v1beta1) are served: their status is kept too", "schedulerNames", opts.SchedulerNames)
		// After the native reconciler, whose member index it lists with.
		if composites {
			if err := NewCompositePodGroupReconciler(rc, opts.SchedulerNames).SetupWithManager(ctx, mgr, ctrlOpts); err != nil {
				return nil, err
			}
			logger.Info("CompositePodGroups (scheduling.k8s.io/v1alpha3) are served: their status is kept too")
		} else {
			logger.Info("CompositePodGroups (scheduling.k8s.io/v1alpha3) are ignored: the API server does not serve them")
		}
	} else {
		logger.Info("Native PodGroups (scheduling.k8s.io/v1beta1) are ignored: the API server does not serve them")
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	// Ready once the cache has synced, on every replica: followers keep a
	// warm cache so that taking over is quick.
	if err := mgr.AddReadyzCheck("cache-synced", cacheSynced(mgr.GetCache())); err != nil {
		return nil, err
	}
	return mgr, nil
}

// podCache is how the manager's cache holds pods. Without native PodGroups,
// it holds only pods that carry the scheduler-plugins label: everything else
// on a large cluster is memory spent for nothing. Native members carry no
// label, and pods cannot be selected by spec.schedulingGroup, so with
// native PodGroups the cache lists every pod and keeps of a pod outside
// every gang only what tells its versions apart (slimNonMember).
func podCache(native bool) (cache.ByObject, error) {
	if native {
		return cache.ByObject{Transform: slimNonMember}, nil
	}
	inGroup, err := labels.NewRequirement(scheduling.PodGroupLabel, selection.Exists, nil)
	if err != nil {
		return cache.ByObject{}, err
	}
	return cache.ByObject{Label: labels.NewSelector().Add(*inGroup)}, nil
}

// slimNonMember drops a pod's managed fields and, if it belongs to no gang,
// everything but its identity and labels: a label added later makes it a
// member, and the next version is kept whole.
func slimNonMember(obj any) (any, error) {
	obj, err := cache.TransformStripManagedFields()(obj)
	if err != nil {
		return obj, err
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	if _, member := gang.Of(p); member {
		return p, nil
	}
	return &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: p.Labels, DeletionTimestamp: p.DeletionTimestamp},
	}, nil
}

// cacheSynced is a readiness check that passes once the cache's informers
// have synced.
func cacheSynced(c cache.Cache) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), 100*time.Millisecond)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New("the informer cache has not synced yet")
		}
		return nil
	}
}
