package ledger

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"
)

// fired collects the timers that ran, by name.
type fired struct {
	mu    sync.Mutex
	names []string
}

func (f *fired) add(name string) func() {
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.names = append(f.names, name)
	}
}

func (f *fired) get() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.names...)
}

func TestTimers(t *testing.T) {
	l, c := newTestLedger()
	var f fired
	a, b := key("a"), key("b")
	l.Timers.After(a, BackoffTimer, time.Second, f.add("a-backoff-1"))
	l.Timers.After(a, BackoffTimer, 2*time.Second, f.add("a-backoff-2")) // replaces the first
	l.Timers.After(a, YieldEndTimer, time.Second, f.add("a-yield"))
	l.Timers.After(b, BackoffTimer, time.Second, f.add("b-backoff"))
	c.Step(time.Second)
	require.Eventually(t, func() bool { return len(f.get()) == 2 }, wait.ForeverTestTimeout, time.Millisecond)
	require.ElementsMatch(t, []string{"a-yield", "b-backoff"}, f.get(), "a timer of the same kind replaces the pending one")

	l.ForgetGang(a)
	require.False(t, c.HasWaiters(), "a forgotten gang's timers are stopped")
	l.Timers.After(b, RecheckTimer, time.Second, f.add("b-recheck"))
	l.Timers.Stop()
	l.Timers.After(b, RecheckTimer, time.Second, f.add("after-stop"))
	require.False(t, c.HasWaiters(), "no timer runs after Stop")
	c.Step(time.Minute)
	require.Len(t, f.get(), 2)
}
