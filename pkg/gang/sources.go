package gang

import (
	"errors"
	"fmt"
	"sync"
	"time"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/client-go/tools/cache"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pglisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"
)

// ErrNotWatched is wrapped by the error of a gang whose API this scheduler
// does not watch. The error goes on to say why, and what would change it.
var ErrNotWatched = errors.New("not watched")

// Sources is where a scheduler reads gangs: one informer per API, each read
// through the adapter of its API, so that what comes out is a Spec whichever
// API a gang is of. A scheduler builds one (StartSources, SharedSources) and
// hands it to every plugin, so that each PodGroup is watched and held once
// and every plugin sees the same version of it. Its methods are safe for
// concurrent use.
//
// A new API is one more adapter: an informer, a lister's Get, and the
// function that turns its object into a Spec (see NewSources).
//
// Where CompositePodGroups are read (DecideComposite), Sources also read the
// hierarchies they make of native PodGroups: Composite, RootOf and Tree.
type Sources struct {
	// byAPI holds one source per API, Composite included, indexed by API.
	// Set by NewSources, read only afterwards.
	byAPI []source
	// composites reads CompositePodGroups; nil when they are not watched,
	// and then byAPI[Composite] says why.
	composites *compositeSource
}

// source reads the gangs of one API.
type source interface {
	spec(key Key) (*Spec, error)
	created(key Key) (time.Time, bool)
	subscribe(h Handler) (cache.ResourceEventHandlerRegistration, error)
	hasSynced() bool
	// note says why the API is watched or not, and what would change it;
	// empty when there is nothing to say.
	note() string
	watched() bool
}

// Informers are the informers Sources read, one per API. A nil informer
// leaves its API unwatched.
type Informers struct {
	// PodGroups holds scheduler-plugins PodGroups
	// (scheduling.x-k8s.io/v1alpha1).
	PodGroups cache.SharedIndexInformer
	// Native holds Kubernetes' own PodGroups (scheduling.k8s.io/v1beta1),
	// where this scheduler schedules them (DecideNative).
	Native cache.SharedIndexInformer
	// NativeNote says why native PodGroups are watched or not, and what
	// would change it (DecideNative's note).
	NativeNote string
	// Composites holds CompositePodGroups (scheduling.k8s.io/v1alpha3),
	// where this scheduler reads them (DecideComposite). Sources index it,
	// and Native, by parent composite.
	Composites cache.SharedIndexInformer
	// CompositeNote says why CompositePodGroups are read or not
	// (DecideComposite's note).
	CompositeNote string
}

// NewSources reads gangs from informers the caller runs: the scheduler's
// (StartSources), or a test's fake ones.
func NewSources(in Informers) *Sources {
	s := &Sources{byAPI: make([]source, Composite+1)}
	if in.PodGroups != nil {
		lister := pglisters.NewPodGroupLister(in.PodGroups.GetIndexer())
		s.byAPI[XK8s] = &watchedSource[*v1alpha1.PodGroup]{
			follow: follow{informer: in.PodGroups},
			get:    func(ns, name string) (*v1alpha1.PodGroup, error) { return lister.PodGroups(ns).Get(name) },
			adapt:  FromPodGroup,
		}
	} else {
		s.byAPI[XK8s] = unwatched{why: "scheduler-plugins PodGroups are not watched"}
	}
	// A native PodGroup being deleted still defines its gang: the API
	// server keeps it, with the finalizer scheduling.k8s.io/podgroup-protection,
	// until no active pod names it, and its pods are scheduled as a gang
	// until then, as kube-scheduler's own gang scheduling does.
	if in.Native != nil {
		lister := schedulinglisters.NewPodGroupLister(in.Native.GetIndexer())
		s.byAPI[Native] = &watchedSource[*schedulingv1beta1.PodGroup]{
			follow: follow{informer: in.Native},
			get:    func(ns, name string) (*schedulingv1beta1.PodGroup, error) { return lister.PodGroups(ns).Get(name) },
			adapt:  FromNativePodGroup,
			why:    in.NativeNote,
		}
	} else {
		why := in.NativeNote
		if why == "" {
			why = "native PodGroups are not watched"
		}
		s.byAPI[Native] = unwatched{why: why}
	}
	s.byAPI[Composite] = s.newCompositeSource(in)
	return s
}

// Spec returns a gang's Spec, adapted from its API object. The error
// satisfies apierrors.IsNotFound if the object does not exist, and wraps
// ErrNotWatched if this scheduler does not watch the gang's API.
func (s *Sources) Spec(key Key) (*Spec, error) { return s.byAPI[key.API].spec(key) }

// Created returns when a gang's object was created, and false if it does not
// exist or is not watched. It adapts nothing: QueueSort asks on every
// comparison.
func (s *Sources) Created(key Key) (time.Time, bool) { return s.byAPI[key.API].created(key) }

// Watched reports whether this scheduler watches the API, and why or why
// not, with what would change it (empty when there is nothing to say).
func (s *Sources) Watched(api API) (bool, string) {
	src := s.byAPI[api]
	return src.watched(), src.note()
}

// Subscribe has h follow the gangs of every watched API (APIs; composites
// have SubscribeComposites). Each call adds one handler to each informer.
func (s *Sources) Subscribe(h Handler) error {
	for _, api := range APIs {
		if _, err := s.byAPI[api].subscribe(h); err != nil {
			return fmt.Errorf("following %s PodGroups: %w", api, err)
		}
	}
	return nil
}

// HasSynced reports whether every watched informer has listed its objects
// and every handler subscribed so far has been called for them.
func (s *Sources) HasSynced() bool {
	for _, src := range s.byAPI {
		if !src.hasSynced() {
			return false
		}
	}
	return true
}

// HandlerOf follows changes to API objects, adapted to S: Handler for
// gangs (Spec), CompositeHandler for composites (CompositeSpec). Sources
// call it once the informer's lister has the change, so that a read, inside
// a call, returns at least that version. A nil func is skipped.
type HandlerOf[S any] struct {
	// Added is called for an object that appeared, and, when the handler
	// subscribes, for each object the informer already holds.
	Added func(s S)
	// Updated is called for any change of the object, its status and
	// metadata included; Generation tells a change of its spec.
	Updated func(old, new S)
	// Deleted is called with the object's last known state.
	Deleted func(s S)
}

// Handler follows changes to gangs' API objects.
type Handler = HandlerOf[*Spec]

// CompositeHandler follows changes to CompositePodGroups.
type CompositeHandler = HandlerOf[*CompositeSpec]

// watchedSource reads one API's objects of type T from an informer.
type watchedSource[T metav1.Object] struct {
	follow
	get   func(namespace, name string) (T, error)
	adapt func(T) *Spec
	why   string
}

// follow is an informer with the handlers subscribed to it.
type follow struct {
	informer cache.SharedIndexInformer

	mu sync.Mutex
	// regs are the handlers subscribed, for hasSynced. Guarded by mu.
	regs []cache.ResourceEventHandlerRegistration
}

func (s *watchedSource[T]) spec(key Key) (*Spec, error) {
	obj, err := s.get(key.Namespace, key.Name)
	if err != nil {
		return nil, err
	}
	return s.adapt(obj), nil
}

func (s *watchedSource[T]) created(key Key) (time.Time, bool) {
	obj, err := s.get(key.Namespace, key.Name)
	if err != nil {
		return time.Time{}, false
	}
	return obj.GetCreationTimestamp().Time, true
}

func (s *watchedSource[T]) subscribe(h Handler) (cache.ResourceEventHandlerRegistration, error) {
	return subscribeAs(&s.follow, s.adapt, h)
}

// subscribeAs adds h to f's informer, adapting its objects of type T to S.
func subscribeAs[T any, S any](f *follow, adapt func(T) S, h HandlerOf[S]) (cache.ResourceEventHandlerRegistration, error) {
	reg, err := f.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if o, ok := obj.(T); ok && h.Added != nil {
				h.Added(adapt(o))
			}
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			o, ok1 := oldObj.(T)
			n, ok2 := newObj.(T)
			if ok1 && ok2 && h.Updated != nil {
				h.Updated(adapt(o), adapt(n))
			}
		},
		DeleteFunc: func(obj interface{}) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if o, ok := obj.(T); ok && h.Deleted != nil {
				h.Deleted(adapt(o))
			}
		},
	})
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.regs = append(f.regs, reg)
	return reg, nil
}

func (f *follow) hasSynced() bool {
	if !f.informer.HasSynced() {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.regs {
		if !r.HasSynced() {
			return false
		}
	}
	return true
}

func (s *watchedSource[T]) note() string  { return s.why }
func (s *watchedSource[T]) watched() bool { return true }

// unwatched is the source of an API this scheduler does not watch.
type unwatched struct {
	// why says why, and what would change it.
	why string
}

func (u unwatched) spec(Key) (*Spec, error) {
	return nil, fmt.Errorf("%w: %s", ErrNotWatched, u.why)
}

func (u unwatched) created(Key) (time.Time, bool) { return time.Time{}, false }

func (u unwatched) subscribe(Handler) (cache.ResourceEventHandlerRegistration, error) {
	return nil, nil
}

func (u unwatched) hasSynced() bool { return true }
func (u unwatched) note() string    { return u.why }
func (u unwatched) watched() bool   { return false }
