package gang

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	pginformers "sigs.k8s.io/scheduler-plugins/pkg/generated/informers/externalversions"
)

// InformerSyncTimeout bounds how long StartSources waits for the first list
// of PodGroups.
const InformerSyncTimeout = 30 * time.Second

// Handle is what StartSources needs of the scheduler: a framework handle
// (fwk.Handle) has it all.
type Handle interface {
	KubeConfig() *rest.Config
	ClientSet() kubernetes.Interface
	SharedInformerFactory() informers.SharedInformerFactory
}

// StartSources builds a scheduler's Sources. It starts the informer on
// scheduler-plugins PodGroups and waits for it to sync; it decides, once,
// whether native PodGroups are watched (DecideNative, with this scheduler's
// GenericWorkload gate) and whether CompositePodGroups are read
// (DecideComposite) and, for each that is, asks the scheduler's informer
// factory for its informer, which the scheduler starts with its other
// informers and waits for before the first scheduling cycle. It logs once
// which, and why.
func StartSources(ctx context.Context, h Handle, genericWorkload bool) (*Sources, error) {
	podGroups, err := startPodGroupInformer(ctx, h.KubeConfig())
	if err != nil {
		return nil, err
	}
	native, note, err := DecideNative(ctx, h.ClientSet().Discovery(), genericWorkload)
	if err != nil {
		return nil, err
	}
	in := Informers{PodGroups: podGroups, NativeNote: note}
	logger := klog.FromContext(ctx)
	if native {
		in.Native = h.SharedInformerFactory().Scheduling().V1beta1().PodGroups().Informer()
		logger.Info("Native PodGroups (scheduling.k8s.io/v1beta1) are scheduled as gangs", "reason", note)
	} else {
		logger.Info("Native PodGroups (scheduling.k8s.io/v1beta1) are ignored", "reason", note)
	}
	composites, note, err := DecideComposite(ctx, h.ClientSet().Discovery(), native, note)
	if err != nil {
		return nil, err
	}
	in.CompositeNote = note
	if composites {
		in.Composites = h.SharedInformerFactory().Scheduling().V1alpha3().CompositePodGroups().Informer()
		logger.Info("CompositePodGroups (scheduling.k8s.io/v1alpha3) are read: their PodGroups are gangs of gangs", "reason", note)
	} else {
		logger.Info("CompositePodGroups (scheduling.k8s.io/v1alpha3) are ignored", "reason", note)
	}
	return NewSources(in), nil
}

// SharedSources hands every plugin of a scheduler the same Sources: the
// first plugin built starts them with its handle, and the others, of any
// profile, reuse them. The profiles of one scheduler share its informer
// factory, which keys the Sources, so a scheduler started again in the
// same process (tests, the simulator) gets Sources of its own; they are
// forgotten when the context they were started with ends. The zero value
// is ready to use.
type SharedSources struct {
	mu sync.Mutex
	// byFactory holds the Sources of each running scheduler. Guarded by mu,
	// which is held while Sources are started, so that a second plugin waits
	// for the first one's.
	byFactory map[informers.SharedInformerFactory]*Sources
}

// Get returns the Sources of the scheduler h belongs to, starting them
// (StartSources) if no plugin of that scheduler has yet.
func (s *SharedSources) Get(ctx context.Context, h Handle, genericWorkload bool) (*Sources, error) {
	factory := h.SharedInformerFactory()
	s.mu.Lock()
	defer s.mu.Unlock()
	if src, ok := s.byFactory[factory]; ok {
		return src, nil
	}
	src, err := StartSources(ctx, h, genericWorkload)
	if err != nil {
		return nil, err
	}
	if s.byFactory == nil {
		s.byFactory = map[informers.SharedInformerFactory]*Sources{}
	}
	s.byFactory[factory] = src
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.byFactory, factory)
	})
	return src, nil
}

// startPodGroupInformer starts an informer on scheduler-plugins PodGroups,
// on a JSON client (PodGroups are a CRD, which protobuf cannot carry),
// trimmed to what FromPodGroup reads, and waits for it to sync. A PodGroup
// API that cannot be listed is an error that says how to fix it.
func startPodGroupInformer(ctx context.Context, kubeConfig *rest.Config) (cache.SharedIndexInformer, error) {
	if kubeConfig == nil {
		return nil, errors.New("the framework handle has no kubeconfig to watch PodGroups with")
	}
	cfg := rest.CopyConfig(kubeConfig)
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	client, err := pgclientset.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building PodGroup client: %w", err)
	}
	factory := pginformers.NewSharedInformerFactory(client, 0)
	informer := factory.Scheduling().V1alpha1().PodGroups().Informer()
	if err := informer.SetTransform(SlimPodGroup); err != nil {
		return nil, fmt.Errorf("trimming PodGroups: %w", err)
	}
	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, InformerSyncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), informer.HasSynced) {
		return nil, fmt.Errorf("PodGroups (%s) could not be listed within %s: install the CRD from manifests/crds and grant the scheduler list/watch on podgroups",
			v1alpha1.SchemeGroupVersion.WithResource("podgroups"), InformerSyncTimeout)
	}
	return informer, nil
}

// SlimPodGroup is the informer transform of scheduler-plugins PodGroups: it
// keeps what FromPodGroup reads, the metadata (without managed fields) and
// the spec, and drops the status, which the status controller rewrites as
// members come and go and no plugin reads.
func SlimPodGroup(obj interface{}) (interface{}, error) {
	pg, ok := obj.(*v1alpha1.PodGroup)
	if !ok {
		return obj, nil
	}
	slim := &v1alpha1.PodGroup{TypeMeta: pg.TypeMeta, ObjectMeta: pg.ObjectMeta, Spec: pg.Spec}
	slim.ManagedFields = nil
	return slim, nil
}
