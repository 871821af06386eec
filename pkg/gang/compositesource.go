package gang

import (
	"fmt"
	"slices"
	"strings"
	"time"

	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1alpha3"
	"k8s.io/client-go/tools/cache"
)

// ParentIndex is the index Sources add to the informers of native PodGroups
// and of CompositePodGroups: by namespace/name of the parent composite the
// object names in spec.parentCompositePodGroupName.
const ParentIndex = "gpu-gang.x-k8s.io/parent-composite"

// compositeSource reads CompositePodGroups, and the children of each from
// the parent index of its informer and of native PodGroups'.
type compositeSource struct {
	follow
	lister schedulinglisters.CompositePodGroupLister
	// native is the informer of native PodGroups, which always comes with
	// composites.
	native cache.SharedIndexInformer
	why    string
}

// newCompositeSource builds the source of composites, which NewSources
// keeps in s.composites and byAPI[Composite]: unwatched without informers
// for both composites and native PodGroups.
func (s *Sources) newCompositeSource(in Informers) source {
	why := in.CompositeNote
	switch {
	case in.Composites == nil:
		if why == "" {
			why = "CompositePodGroups are not read"
		}
		return unwatched{why: why}
	case in.Native == nil:
		return unwatched{why: "CompositePodGroups group native PodGroups, which are not watched"}
	}
	// An index another Sources on the same informers added already is the
	// same function; an informer that refuses one (it stopped) is read by
	// a scan instead (children).
	for _, informer := range []cache.SharedIndexInformer{in.Composites, in.Native} {
		if _, ok := informer.GetIndexer().GetIndexers()[ParentIndex]; !ok {
			_ = informer.AddIndexers(cache.Indexers{ParentIndex: indexByParent})
		}
	}
	s.composites = &compositeSource{
		follow: follow{informer: in.Composites},
		lister: schedulinglisters.NewCompositePodGroupLister(in.Composites.GetIndexer()),
		native: in.Native,
		why:    why,
	}
	return s.composites
}

// indexByParent is the ParentIndex function.
func indexByParent(obj interface{}) ([]string, error) {
	var parent *string
	switch o := obj.(type) {
	case *schedulingv1alpha3.CompositePodGroup:
		parent = o.Spec.ParentCompositePodGroupName
	case *schedulingv1beta1.PodGroup:
		parent = o.Spec.ParentCompositePodGroupName
	}
	if parent == nil || *parent == "" {
		return nil, nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	return []string{m.GetNamespace() + "/" + *parent}, nil
}

// spec refuses: a composite is no gang of pods.
func (c *compositeSource) spec(key Key) (*Spec, error) {
	return nil, fmt.Errorf("%s has no members of its own: read it with Sources.Composite, and the hierarchy it roots with Sources.Tree", key)
}

func (c *compositeSource) created(key Key) (time.Time, bool) {
	cpg, err := c.lister.CompositePodGroups(key.Namespace).Get(key.Name)
	if err != nil {
		return time.Time{}, false
	}
	return cpg.CreationTimestamp.Time, true
}

// subscribe has nothing for gangs' handlers: composites have
// SubscribeComposites.
func (c *compositeSource) subscribe(Handler) (cache.ResourceEventHandlerRegistration, error) {
	return nil, nil
}

func (c *compositeSource) note() string  { return c.why }
func (c *compositeSource) watched() bool { return true }

// children lists, from the parent index (or a scan of an informer that has
// none), the objects that name namespace/parent as their parent.
func children[T any](informer cache.SharedIndexInformer, namespace, parent string) ([]T, error) {
	key := namespace + "/" + parent
	var objs []interface{}
	if _, ok := informer.GetIndexer().GetIndexers()[ParentIndex]; ok {
		var err error
		if objs, err = informer.GetIndexer().ByIndex(ParentIndex, key); err != nil {
			return nil, err
		}
	} else {
		for _, o := range informer.GetStore().List() {
			if keys, _ := indexByParent(o); len(keys) == 1 && keys[0] == key {
				objs = append(objs, o)
			}
		}
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// Composite returns a composite's CompositeSpec, adapted from its API
// object. The error satisfies apierrors.IsNotFound if it does not exist,
// and wraps ErrNotWatched if this scheduler does not read composites.
func (s *Sources) Composite(key Key) (*CompositeSpec, error) {
	if s.composites == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotWatched, s.byAPI[Composite].note())
	}
	cpg, err := s.composites.lister.CompositePodGroups(key.Namespace).Get(key.Name)
	if err != nil {
		return nil, err
	}
	return FromCompositePodGroup(cpg), nil
}

// SubscribeComposites has h follow CompositePodGroups, where they are read.
// Each call adds one handler to their informer.
func (s *Sources) SubscribeComposites(h CompositeHandler) error {
	if s.composites == nil {
		return nil
	}
	if _, err := subscribeAs(&s.composites.follow, FromCompositePodGroup, h); err != nil {
		return fmt.Errorf("following CompositePodGroups: %w", err)
	}
	return nil
}

// RootOf returns the root of the gang a PodGroup belongs to (see the
// function RootOf), read from the informers. A native PodGroup that names a
// parent where composites are not read gets an error wrapping
// ErrNotWatched, which says why.
func (s *Sources) RootOf(key Key) (Key, error) { return RootOf(sourcesReader{s}, key) }

// Tree reads the hierarchy rooted at key (see BuildTree) from the
// informers.
func (s *Sources) Tree(key Key) (*Tree, error) { return BuildTree(sourcesReader{s}, key) }

// sourcesReader reads hierarchies from Sources.
type sourcesReader struct{ s *Sources }

func (r sourcesReader) PodGroup(namespace, name string) (*Spec, error) {
	return r.s.Spec(Key{API: Native, Namespace: namespace, Name: name})
}

func (r sourcesReader) Composite(namespace, name string) (*CompositeSpec, error) {
	return r.s.Composite(Key{API: Composite, Namespace: namespace, Name: name})
}

func (r sourcesReader) Children(namespace, parent string) ([]*CompositeSpec, []*Spec, error) {
	c := r.s.composites
	if c == nil {
		return nil, nil, fmt.Errorf("%w: %s", ErrNotWatched, r.s.byAPI[Composite].note())
	}
	cpgs, err := children[*schedulingv1alpha3.CompositePodGroup](c.informer, namespace, parent)
	if err != nil {
		return nil, nil, err
	}
	pgs, err := children[*schedulingv1beta1.PodGroup](c.native, namespace, parent)
	if err != nil {
		return nil, nil, err
	}
	composites := make([]*CompositeSpec, len(cpgs))
	for i, o := range cpgs {
		composites[i] = FromCompositePodGroup(o)
	}
	specs := make([]*Spec, len(pgs))
	for i, o := range pgs {
		specs[i] = FromNativePodGroup(o)
	}
	return composites, specs, nil
}

// PodGroupsUnder returns, in name order, the native PodGroups below the
// composite key names, through the composites below it that still exist:
// those that name it, or one of them, as their parent. The composite itself
// need not exist any more: its children still name it, and a scheduler
// that hears of its deletion finds through them the members whose gang it
// decided.
func (s *Sources) PodGroupsUnder(key Key) ([]Key, error) {
	r := sourcesReader{s}
	var out []Key
	seen := map[string]bool{key.Name: true}
	level := []string{key.Name}
	for depth := 0; len(level) > 0 && depth < MaxTreeDepth; depth++ {
		var next []string
		for _, parent := range level {
			composites, specs, err := r.Children(key.Namespace, parent)
			if err != nil {
				return nil, err
			}
			for _, c := range composites {
				if !seen[c.Key.Name] {
					seen[c.Key.Name] = true
					next = append(next, c.Key.Name)
				}
			}
			for _, sp := range specs {
				out = append(out, sp.Key)
			}
		}
		level = next
	}
	slices.SortFunc(out, func(a, b Key) int { return strings.Compare(a.Name, b.Name) })
	return slices.Compact(out), nil
}
