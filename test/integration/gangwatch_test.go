package integration

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// partialBindGrace is how long a gang may be seen part-bound. Once Permit
// lets a gang go, each member binds with an API call of its own, so a watch
// sees 0 < bound < minMember for the moment the calls take; that is not
// atomic in kube-scheduler and cannot be. A gang part-bound for longer is
// stuck half-scheduled, which is the failure gang scheduling exists to
// prevent.
const partialBindGrace = time.Second

// gangWatcher watches every pod event in a namespace and records, per gang,
// each time span in which 0 < bound < minMember, where bound counts the
// members that have been seen with spec.nodeName set. A member that is
// deleted after binding still counts as bound: tests delete finished gangs
// to make room, and that is not the scheduler half-binding a gang.
type gangWatcher struct {
	t    *testing.T
	pods *nsWatch

	mu       sync.Mutex
	gangs    map[string]*gangRecord
	watchErr error
}

type gangRecord struct {
	minMember int
	// bound holds the UIDs of the members seen bound.
	bound sets.Set[string]
	// partialSince is when the gang became part-bound; zero when it is not.
	partialSince time.Time
	// longestPartial is the longest span seen part-bound, for the log.
	longestPartial time.Duration
	violations     []string
}

// watchGangs starts watching the pods of env's namespace. minMembers gives
// each gang's minMember; pods of other gangs fail the test. The watch starts
// from a list, so start it before creating the pods it is to see. A watch
// that fails fails the test when it ends.
func (env *testEnv) watchGangs(minMembers map[string]int) *gangWatcher {
	env.t.Helper()
	w := &gangWatcher{t: env.t, gangs: map[string]*gangRecord{}}
	for name, min := range minMembers {
		w.gangs[name] = &gangRecord{minMember: min, bound: sets.New[string]()}
	}
	w.pods = env.watchPods(func(pod *v1.Pod, deleted bool) {
		// A member deleted after binding still counts as bound.
		if !deleted {
			w.observe(pod, time.Now())
		}
	})
	return w
}

func (w *gangWatcher) observe(pod *v1.Pod, now time.Time) {
	// A member of a native PodGroup is a member like any other: the
	// watcher names gangs by their PodGroup's name only.
	key, ok := gang.Of(pod)
	if !ok {
		return
	}
	name := key.Name
	w.mu.Lock()
	defer w.mu.Unlock()
	g, ok := w.gangs[name]
	if !ok {
		if w.watchErr == nil {
			w.watchErr = fmt.Errorf("pod %s is in gang %q, which the test did not declare to the gang watcher", pod.Name, name)
		}
		return
	}
	if pod.Spec.NodeName == "" || g.bound.Has(string(pod.UID)) {
		return
	}
	g.bound.Insert(string(pod.UID))
	switch n := g.bound.Len(); {
	case n < g.minMember && g.partialSince.IsZero():
		g.partialSince = now
	case n >= g.minMember && !g.partialSince.IsZero():
		g.closePartial(name, now)
	}
}

// closePartial ends a part-bound span at now, noting a violation if it
// lasted longer than partialBindGrace.
func (g *gangRecord) closePartial(gang string, now time.Time) {
	d := now.Sub(g.partialSince)
	g.longestPartial = max(g.longestPartial, d)
	if d > partialBindGrace {
		g.violations = append(g.violations, fmt.Sprintf("gang %s was part-bound (%d/%d) for %s from %s",
			gang, g.bound.Len(), g.minMember, d.Round(time.Millisecond), g.partialSince.Format(time.StampMilli)))
	}
	g.partialSince = time.Time{}
}

// expectNeverPartial fails the test if any gang was part-bound for longer
// than partialBindGrace, up to now, or if a pod of an undeclared gang was
// seen. It logs the
// longest part-bound span of each gang.
func (w *gangWatcher) expectNeverPartial() {
	w.t.Helper()
	w.pods.waitCaughtUp(w.t)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watchErr != nil {
		w.t.Errorf("gang watch: %v", w.watchErr)
	}
	names := make([]string, 0, len(w.gangs))
	for name := range w.gangs {
		names = append(names, name)
	}
	sort.Strings(names)
	now := time.Now()
	for _, name := range names {
		g := w.gangs[name]
		var open time.Duration
		if !g.partialSince.IsZero() {
			open = now.Sub(g.partialSince)
			if open > partialBindGrace {
				w.t.Errorf("gang %s is part-bound (%d/%d) since %s, %s ago", name, g.bound.Len(), g.minMember,
					g.partialSince.Format(time.StampMilli), open.Round(time.Millisecond))
			}
		}
		for _, v := range g.violations {
			w.t.Error(v)
		}
		w.t.Logf("gang %s: %d members bound, minMember %d, longest part-bound span %s",
			name, g.bound.Len(), g.minMember, max(g.longestPartial, open).Round(time.Millisecond))
	}
}
