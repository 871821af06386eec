package eligibility

import (
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// Nominations knows on which nodes kube-scheduler's nominator may hold a
// nominated pod, so that a plan asks the nominator (preempt.NominatedRoom)
// about those nodes alone, not about every node. The framework's
// handle only answers node by node (fwk.PodNominator has no list), so the
// set is kept here, a superset of the nominator's nodes, from the two
// places a nomination of this scheduler comes from:
//
//   - the pod informer: the nominator takes a pending pod's
//     status.nominatedNodeName when the pod is added or updated;
//   - the gang plugin's PostFilter (package preempt), the only PostFilter of the
//     profile that nominates (DefaultPreemption is off): its nomination
//     reaches the nominator before the API server, and the nominator keeps
//     it while later updates carry no nominatedNodeName.
//
// Another nominating PostFilter (DefaultPreemption, were a profile of the
// same scheduler to enable it) would be seen here only once its status
// write reaches the informer, one API round trip after the nominator.
//
// A pod's nodes are forgotten when it is bound or deleted, which is when
// the nominator forgets it too. A node in the set that the nominator does
// not have costs one call; the answer is always the nominator's.
type Nominations struct {
	mu sync.Mutex
	// byPod are the nodes each pod may be nominated to: its status's and
	// the plugin's own; count[node] is how many such entries name node.
	byPod map[types.UID]nominatedTo
	count map[string]int
	// synced reports whether the handler has seen the informer's first
	// list; until then the set knows nothing and nodes says so.
	synced func() bool
}

// nominatedTo is where one pod may be nominated.
type nominatedTo struct {
	status, own string
}

// Watch keeps the set from the pod informer.
func (n *Nominations) Watch(informer cache.SharedIndexInformer) error {
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    n.Observe,
		UpdateFunc: func(_, obj interface{}) { n.Observe(obj) },
		DeleteFunc: n.ObserveDelete,
	})
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.synced = reg.HasSynced
	n.mu.Unlock()
	return nil
}

// Observe records a pod's status nomination, or forgets a bound pod.
func (n *Nominations) Observe(obj interface{}) {
	p, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	to := n.byPod[p.UID]
	if p.Spec.NodeName != "" {
		n.set(p.UID, to, nominatedTo{})
		return
	}
	n.set(p.UID, to, nominatedTo{status: p.Status.NominatedNodeName, own: to.own})
}

// ObserveDelete forgets a deleted pod.
func (n *Nominations) ObserveDelete(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*v1.Pod)
	if !ok {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.set(p.UID, n.byPod[p.UID], nominatedTo{})
}

// Nominate records the plugin's own nomination of a pod to node, made
// before the framework hands it to the nominator.
func (n *Nominations) Nominate(uid types.UID, node string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	to := n.byPod[uid]
	n.set(uid, to, nominatedTo{status: to.status, own: node})
}

// set replaces a pod's entry old with to, keeping count. Locked.
func (n *Nominations) set(uid types.UID, old, to nominatedTo) {
	if old == to {
		return
	}
	if n.byPod == nil {
		n.byPod, n.count = map[types.UID]nominatedTo{}, map[string]int{}
	}
	for _, node := range []string{old.status, old.own} {
		if node == "" {
			continue
		}
		if n.count[node]--; n.count[node] <= 0 {
			delete(n.count, node)
		}
	}
	for _, node := range []string{to.status, to.own} {
		if node != "" {
			n.count[node]++
		}
	}
	if to == (nominatedTo{}) {
		delete(n.byPod, uid)
	} else {
		n.byPod[uid] = to
	}
}

// Nodes returns the nodes that may have a nominated pod, in name order;
// known is false until the handler has seen the informer's first list
// (every node may have one then).
func (n *Nominations) Nodes() (nodes []string, known bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.synced == nil || !n.synced() {
		return nil, false
	}
	out := make([]string, 0, len(n.count))
	for node := range n.count {
		out = append(out, node)
	}
	slices.Sort(out)
	return out, true
}
