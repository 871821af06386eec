package podgroup

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gpu-gang/gpu-gang/pkg/fleet"
)

// goneNodeMemory is how long the controller remembers a deleted spot node:
// long enough for the pod garbage collector to delete the pods it ran.
const goneNodeMemory = 30 * time.Minute

// nodeLedger remembers which nodes run on spot capacity, by the capacity
// labels gpu-gang reads (see pkg/fleet), and which of them went away. A
// member lost with such a node was reclaimed with it, and a person repairing
// the job wants to know that: the capacity may not come back.
type nodeLedger struct {
	mu   sync.Mutex
	spot map[string]bool
	gone map[string]time.Time
}

// observe records a node's capacity type; deleted marks it gone at now.
// Only the node's metadata is read.
func (l *nodeLedger) observe(node metav1.Object, deleted bool, now time.Time) {
	opts := fleet.DefaultOptions()
	spot := fleet.ReadNode(node.GetLabels(), &opts).Capacity == fleet.CapacitySpot
	name := node.GetName()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.spot == nil {
		l.spot, l.gone = map[string]bool{}, map[string]time.Time{}
	}
	for name, at := range l.gone {
		if now.Sub(at) > goneNodeMemory {
			delete(l.gone, name)
			delete(l.spot, name)
		}
	}
	if !spot {
		delete(l.spot, name)
		delete(l.gone, name)
		return
	}
	l.spot[name] = true
	if deleted || node.GetDeletionTimestamp() != nil {
		l.gone[name] = now
	} else {
		delete(l.gone, name)
	}
}

// spotReclaimed reports whether node is a spot node that went away, and
// whether it is a spot node at all.
func (l *nodeLedger) spotReclaimed(node string) (reclaimed, spot bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, gone := l.gone[node]
	return gone, l.spot[node]
}

// handler keeps the ledger from the nodes' metadata, as of c.
func (l *nodeLedger) handler(c clock.PassiveClock) handler.EventHandler {
	observe := func(obj metav1.Object, deleted bool) {
		if obj != nil {
			l.observe(obj, deleted, c.Now())
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			observe(e.Object, false)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			observe(e.ObjectNew, false)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			observe(e.Object, true)
		},
	}
}
