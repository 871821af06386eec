package plugintest

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
)

// QuietWindow is how long Events.Await and Events.None watch for an Event
// that should not come. Plugins record Events in the extension point or
// the informer handler that decides them, so one that comes at all comes
// well within it.
const QuietWindow = 200 * time.Millisecond

// Events reads the Events the plugins record, as "Type Reason Note" lines.
type Events struct {
	recorder *events.FakeRecorder
}

// Drain returns the Events recorded since the last read, without waiting.
func (e *Events) Drain() []string {
	var out []string
	for {
		select {
		case ev := <-e.recorder.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// Await waits until the Events recorded since the last read hold one Event
// containing each of want, then watches for QuietWindow that no further
// Event comes (a duplicate, or one not asked for), and returns them all.
func (e *Events) Await(t testing.TB, want ...string) []string {
	t.Helper()
	var got []string
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		got = append(got, e.Drain()...)
		return containsEach(got, want), nil
	}); err != nil {
		t.Fatalf("waiting for Events containing %q: recorded %q", want, got)
	}
	if extra := e.quiet(); len(extra) > 0 {
		t.Errorf("after the Events containing %q (%q), more came: %q", want, got, extra)
	}
	return got
}

// None checks that no Event comes for QuietWindow.
func (e *Events) None(t testing.TB) {
	t.Helper()
	if extra := e.quiet(); len(extra) > 0 {
		t.Errorf("unexpected Events: %q", extra)
	}
}

// quiet watches for QuietWindow and returns the Events that came.
func (e *Events) quiet() []string {
	var extra []string
	_ = wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, QuietWindow, true, func(context.Context) (bool, error) {
		extra = append(extra, e.Drain()...)
		return len(extra) > 0, nil
	})
	return extra
}

// containsEach reports whether each of want is contained in a distinct
// Event of got.
func containsEach(got, want []string) bool {
	used := make([]bool, len(got))
	for _, w := range want {
		found := false
		for i, g := range got {
			if !used[i] && strings.Contains(g, w) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Activator records the pods the plugins move to the active queue, as
// namespace/name. Like the scheduling queue, it takes the queue's lock to
// activate (see UnderQueueLock).
type Activator struct {
	queue     sync.Mutex
	mu        sync.Mutex
	activated []string
}

// Activate implements the framework's pod activator.
func (a *Activator) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	a.queue.Lock()
	defer a.queue.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range pods {
		a.activated = append(a.activated, k)
	}
}

// UnderQueueLock runs f holding the lock the scheduling queue holds while
// it runs PreEnqueue plugins, which activating pods takes too: an f that
// activates pods itself blocks, as kube-scheduler's queue deadlocks there.
// It reports whether f returned within timeout; if not, the lock is let go
// so that f can finish.
func (a *Activator) UnderQueueLock(timeout time.Duration, f func()) bool {
	a.queue.Lock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
		a.queue.Unlock()
		return true
	case <-time.After(timeout):
		a.queue.Unlock()
		<-done
		return false
	}
}

// Get returns the pods activated so far, sorted, each as many times as it
// was activated. It sorts here, not in Activate: a benchmark that plans a
// gang on every iteration activates its members each time, and sorting the
// whole record there made each plan cost more the longer the benchmark ran.
func (a *Activator) Get() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := append([]string(nil), a.activated...)
	sort.Strings(out)
	return out
}

// Reset forgets the pods activated so far.
func (a *Activator) Reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.activated = nil
}
