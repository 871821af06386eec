// Package dedupevents records Kubernetes Events once per distinct note.
//
// Scheduler plugins look at a pod on every retry (PreEnqueue, PreFilter), and
// a person needs one Event that says what is wrong, not one per retry. A
// Recorder records an Event only when its note differs from the last one
// recorded under the same key, or when the last one is older than the
// repeat interval, so that an Event does not age out of the Event list
// while the problem lasts.
package dedupevents

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
)

// RepeatAfter is how long a note is kept from being recorded again.
const RepeatAfter = 10 * time.Minute

// maxNoted bounds the memory of notes; past it the memory starts over and
// at worst some Events are recorded twice.
const maxNoted = 10000

// Recorder records Events once per distinct note and key. It is safe for
// concurrent use.
type Recorder struct {
	recorder events.EventRecorder
	clock    clock.PassiveClock

	mu   sync.Mutex
	last map[string]noted
}

type noted struct {
	note string
	at   time.Time
}

// New returns a Recorder that records through r.
func New(r events.EventRecorder, c clock.PassiveClock) *Recorder {
	return &Recorder{recorder: r, clock: c, last: map[string]noted{}}
}

// Record records an Event regarding an object, with related (nil allowed)
// as the related object, unless the same note was recorded under key within
// RepeatAfter. key names what the note is about: the object and the reason,
// usually, plus anything else that tells two problems apart.
func (r *Recorder) Record(key string, regarding, related runtime.Object, eventType, reason, note string) {
	if !r.fresh(key, note) {
		return
	}
	r.recorder.Eventf(regarding, related, eventType, reason, "Scheduling", "%s", note)
}

func (r *Recorder) fresh(key, note string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	if prev, ok := r.last[key]; ok && prev.note == note && now.Sub(prev.at) < RepeatAfter {
		return false
	}
	if len(r.last) >= maxNoted {
		r.last = map[string]noted{}
	}
	r.last[key] = noted{note: note, at: now}
	return true
}
