package consolidate

import (
	"fmt"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// budgetWindow is the sliding window MaxEvictionsPerHour counts moves in.
const budgetWindow = time.Hour

// Policy says which running gangs may be moved, and remembers the moves
// made, for the hourly budget and the cooldown. It is safe for concurrent
// use.
type Policy struct {
	args    config.ConsolidationArgs
	classes map[string]bool
	clock   clock.PassiveClock

	mu sync.Mutex
	// moves are the times gangs were moved within the last budgetWindow,
	// oldest first, one per moved gang.
	moves []time.Time
	// lastMoved is when each gang was last moved, kept for Cooldown.
	lastMoved map[gang.Key]time.Time
}

// NewPolicy returns the policy of args, reading time from c.
func NewPolicy(args config.ConsolidationArgs, c clock.PassiveClock) *Policy {
	classes := make(map[string]bool, len(args.MovablePriorityClasses))
	for _, name := range args.MovablePriorityClasses {
		classes[name] = true
	}
	return &Policy{args: args, classes: classes, clock: c, lastMoved: map[gang.Key]time.Time{}}
}

// Unwaited is how much longer a gang waiting since since must wait before
// gangs are moved for it; zero or less once it has waited WaitingFor.
func (p *Policy) Unwaited(since time.Time) time.Duration {
	return p.args.WaitingFor - p.clock.Since(since)
}

// Movable reports whether a running gang opted in to being moved: its
// movable annotation (gang.MovableOf), or its priority class among
// MovablePriorityClasses (the PodGroup's own, else its every pod's). A
// malformed annotation is an error naming it; the gang is then not moved.
func (p *Policy) Movable(spec *gang.Spec, pods []*v1.Pod) (bool, error) {
	ok, err := gang.MovableOf(spec)
	if err != nil || ok {
		return ok, err
	}
	if spec.PriorityClassName != "" {
		return p.classes[spec.PriorityClassName], nil
	}
	return len(pods) > 0 && !slices.ContainsFunc(pods, func(q *v1.Pod) bool { return !p.classes[q.Spec.PriorityClassName] }), nil
}

// Settled says why a movable gang that started at started may not be moved
// now: it has run less than MinRunTime, or was moved less than Cooldown
// ago. Empty when it may.
func (p *Policy) Settled(key gang.Key, started time.Time) string {
	now := p.clock.Now()
	if started.IsZero() || now.Sub(started) < p.args.MinRunTime {
		return fmt.Sprintf("it started less than minRunTime (%s) ago", p.args.MinRunTime)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if at, ok := p.lastMoved[key]; ok && now.Sub(at) < p.args.Cooldown {
		return fmt.Sprintf("it was moved at %s, less than cooldown (%s) ago", at.UTC().Format(time.RFC3339), p.args.Cooldown)
	}
	return ""
}

// Budget is how many gangs may still be moved in the current hour.
func (p *Policy) Budget() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expireLocked(p.clock.Now())
	return max(0, int(p.args.MaxEvictionsPerHour)-len(p.moves))
}

// Moved records that gangs keys were moved now: they count against the
// budget for an hour, and are not moved again within the cooldown.
func (p *Policy) Moved(keys []gang.Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	p.expireLocked(now)
	for _, key := range keys {
		p.moves = append(p.moves, now)
		p.lastMoved[key] = now
	}
	for key, at := range p.lastMoved {
		if now.Sub(at) >= p.args.Cooldown {
			delete(p.lastMoved, key)
		}
	}
}

// expireLocked drops the moves that left the budget window.
func (p *Policy) expireLocked(now time.Time) {
	i := 0
	for i < len(p.moves) && now.Sub(p.moves[i]) >= budgetWindow {
		i++
	}
	p.moves = p.moves[i:]
}
