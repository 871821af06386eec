package ledger

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// Gate keeps, per gang, the members PreEnqueue holds back, and counts the
// releases. Members are released when what they wait for arrives:
// kube-scheduler 1.37 runs queueing hints for new unscheduled pods only with
// the GenericWorkload gate on, so the plugin cannot rely on hints for it.
type Gate struct {
	// mu guards gated and releases. Never held with another lock.
	mu    sync.Mutex
	gated map[gang.Key]map[types.UID]*v1.Pod
	// releases counts releases per gang, so that a PreEnqueue that raced
	// with a release can tell it missed one.
	releases map[gang.Key]uint64
}

// NewGate returns a gate that holds nobody back.
func NewGate() *Gate {
	return &Gate{gated: map[gang.Key]map[types.UID]*v1.Pod{}, releases: map[gang.Key]uint64{}}
}

// Releases is how many times the gang's held-back members were released so
// far. PreEnqueue reads it before it looks at a member, and passes it to
// Hold.
func (g *Gate) Releases(key gang.Key) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.releases[key]
}

// Hold remembers that PreEnqueue holds pod back. It returns false when a
// release happened since PreEnqueue read seen: the pod may have missed it.
func (g *Gate) Hold(key gang.Key, pod *v1.Pod, seen uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gated[key] == nil {
		g.gated[key] = map[types.UID]*v1.Pod{}
	}
	g.gated[key][pod.UID] = pod
	return g.releases[key] == seen
}

// Release forgets and returns the members held back for a gang, keyed as
// the framework's Activate wants them (namespace/name), and counts the
// release.
func (g *Gate) Release(key gang.Key) map[string]*v1.Pod {
	g.mu.Lock()
	defer g.mu.Unlock()
	held := g.gated[key]
	delete(g.gated, key)
	g.releases[key]++
	if len(held) == 0 {
		return nil
	}
	out := make(map[string]*v1.Pod, len(held))
	for _, p := range held {
		out[p.Namespace+"/"+p.Name] = p
	}
	return out
}

// Held counts the members held back for a gang.
func (g *Gate) Held(key gang.Key) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.gated[key])
}

// Gangs counts the gangs that have members held back.
func (g *Gate) Gangs() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.gated)
}

// drop stops holding back a member that was deleted or left the gang.
func (g *Gate) drop(key gang.Key, uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if held := g.gated[key]; held != nil {
		delete(held, uid)
		if len(held) == 0 {
			delete(g.gated, key)
		}
	}
}

// forget drops the gang's release count. Held-back members stay held: they
// wait for the PodGroup to come back.
func (g *Gate) forget(key gang.Key) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.releases, key)
}

func (g *Gate) knows(key gang.Key) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.releases[key]
	return ok
}

// Blocked are pods turned away because held capacity was in their way. No
// cluster event announces the end of a hold, so they are activated when one
// ends.
type Blocked struct {
	// mu guards pods. Never held with another lock.
	mu sync.Mutex
	// pods are keyed as Activate wants them (namespace/name).
	pods map[string]*v1.Pod
}

// MaxBlocked bounds the pods remembered for activation when a hold ends.
// Pods past it still retry on cluster events and the queue's flush.
const MaxBlocked = 10000

// NewBlocked returns an empty set of blocked pods.
func NewBlocked() *Blocked {
	return &Blocked{pods: map[string]*v1.Pod{}}
}

// Add remembers a pod that held capacity turned away.
func (b *Blocked) Add(pod *v1.Pod) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pods) >= MaxBlocked {
		return
	}
	b.pods[pod.Namespace+"/"+pod.Name] = pod
}

// Take returns and forgets the pods held capacity turned away.
func (b *Blocked) Take() map[string]*v1.Pod {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pods) == 0 {
		return nil
	}
	out := b.pods
	b.pods = map[string]*v1.Pod{}
	return out
}
