package ledger

import (
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// TimerKind names what a gang's timer is for; a gang has at most one timer
// of each kind.
type TimerKind int

const (
	// BackoffTimer re-activates members when a backoff ends.
	BackoffTimer TimerKind = iota
	// RecheckTimer looks again at members gated while a release raced.
	RecheckTimer
	// HoldEndTimer ends a head turn that ran out of time.
	HoldEndTimer
	// YieldEndTimer re-activates a former head when its yield ends.
	YieldEndTimer
	// ConsolidationTimer re-activates a gang once it has waited long
	// enough for gangs to be moved for it.
	ConsolidationTimer
)

// Timers are the gangs' pending callbacks, by gang and purpose. They are
// stopped when the gang is forgotten or the plugin stops.
type Timers struct {
	clock clock.WithDelayedExecution

	// mu guards byKey and stopped. Never held with another lock of the
	// ledger; the clock's own lock is taken under it.
	mu    sync.Mutex
	byKey map[gang.Key]map[TimerKind]clock.Timer
	// stopped is set once the plugin's context ended: no timer starts
	// after it.
	stopped bool
}

// NewTimers returns timers that run on c.
func NewTimers(c clock.WithDelayedExecution) *Timers {
	return &Timers{clock: c, byKey: map[gang.Key]map[TimerKind]clock.Timer{}}
}

// After runs f after d, replacing the gang's pending timer of the same
// kind. Timers of forgotten gangs and of stopped Timers never run.
func (t *Timers) After(key gang.Key, kind TimerKind, d time.Duration, f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	timers := t.byKey[key]
	if timers == nil {
		timers = map[TimerKind]clock.Timer{}
		t.byKey[key] = timers
	}
	if old := timers[kind]; old != nil {
		old.Stop()
	}
	// f runs on a goroutine of its own: a fake clock fires timers while it
	// holds its lock, and f reads the clock.
	timers[kind] = t.clock.AfterFunc(d, func() { go f() })
}

// forget stops the gang's timers.
func (t *Timers) forget(key gang.Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, timer := range t.byKey[key] {
		timer.Stop()
	}
	delete(t.byKey, key)
}

// Stop stops every timer, and every timer started later.
func (t *Timers) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	for _, timers := range t.byKey {
		for _, timer := range timers {
			timer.Stop()
		}
	}
}

func (t *Timers) knows(key gang.Key) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.byKey[key]
	return ok
}
