package ledger

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// LessonTTL is how long a node stays excluded for a template after Filter
// rejected it there, and a rejected plan stays rejected: what repelled the
// member (another pod, a port in use) may go away.
const LessonTTL = 5 * time.Minute

// Lessons are what Filter rejections taught about each gang's plans: a cap
// on a template's members per node, nodes a template is kept off for
// LessonTTL, and the plans that failed. A template names members that Filter
// plugins cannot tell apart (the plugin's filter signature). A gang's
// lessons go when it reaches quorum or goes idle.
type Lessons struct {
	clock clock.PassiveClock

	// mu guards byKey and every lessons in it. Never held with another
	// lock.
	mu    sync.Mutex
	byKey map[gang.Key]*lessons
}

// lessons are one gang's lessons. Guarded by Lessons.mu.
type lessons struct {
	// perNode caps a template's members on one node.
	perNode map[string]int
	// excluded maps template to node to when the node was excluded.
	excluded map[string]map[string]time.Time
	// failed are fingerprints of plans that Filter rejected, with when;
	// they lapse with the exclusions that came with them.
	failed map[uint64]time.Time
}

// LessonView is a copy of a gang's live lessons for one planning pass.
type LessonView struct {
	// PerNode caps a template's members per node.
	PerNode map[string]int
	// Excluded are, per template, the nodes it is kept off.
	Excluded map[string]sets.Set[string]
	// Failed are the fingerprints of plans that must not be tried again.
	Failed map[uint64]bool
}

// NewLessons returns a memory of lessons that reads time from c.
func NewLessons(c clock.PassiveClock) *Lessons {
	return &Lessons{clock: c, byKey: map[gang.Key]*lessons{}}
}

func (l *Lessons) get(key gang.Key) *lessons {
	g, ok := l.byKey[key]
	if !ok {
		g = &lessons{}
		l.byKey[key] = g
	}
	return g
}

// View copies the gang's live lessons.
func (l *Lessons) View(key gang.Key) LessonView {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := LessonView{PerNode: map[string]int{}, Excluded: map[string]sets.Set[string]{}, Failed: map[uint64]bool{}}
	g, ok := l.byKey[key]
	if !ok {
		return v
	}
	now := l.clock.Now()
	for t, n := range g.perNode {
		v.PerNode[t] = n
	}
	for t, nodes := range g.excluded {
		for node, at := range nodes {
			if now.Sub(at) < LessonTTL {
				if v.Excluded[t] == nil {
					v.Excluded[t] = sets.New[string]()
				}
				v.Excluded[t].Insert(node)
			}
		}
	}
	for fp, at := range g.failed {
		if now.Sub(at) < LessonTTL {
			v.Failed[fp] = true
		}
	}
	return v
}

// LearnCap caps a template's members per node. It reports whether that is
// news: no cap, or a looser one, was known.
func (l *Lessons) LearnCap(key gang.Key, template string, perNode int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.get(key)
	if g.perNode == nil {
		g.perNode = map[string]int{}
	}
	if have, ok := g.perNode[template]; ok && have <= perNode {
		return false
	}
	g.perNode[template] = perNode
	return true
}

// LearnExclusion keeps a template's members off a node for LessonTTL from
// now. It reports whether that is news: the node was not excluded, or its
// exclusion had lapsed.
func (l *Lessons) LearnExclusion(key gang.Key, template, node string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.get(key)
	if g.excluded == nil {
		g.excluded = map[string]map[string]time.Time{}
	}
	if g.excluded[template] == nil {
		g.excluded[template] = map[string]time.Time{}
	}
	now := l.clock.Now()
	at, had := g.excluded[template][node]
	g.excluded[template][node] = now
	return !had || now.Sub(at) >= LessonTTL
}

// LearnFailedPlan remembers a plan Filter rejected, by fingerprint.
func (l *Lessons) LearnFailedPlan(key gang.Key, fp uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.get(key)
	if g.failed == nil {
		g.failed = map[uint64]time.Time{}
	}
	g.failed[fp] = l.clock.Now()
}

// forget drops the gang's lessons.
func (l *Lessons) forget(key gang.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.byKey, key)
}

func (l *Lessons) knows(key gang.Key) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.byKey[key]
	return ok
}
