package capacity

import (
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
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
// the informer's own object, not a copy). Any later change to what it lists
// starts from an informer event, which our handler receives too, though
// not necessarily first: until it does, the kept matcher trails the
// tracker's list by the gap between two handlers' deliveries of one event,
// as any informer-fed cache trails the API server, and the first pass
// after it lists again. Safe for concurrent use.
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
// matcher without listing the slices, and one that finds no claim event
// (Claims) the kept allocated devices without listing the claims. Only the first call registers
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
		claims := newClaimWatch()
		if _, err := informers.Resource().V1().ResourceClaims().Informer().AddEventHandler(claims.handler()); err != nil {
			c.watchErr = fmt.Errorf("watching ResourceClaims: %w", err)
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.watch, c.claims = w, claims
	})
	return c.watchErr
}

// Claims returns the watch of ResourceClaims that Watch feeds, nil before
// it: the plugins of every profile read the same one.
func (c *Inventories) Claims() *ClaimWatch {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.claims
}

// ClaimWatch is what the scheduler's informers have delivered to our own
// handler about ResourceClaims, the objects the DRA manager's claim
// tracker lists. It lets a planning pass tell, without listing the claims,
// that the devices they hold cannot have changed (allocatedCache).
//
// As with slices, a count of events alone cannot say so: the tracker's
// claim cache is fed by its own handler on the same informer, in no order
// with ours. The watch therefore also keeps a mark of each claim delivered
// (claimMark), by key, and their sum: when the tracker lists claims with
// the same marks, it holds exactly the claims our handler knows, and until
// the next event reaches our handler it changes only by what the
// scheduler does in memory: allocations in flight (which a pass asks the
// tracker about, claim by claim), and claim objects assumed after an API
// call, which DynamicResources makes only with an allocation it had in
// flight, or without changing the allocation. A plugin that assumes a
// claim with a new allocation calls Changed. Safe for concurrent use.
type ClaimWatch struct {
	mu sync.Mutex
	// claims are the claims as last delivered, by key, and sum the sum
	// of their marks; extended counts, by pod, the claims that
	// kube-scheduler made for a pod's DRA-served extended resources. All
	// guarded by mu. events counts the events delivered and the Changed
	// calls; written under mu, read without.
	claims   map[string]watchedClaim
	sum      uint64
	extended map[PodRef]int
	events   atomic.Uint64
}

// watchedClaim is what the watch keeps of one claim.
type watchedClaim struct {
	mark uint64
	// extendedFor is the pod whose extended resources the claim serves,
	// when it is such a claim.
	extendedFor *PodRef
}

// PodRef names a pod by namespace and UID, as a claim's owner reference
// does with the claim's namespace.
type PodRef struct {
	Namespace string
	UID       types.UID
}

// claimWatchState is what a ClaimWatch knew at one moment.
type claimWatchState struct {
	events      uint64
	fingerprint uint64
}

func newClaimWatch() *ClaimWatch {
	return &ClaimWatch{claims: map[string]watchedClaim{}, extended: map[PodRef]int{}}
}

// state returns what the watch knows now.
func (w *ClaimWatch) state() claimWatchState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return claimWatchState{events: w.events.Load(), fingerprint: w.sum ^ uint64(len(w.claims))}
}

// set records that the claim key is now c, or is deleted.
func (w *ClaimWatch) set(key string, c *resourceapi.ResourceClaim, exists bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if old, ok := w.claims[key]; ok {
		w.sum -= old.mark
		if ref := old.extendedFor; ref != nil {
			if w.extended[*ref]--; w.extended[*ref] == 0 {
				delete(w.extended, *ref)
			}
		}
		delete(w.claims, key)
	}
	if exists {
		wc := watchedClaim{mark: claimMark(c), extendedFor: ExtendedResourceOwner(c)}
		w.claims[key] = wc
		w.sum += wc.mark
		if ref := wc.extendedFor; ref != nil {
			w.extended[*ref]++
		}
	}
	w.events.Add(1)
}

// HasExtendedResourceClaim reports whether a claim our handler has seen
// serves the extended resources of pod (kube-scheduler makes one in the
// binding cycle of a pod whose extended resources DRA serves, and finds it
// by listing every claim). A claim made a moment ago may not have reached
// our handler yet.
func (w *ClaimWatch) HasExtendedResourceClaim(pod PodRef) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.extended[pod] > 0
}

// ExtendedResourceOwner returns the pod that controls c when c is a claim
// kube-scheduler made for a pod's extended resources, nil otherwise.
func ExtendedResourceOwner(c *resourceapi.ResourceClaim) *PodRef {
	if c.Annotations[resourceapi.ExtendedResourceClaimAnnotation] != "true" {
		return nil
	}
	for _, or := range c.OwnerReferences {
		if or.Controller != nil && *or.Controller {
			return &PodRef{Namespace: c.Namespace, UID: or.UID}
		}
	}
	return nil
}

// Changed tells the watch that the tracker may hold a change our handler
// has not seen: a claim object assumed with an allocation the tracker did
// not hold in flight, or an event the claim cache delivered before the
// informer delivered it to our handler. The next pass reads the claims
// again.
func (w *ClaimWatch) Changed() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events.Add(1)
}

// handler returns the event handler that feeds the watch.
func (w *ClaimWatch) handler() cache.ResourceEventHandler {
	put := func(obj any) {
		c, ok := obj.(*resourceapi.ResourceClaim)
		if !ok {
			return
		}
		if key, err := cache.MetaNamespaceKeyFunc(c); err == nil {
			w.set(key, c, true)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    put,
		UpdateFunc: func(_, obj any) { put(obj) },
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				w.set(key, nil, false)
			}
		},
	}
}

// claimMark identifies one version of a claim object as far as the
// devices it holds go: its UID, its resource version, and whether it is
// allocated. It reads content, not the object's address: the tracker
// lists the object DynamicResources assumed after writing a claim, a copy
// of what the informer delivers later (which the tracker then keeps, the
// version being no newer), so the same version may be two objects. The
// allocation's presence covers clients that set no resource version (an
// allocation, once written, cannot change but to none).
func claimMark(c *resourceapi.ResourceClaim) uint64 {
	return maphash.Comparable(claimSeed, struct {
		uid       types.UID
		version   string
		allocated bool
	}{c.UID, c.ResourceVersion, c.Status.Allocation != nil})
}

// claimsFingerprint is the fingerprint of the claims a tracker lists, as
// ClaimWatch's state gives it for the claims delivered.
func claimsFingerprint(claims []*resourceapi.ResourceClaim) uint64 {
	var sum uint64
	for _, c := range claims {
		sum += claimMark(c)
	}
	return sum ^ uint64(len(claims))
}

// claimSeed is the hash seed of claim marks, one per process.
var claimSeed = maphash.MakeSeed()
