package integration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// gangLedger follows every pod event of a namespace and keeps, per gang,
// what the fault suite reports. Unlike gangWatcher it follows members that
// are deleted and replaced:
//   - a gang is placed while at least minMember of its members exist with a
//     node (succeeded ones included); it runs from then until none of its
//     members holds a node any more;
//   - half-bound: some but fewer than minMember members hold a node and the
//     gang has not run in this run. That is the failure gang scheduling
//     exists to prevent: the scheduler bound part of a gang. Binds are one
//     API call each, so a span up to the ledger's grace is allowed; a span
//     during which no scheduler ran (see schedulerKilled) gets restartGrace;
//   - degraded: the gang ran and then lost members, so fewer than minMember
//     hold a node. Faults cause it; the scheduler's job is to repair it, and
//     the ledger records how long each repair took;
//   - waited: from the first member's creation in a run to the gang placed.
//
// Spans are judged when a report is made, not when they close, so a kill
// noted after the watch saw its effects still counts.
type gangLedger struct {
	t     *testing.T
	pods  *nsWatch
	grace time.Duration

	mu       sync.Mutex
	gangs    map[string]*ledgerGang
	outages  []outage
	watchErr error
}

// outage is a time when no scheduler process ran: from a kill until the
// next process was started (restarted is zero until then).
type outage struct{ killed, restarted time.Time }

// halfSpan is one half-bound span of a gang.
type halfSpan struct {
	// to is zero while the span is open.
	from, to time.Time
	// most is the most members placed at once during the span.
	most int
}

type ledgerGang struct {
	min int
	// placed holds the members that exist with a node.
	placed map[types.UID]bool
	// running is set once the gang was placed in this run.
	running bool
	// firstCreated is the creation time of the run's first member.
	firstCreated time.Time
	// half is the open half-bound span, or nil; halves are the closed ones.
	half   *halfSpan
	halves []halfSpan
	// degradedSince opens the current degraded span; degradations counts
	// the spans, open or repaired.
	degradedSince  time.Time
	degradations   int
	repairs, waits []time.Duration
}

// ledgerGangs starts a ledger over env's namespace. minMembers gives each
// gang's minMember; pods of other gangs fail the test. Start it before the
// pods it is to see.
func (env *testEnv) ledgerGangs(grace time.Duration, minMembers map[string]int) *gangLedger {
	env.t.Helper()
	l := &gangLedger{t: env.t, grace: grace, gangs: map[string]*ledgerGang{}}
	for name, min := range minMembers {
		l.gangs[name] = &ledgerGang{min: min, placed: map[types.UID]bool{}}
	}
	l.pods = env.watchPods(func(pod *v1.Pod, deleted bool) { l.observe(pod, deleted, time.Now()) })
	return l
}

func (l *gangLedger) observe(pod *v1.Pod, deleted bool, now time.Time) {
	name, ok := pod.Labels[scheduling.PodGroupLabel]
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	g, ok := l.gangs[name]
	if !ok {
		if l.watchErr == nil {
			l.watchErr = fmt.Errorf("pod %s is in gang %q, which the test did not declare to the ledger", pod.Name, name)
		}
		return
	}
	if !deleted && !g.running && (g.firstCreated.IsZero() || pod.CreationTimestamp.Time.Before(g.firstCreated)) {
		g.firstCreated = pod.CreationTimestamp.Time
	}
	holds := !deleted && pod.Spec.NodeName != "" && pod.DeletionTimestamp == nil && pod.Status.Phase != v1.PodFailed
	if holds {
		g.placed[pod.UID] = true
	} else {
		delete(g.placed, pod.UID)
	}
	n := len(g.placed)
	switch {
	case !g.running && n >= g.min:
		g.running = true
		g.closeHalf(now)
		g.waits = append(g.waits, now.Sub(g.firstCreated))
	case !g.running && n > 0:
		if g.half == nil {
			g.half = &halfSpan{from: now}
		}
		g.half.most = max(g.half.most, n)
	case !g.running && n == 0:
		g.closeHalf(now)
	case g.running && n == 0:
		// The run is over (finished and cleaned up, or every member
		// lost); members that come next start a new run.
		g.running = false
		g.degradedSince = time.Time{}
		g.firstCreated = time.Time{}
	case g.running && n < g.min && g.degradedSince.IsZero():
		g.degradedSince = now
		g.degradations++
	case g.running && n >= g.min && !g.degradedSince.IsZero():
		g.repairs = append(g.repairs, now.Sub(g.degradedSince))
		g.degradedSince = time.Time{}
	}
}

func (g *ledgerGang) closeHalf(now time.Time) {
	if g.half == nil {
		return
	}
	g.half.to = now
	g.halves = append(g.halves, *g.half)
	g.half = nil
}

// schedulerKilled notes that the only scheduler process was killed at at:
// a gang it left part-bound stays so until a new process has started,
// synced and finished it, so half-bound spans open at the kill, or opened
// before the next process started (binds the killed process made, seen
// late), get restartGrace rather than the ledger's grace.
func (l *gangLedger) schedulerKilled(at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.outages = append(l.outages, outage{killed: at})
}

// schedulerStarted notes that a new scheduler process started at at, ending
// the outage the last kill opened.
func (l *gangLedger) schedulerStarted(at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.outages); n > 0 && l.outages[n-1].restarted.IsZero() {
		l.outages[n-1].restarted = at
	}
}

// graceFor is the grace a half-bound span gets; an open span counts up to
// now. Callers hold l.mu.
func (l *gangLedger) graceFor(s halfSpan, now time.Time) time.Duration {
	to := s.to
	if to.IsZero() {
		to = now
	}
	for _, o := range l.outages {
		restarted := o.restarted
		if restarted.IsZero() {
			restarted = now
		}
		if !s.from.After(restarted) && !to.Before(o.killed) {
			return max(l.grace, restartGrace)
		}
	}
	return l.grace
}

// halfBound names the gangs half-bound right now, in order.
func (l *gangLedger) halfBound() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var names []string
	for name, g := range l.gangs {
		if g.half != nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// gangState is one gang as the ledger sees it at one moment.
type gangState struct {
	placed, min int
	running     bool
	// degraded: the gang runs with fewer than minMember placed.
	degraded     bool
	degradations int
	repairs      []time.Duration
}

// state reads one gang's state.
func (l *gangLedger) state(name string) gangState {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.gangs[name]
	return gangState{placed: len(g.placed), min: g.min, running: g.running, degraded: !g.degradedSince.IsZero(),
		degradations: g.degradations, repairs: append([]time.Duration(nil), g.repairs...)}
}

// report is what a ledger says about all its gangs at one moment.
type ledgerReport struct {
	// halfBoundSeconds sums half-bound time beyond each span's grace over
	// gangs, open spans included.
	halfBoundSeconds float64
	// violations describe each half-bound span beyond its grace.
	violations []string
	// repairs and waits, over all gangs, in the order they happened.
	repairs, waits []time.Duration
	// restartSpans are the half-bound spans across a kill (judged with
	// restartGrace), in gang order.
	restartSpans []time.Duration
	// degradations counts the times a running gang fell below minMember;
	// openRepairs counts gangs degraded right now.
	degradations, openRepairs int
	lines                     []string
}

func (l *gangLedger) report(now time.Time) ledgerReport {
	l.mu.Lock()
	defer l.mu.Unlock()
	var r ledgerReport
	names := make([]string, 0, len(l.gangs))
	for name := range l.gangs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		g := l.gangs[name]
		spans := g.halves
		if g.half != nil {
			spans = append(spans[:len(spans):len(spans)], *g.half)
		}
		var beyond, longest time.Duration
		for _, s := range spans {
			to, open := s.to, s.to.IsZero()
			if open {
				to = now
			}
			d := to.Sub(s.from)
			longest = max(longest, d)
			grace := l.graceFor(s, now)
			if grace > l.grace {
				r.restartSpans = append(r.restartSpans, d)
			}
			if d <= grace {
				continue
			}
			beyond += d - grace
			verb := "was"
			if open {
				verb = "is"
			}
			r.violations = append(r.violations, fmt.Sprintf("gang %s %s half-bound (up to %d/%d) for %s from %s (grace %s)",
				name, verb, s.most, g.min, d.Round(time.Millisecond), s.from.Format(time.StampMilli), grace))
		}
		if !g.degradedSince.IsZero() {
			r.openRepairs++
		}
		r.halfBoundSeconds += beyond.Seconds()
		r.degradations += g.degradations
		r.repairs = append(r.repairs, g.repairs...)
		r.waits = append(r.waits, g.waits...)
		r.lines = append(r.lines, fmt.Sprintf("gang %s: %d/%d placed, running=%t, waited %s, degraded %d times, repairs %s, longest half-bound span %s",
			name, len(g.placed), g.min, g.running, durations(g.waits), g.degradations, durations(g.repairs), longest.Round(time.Millisecond)))
	}
	if l.watchErr != nil {
		r.violations = append(r.violations, l.watchErr.Error())
	}
	return r
}

// expectNoHalfBound fails the test if any gang was half-bound beyond the
// grace, and logs each gang's figures, once the ledger's watch has caught
// up with the API server: a verdict taken before would judge a moment the
// cluster has left.
func (l *gangLedger) expectNoHalfBound() ledgerReport {
	l.t.Helper()
	l.pods.waitCaughtUp(l.t)
	r := l.report(time.Now())
	for _, line := range r.lines {
		l.t.Log(line)
	}
	for _, v := range r.violations {
		l.t.Error(v)
	}
	return r
}

// waitRepaired waits until the named gang runs, repaired, and returns how
// long its last repair took.
func (l *gangLedger) waitRepaired(name string, timeout time.Duration) time.Duration {
	l.t.Helper()
	var last time.Duration
	err := waitFor(l.t.Context(), timeout, func(context.Context) (bool, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		g := l.gangs[name]
		if !g.running || !g.degradedSince.IsZero() || len(g.repairs) == 0 {
			return false, nil
		}
		last = g.repairs[len(g.repairs)-1]
		return true, nil
	})
	if err != nil {
		l.t.Fatalf("waiting %s for gang %s to be repaired: %v", timeout, name, err)
	}
	return last
}

// waitDegraded waits until the named gang runs with fewer than minMember
// members placed, and returns its state then.
func (l *gangLedger) waitDegraded(name string, timeout time.Duration) gangState {
	l.t.Helper()
	var st gangState
	err := waitFor(l.t.Context(), timeout, func(context.Context) (bool, error) {
		st = l.state(name)
		return st.running && st.degraded, nil
	})
	if err != nil {
		l.t.Fatalf("waiting %s for the ledger to see gang %s degraded (last: %+v): %v", timeout, name, st, err)
	}
	return st
}

func durations(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.Round(10 * time.Millisecond).String()
	}
	return "[" + strings.Join(parts, " ") + "]"
}
