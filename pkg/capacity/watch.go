package capacity

import (
	"fmt"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// sliceWatch is what the scheduler's informers have delivered to our own
// handlers about the objects the DRA manager's slice list derives from:
// ResourceSlices and DeviceTaintRules. It lets Inventories tell, without
// listing, that the list cannot have changed.
//
// A count of events alone cannot say so: the DRA manager lists the slice
// tracker's patched copies, which the tracker writes from its own handlers
// on the same informers, in no order with ours, so our handler may have
// counted an event the list does not show yet. The watch therefore also
// keeps the slice objects delivered to it, by name, and their fingerprint
// (the hash fingerprint gives a list): when a list of the tracker has that
// fingerprint, no DeviceTaintRule exists, and the tracker holds exactly the
// informer's objects our handler knows (with no rule, the tracker stores
// the informer's own object, not a copy). Until the next event reaches our
// handler, the tracker then lists those same objects: any change to what it
// lists starts from an informer event, which our handler receives too.
// Safe for concurrent use.
type sliceWatch struct {
	mu sync.Mutex
	// events counts the slice and DeviceTaintRule events our handlers
	// received; objects are the slices as last delivered, by name, and
	// sum the sum of their hashes (fingerprint without the length); rules
	// are the names of the DeviceTaintRules delivered and not deleted.
	// All guarded by mu.
	events  uint64
	objects map[string]*resourceapi.ResourceSlice
	sum     uint64
	rules   sets.Set[string]
}

// watchState is what the watch knew at one moment.
type watchState struct {
	// events identifies the moment: equal counts, no event in between.
	events uint64
	// fingerprint is fingerprint() of the slices delivered; noRules is
	// set when no DeviceTaintRule was.
	fingerprint uint64
	noRules     bool
}

func newSliceWatch() *sliceWatch {
	return &sliceWatch{objects: map[string]*resourceapi.ResourceSlice{}, rules: sets.New[string]()}
}

// state returns what the watch knows now.
func (w *sliceWatch) state() watchState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return watchState{events: w.events, fingerprint: w.sum ^ uint64(len(w.objects)), noRules: w.rules.Len() == 0}
}

// setSlice records that the slice name is now s, or is deleted.
func (w *sliceWatch) setSlice(name string, s *resourceapi.ResourceSlice, exists bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events++
	if old, ok := w.objects[name]; ok {
		w.sum -= sliceHash(old)
		delete(w.objects, name)
	}
	if exists {
		w.objects[name] = s
		w.sum += sliceHash(s)
	}
}

// setRule records that the DeviceTaintRule name exists or not.
func (w *sliceWatch) setRule(name string, _ *resourceapi.DeviceTaintRule, exists bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events++
	if exists {
		w.rules.Insert(name)
	} else {
		w.rules.Delete(name)
	}
}

// handlers returns the event handlers that feed the watch: slices with
// slice, rules with rule.
func (w *sliceWatch) handlers() (slices, rules cache.ResourceEventHandler) {
	return namedHandler(w.setSlice), namedHandler(w.setRule)
}

// namedHandler hands set each object of type T delivered, by name, and
// the name of each one deleted.
func namedHandler[T interface{ GetName() string }](set func(name string, obj T, exists bool)) cache.ResourceEventHandler {
	put := func(obj any) {
		if o, ok := obj.(T); ok {
			set(o.GetName(), o, true)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    put,
		UpdateFunc: func(_, obj any) { put(obj) },
		DeleteFunc: func(obj any) {
			if name, ok := deletedName(obj); ok {
				var none T
				set(name, none, false)
			}
		},
	}
}

// deletedName is the name of a deleted object, or of the object a
// tombstone stands for. Slices and rules are cluster-scoped: their key is
// their name.
func deletedName(obj any) (string, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Key, true
	}
	o, ok := obj.(interface{ GetName() string })
	if !ok {
		return "", false
	}
	return o.GetName(), true
}

// Watch feeds the inventories' change signal from informers, the
// scheduler's shared informer factory (handle.SharedInformerFactory()):
// from then on, a pass that finds no slice or DeviceTaintRule event since
// the last one whose list was confirmed (sliceWatch) reads the kept
// matcher without listing the slices. Only the first call registers
// handlers; every plugin of the scheduler may call it. Without it, every
// pass lists the slices and compares their fingerprint.
func (c *Inventories) Watch(informers informers.SharedInformerFactory) error {
	c.watchOnce.Do(func() {
		w := newSliceWatch()
		slices, rules := w.handlers()
		if _, err := informers.Resource().V1().ResourceSlices().Informer().AddEventHandler(slices); err != nil {
			c.watchErr = fmt.Errorf("watching ResourceSlices: %w", err)
			return
		}
		if _, err := informers.Resource().V1().DeviceTaintRules().Informer().AddEventHandler(rules); err != nil {
			// The slice handler stays, feeding a watch no one reads.
			c.watchErr = fmt.Errorf("watching DeviceTaintRules: %w", err)
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.watch = w
	})
	return c.watchErr
}
