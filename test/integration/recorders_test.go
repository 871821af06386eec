package integration

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	upstream "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// nsWatch is a watch of one kind of object in a namespace, started by
// watchNamespace. It remembers the resourceVersion of each object it has
// passed on, so that a test can wait until it has caught up.
type nsWatch struct {
	what string
	list func(ctx context.Context) ([]runtime.Object, string, error)

	mu   sync.Mutex
	seen map[types.UID]string
}

// watchNamespace lists a namespace's objects with list and then follows
// every event of a watch from the list's resourceVersion, calling observe
// for each object in order, until the test ends. Errors fail the test at
// its end.
func watchNamespace(t *testing.T, what string,
	list func(ctx context.Context) ([]runtime.Object, string, error),
	watchFn func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error),
	observe func(obj runtime.Object, deleted bool)) *nsWatch {
	t.Helper()
	w := &nsWatch{what: what, list: list, seen: map[types.UID]string{}}
	pass := func(obj runtime.Object, deleted bool) {
		observe(obj, deleted)
		if m, err := meta.Accessor(obj); err == nil {
			w.mu.Lock()
			w.seen[m.GetUID()] = m.GetResourceVersion()
			w.mu.Unlock()
		}
	}
	objs, rv, err := list(t.Context())
	if err != nil {
		t.Fatalf("listing %s to start a watch: %v", what, err)
	}
	for _, o := range objs {
		pass(o, false)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{WatchFuncWithContext: watchFn})
	if err != nil {
		cancel()
		t.Fatalf("watching %s: %v", what, err)
	}
	done := make(chan struct{})
	var watchErr error
	go func() {
		defer close(done)
		defer rw.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					// The RetryWatcher also closes its channel when the
					// cleanup cancels ctx, and select may pick either.
					if ctx.Err() == nil {
						watchErr = fmt.Errorf("the %s watch ended early", what)
					}
					return
				}
				switch ev.Type {
				case watch.Added, watch.Modified:
					pass(ev.Object, false)
				case watch.Deleted:
					pass(ev.Object, true)
				case watch.Error:
					watchErr = fmt.Errorf("%s watch error: %v", what, ev.Object)
					return
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if watchErr != nil {
			t.Error(watchErr)
		}
	})
	return w
}

// waitCaughtUp waits up to eventTimeout until the watch has passed on every
// object the API server lists now, at the version listed or a later one. A
// check that reads a watch's record calls it first: the test reads the API
// server directly, and a watch lagging behind it would make the check pass
// on events it never saw.
func (w *nsWatch) waitCaughtUp(t *testing.T) {
	t.Helper()
	if err := w.caughtUp(t.Context(), eventTimeout); err != nil {
		t.Error(err)
	}
}

// caughtUp lists once and waits up to timeout for the watch to pass on that
// list: objects created or changed after it do not move the goal.
func (w *nsWatch) caughtUp(ctx context.Context, timeout time.Duration) error {
	var listed []runtime.Object
	var behind []string
	listedOnce := false
	err := waitFor(ctx, timeout, func(ctx context.Context) (bool, error) {
		if !listedOnce {
			objs, _, err := w.list(ctx)
			if err != nil {
				return false, err
			}
			listed, listedOnce = objs, true
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		behind = behind[:0]
		for _, o := range listed {
			m, err := meta.Accessor(o)
			if err != nil {
				return false, err
			}
			if !versionAtLeast(w.seen[m.GetUID()], m.GetResourceVersion()) {
				behind = append(behind, m.GetName())
			}
		}
		return len(behind) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("the %s watch has not passed on, within %s, what the API server listed (behind: %v): %w", w.what, timeout, behind, err)
	}
	return nil
}

// versionAtLeast reports whether resourceVersion seen is want or later.
// resourceVersions are opaque to clients in general; the tests' API server
// stores in etcd, whose versions are increasing integers.
func versionAtLeast(seen, want string) bool {
	s, err1 := strconv.ParseUint(seen, 10, 64)
	w, err2 := strconv.ParseUint(want, 10, 64)
	return err1 == nil && err2 == nil && s >= w
}

// watchPods follows every pod of env's namespace, from a list and then a
// watch, with watchNamespace.
func (env *testEnv) watchPods(observe func(pod *v1.Pod, deleted bool)) *nsWatch {
	pods := kubeClient.CoreV1().Pods(env.ns)
	return watchNamespace(env.t, "pods",
		func(ctx context.Context) ([]runtime.Object, string, error) {
			l, err := pods.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, "", err
			}
			out := make([]runtime.Object, len(l.Items))
			for i := range l.Items {
				out[i] = &l.Items[i]
			}
			return out, l.ResourceVersion, nil
		},
		pods.Watch,
		func(obj runtime.Object, deleted bool) {
			if p, ok := obj.(*v1.Pod); ok {
				observe(p, deleted)
			}
		})
}

// phaseRecorder records, from a watch, every distinct phase each PodGroup of
// a namespace goes through, in order.
type phaseRecorder struct {
	mu     sync.Mutex
	phases map[string][]upstream.PodGroupPhase
}

func (env *testEnv) recordPodGroupPhases() *phaseRecorder {
	r := &phaseRecorder{phases: map[string][]upstream.PodGroupPhase{}}
	pgs := pgClient.SchedulingV1alpha1().PodGroups(env.ns)
	watchNamespace(env.t, "PodGroups",
		func(ctx context.Context) ([]runtime.Object, string, error) {
			l, err := pgs.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, "", err
			}
			var out []runtime.Object
			for i := range l.Items {
				out = append(out, &l.Items[i])
			}
			return out, l.ResourceVersion, nil
		},
		pgs.Watch,
		func(obj runtime.Object, _ bool) {
			pg, ok := obj.(*upstream.PodGroup)
			if !ok || pg.Status.Phase == "" {
				return
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			seen := r.phases[pg.Name]
			if len(seen) == 0 || seen[len(seen)-1] != pg.Status.Phase {
				r.phases[pg.Name] = append(seen, pg.Status.Phase)
			}
		})
	return r
}

func (r *phaseRecorder) of(name string) []upstream.PodGroupPhase {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.phases[name])
}

// waitFor waits up to timeout until PodGroup name has gone through want, in
// this order (other phases may come in between), and fails the test with
// the phases seen otherwise.
func (r *phaseRecorder) waitFor(t *testing.T, timeout time.Duration, name string, want ...upstream.PodGroupPhase) {
	t.Helper()
	err := waitFor(t.Context(), timeout, func(context.Context) (bool, error) {
		return isSubsequence(want, r.of(name)), nil
	})
	if err != nil {
		t.Fatalf("waiting %s for PodGroup %s to go through phases %v: %v; phases seen: %v", timeout, name, want, err, r.of(name))
	}
}

func isSubsequence[T comparable](want, got []T) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// podTimeline numbers every pod event of a namespace in the order the watch
// delivers them (etcd's order), and records for each gang member the event
// at which it was first seen bound and first seen Succeeded.
type podTimeline struct {
	mu        sync.Mutex
	seq       int
	gang      map[string]string
	bound     map[string]int
	succeeded map[string]int
}

func (env *testEnv) recordPodTimeline() *podTimeline {
	tl := &podTimeline{gang: map[string]string{}, bound: map[string]int{}, succeeded: map[string]int{}}
	env.watchPods(func(p *v1.Pod, _ bool) {
		tl.mu.Lock()
		defer tl.mu.Unlock()
		tl.seq++
		gang := p.Labels[scheduling.PodGroupLabel]
		if gang == "" {
			return
		}
		tl.gang[p.Name] = gang
		if _, ok := tl.bound[p.Name]; !ok && p.Spec.NodeName != "" {
			tl.bound[p.Name] = tl.seq
		}
		if _, ok := tl.succeeded[p.Name]; !ok && p.Status.Phase == v1.PodSucceeded {
			tl.succeeded[p.Name] = tl.seq
		}
	})
	return tl
}

// gangSummary is what the timeline knows about one gang.
type gangSummary struct {
	members, bound, succeeded int
	// firstBound and lastSucceeded are event numbers; 0 when none.
	firstBound, lastSucceeded int
}

func (tl *podTimeline) gangs() map[string]gangSummary {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	out := map[string]gangSummary{}
	for pod, gang := range tl.gang {
		s := out[gang]
		s.members++
		if b, ok := tl.bound[pod]; ok {
			s.bound++
			if s.firstBound == 0 || b < s.firstBound {
				s.firstBound = b
			}
		}
		if d, ok := tl.succeeded[pod]; ok {
			s.succeeded++
			s.lastSucceeded = max(s.lastSucceeded, d)
		}
		out[gang] = s
	}
	return out
}

// caughtUp holds a check back until the watch has passed on each listed
// object at the version listed or a later one.
func TestWatchCaughtUpWaitsForListedVersions(t *testing.T) {
	w := &nsWatch{what: "pods", seen: map[types.UID]string{}, list: func(context.Context) ([]runtime.Object, string, error) {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "uid-p", ResourceVersion: "7"}}
		return []runtime.Object{pod}, "7", nil
	}}
	const window = 300 * time.Millisecond
	for _, c := range []struct {
		seen   string
		caught bool
	}{{"", false}, {"6", false}, {"7", true}, {"9", true}} {
		if c.seen != "" {
			w.seen["uid-p"] = c.seen
		}
		err := w.caughtUp(t.Context(), window)
		if caught := err == nil; caught != c.caught {
			t.Errorf("watch at version %q of an object listed at 7: caught up %v (%v), want %v", c.seen, caught, err, c.caught)
		}
	}
}
