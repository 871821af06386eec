package coscheduling

import (
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/preempt"
)

// nominations knows on which nodes kube-scheduler's nominator may hold a
// nominated pod, so that a plan asks the nominator (preempt.NominatedRoom)
// about those nodes alone, not about every node (issue 18). The framework's
// handle only answers node by node (fwk.PodNominator has no list), so the
// set is kept here, a superset of the nominator's nodes, from the two
// places a nomination of this scheduler comes from:
//
//   - the pod informer: the nominator takes a pending pod's
//     status.nominatedNodeName when the pod is added or updated;
//   - this plugin's PostFilter (package preempt), the only PostFilter of the
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
type nominations struct {
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

// watch keeps the set from the pod informer.
func (n *nominations) watch(informer cache.SharedIndexInformer) error {
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    n.observe,
		UpdateFunc: func(_, obj interface{}) { n.observe(obj) },
		DeleteFunc: n.observeDelete,
	})
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.synced = reg.HasSynced
	n.mu.Unlock()
	return nil
}

// observe records a pod's status nomination, or forgets a bound pod.
func (n *nominations) observe(obj interface{}) {
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

func (n *nominations) observeDelete(obj interface{}) {
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

// nominate records the plugin's own nomination of a pod to node, made
// before the framework hands it to the nominator.
func (n *nominations) nominate(uid types.UID, node string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	to := n.byPod[uid]
	n.set(uid, to, nominatedTo{status: to.status, own: node})
}

// set replaces a pod's entry old with to, keeping count. Locked.
func (n *nominations) set(uid types.UID, old, to nominatedTo) {
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

// nodes returns the nodes that may have a nominated pod, in name order;
// known is false until the handler has seen the informer's first list
// (every node may have one then).
func (n *nominations) nodes() (nodes []string, known bool) {
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

// withNominated adds to held what plain pods nominated to each node ask for,
// when their priority is at least priority (see preempt.NominatedRoom): the
// plan then keeps out of a preemptor's freed room, as kube-scheduler's
// Filter does. It asks only about the live nodes (nodeInfos, in name order)
// that may have a nominated pod (every node until the set is known), and
// copies held rather than write it.
func (pl *Plugin) withNominated(held map[string]capacity.Amounts, nodeInfos []fwk.NodeInfo, priority int32) map[string]capacity.Amounts {
	names, known := pl.nominations.nodes()
	if !known {
		names = make([]string, len(nodeInfos))
		for i, ni := range nodeInfos {
			names[i] = ni.Node().Name
		}
	}
	var out map[string]capacity.Amounts
	for _, name := range names {
		if _, live := slices.BinarySearchFunc(nodeInfos, name, func(ni fwk.NodeInfo, name string) int {
			return strings.Compare(ni.Node().Name, name)
		}); !live {
			continue
		}
		a := preempt.NominatedRoom(pl.handle, name, priority, "")
		if a == nil {
			continue
		}
		if out == nil {
			out = make(map[string]capacity.Amounts, len(held)+1)
			for n, h := range held {
				out[n] = h
			}
		}
		sum := capacity.Amounts{}
		sum.Add(out[name])
		sum.Add(a)
		out[name] = sum
	}
	if out == nil {
		return held
	}
	return out
}
