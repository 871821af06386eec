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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
//     API call each, so a span up to the ledger's grace is allowed;
//   - degraded: the gang ran and then lost members, so fewer than minMember
//     hold a node. Faults cause it; the scheduler's job is to repair it, and
//     the ledger records how long each repair took;
//   - waited: from the first member's creation in a run to the gang placed.
type gangLedger struct {
	t     *testing.T
	ns    string
	grace time.Duration

	mu       sync.Mutex
	gangs    map[string]*ledgerGang
	watchErr error
}

type ledgerGang struct {
	min int
	// placed holds the members that exist with a node.
	placed map[types.UID]bool
	// running is set once the gang was placed in this run.
	running bool
	// firstCreated is the creation time of the run's first member.
	firstCreated time.Time
	// halfSince and degradedSince open the current span of each kind.
	halfSince, degradedSince time.Time
	// halfBeyondGrace sums, over half-bound spans, their part beyond the
	// grace; longestHalf is the longest span.
	halfBeyondGrace, longestHalf time.Duration
	halfSpans                    []string
	repairs, waits               []time.Duration
}

// ledgerGangs starts a ledger over env's namespace. minMembers gives each
// gang's minMember; pods of other gangs fail the test. Start it before the
// pods it is to see.
func (env *testEnv) ledgerGangs(grace time.Duration, minMembers map[string]int) *gangLedger {
	env.t.Helper()
	l := &gangLedger{t: env.t, ns: env.ns, grace: grace, gangs: map[string]*ledgerGang{}}
	for name, min := range minMembers {
		l.gangs[name] = &ledgerGang{min: min, placed: map[types.UID]bool{}}
	}
	env.watchPods(func(pod *v1.Pod, deleted bool) { l.observe(pod, deleted, time.Now()) })
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
		g.closeHalf(name, now, l.grace)
		g.waits = append(g.waits, now.Sub(g.firstCreated))
	case !g.running && n > 0 && g.halfSince.IsZero():
		g.halfSince = now
	case !g.running && n == 0:
		g.closeHalf(name, now, l.grace)
	case g.running && n == 0:
		// The run is over (finished and cleaned up, or every member
		// lost); members that come next start a new run.
		g.running = false
		g.degradedSince = time.Time{}
		g.firstCreated = time.Time{}
	case g.running && n < g.min && g.degradedSince.IsZero():
		g.degradedSince = now
	case g.running && n >= g.min && !g.degradedSince.IsZero():
		g.repairs = append(g.repairs, now.Sub(g.degradedSince))
		g.degradedSince = time.Time{}
	}
}

func (g *ledgerGang) closeHalf(name string, now time.Time, grace time.Duration) {
	if g.halfSince.IsZero() {
		return
	}
	d := now.Sub(g.halfSince)
	g.longestHalf = max(g.longestHalf, d)
	if d > grace {
		g.halfBeyondGrace += d - grace
		g.halfSpans = append(g.halfSpans, fmt.Sprintf("gang %s was half-bound (%d/%d) for %s from %s",
			name, len(g.placed), g.min, d.Round(time.Millisecond), g.halfSince.Format(time.StampMilli)))
	}
	g.halfSince = time.Time{}
}

// report is what a ledger says about all its gangs at one moment.
type ledgerReport struct {
	// halfBoundSeconds sums half-bound time beyond the grace over gangs,
	// open spans included.
	halfBoundSeconds float64
	// violations describe each half-bound span beyond the grace.
	violations []string
	// repairs and waits, over all gangs, in the order they happened.
	repairs, waits []time.Duration
	// openRepairs counts gangs degraded right now.
	openRepairs int
	lines       []string
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
		beyond := g.halfBeyondGrace
		r.violations = append(r.violations, g.halfSpans...)
		if !g.halfSince.IsZero() {
			if d := now.Sub(g.halfSince); d > l.grace {
				beyond += d - l.grace
				r.violations = append(r.violations, fmt.Sprintf("gang %s is half-bound (%d/%d) since %s, %s ago",
					name, len(g.placed), g.min, g.halfSince.Format(time.StampMilli), d.Round(time.Millisecond)))
			}
		}
		if !g.degradedSince.IsZero() {
			r.openRepairs++
		}
		r.halfBoundSeconds += beyond.Seconds()
		r.repairs = append(r.repairs, g.repairs...)
		r.waits = append(r.waits, g.waits...)
		r.lines = append(r.lines, fmt.Sprintf("gang %s: %d/%d placed, running=%t, waited %s, repairs %s, longest half-bound span %s",
			name, len(g.placed), g.min, g.running, durations(g.waits), durations(g.repairs), g.longestHalf.Round(time.Millisecond)))
	}
	if l.watchErr != nil {
		r.violations = append(r.violations, l.watchErr.Error())
	}
	return r
}

// catchUp waits until the ledger's watch has seen what a fresh list shows:
// the same members holding a node in every gang. A verdict taken before
// would judge a moment the cluster has left.
func (l *gangLedger) catchUp() {
	l.t.Helper()
	var want map[string]int
	err := waitFor(l.t.Context(), eventTimeout, func(ctx context.Context) (bool, error) {
		list, err := kubeClient.CoreV1().Pods(l.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		want = map[string]int{}
		for i := range list.Items {
			p := &list.Items[i]
			if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase != v1.PodFailed {
				want[p.Labels[scheduling.PodGroupLabel]]++
			}
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		for name, g := range l.gangs {
			if len(g.placed) != want[name] {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		l.t.Errorf("the gang ledger did not catch up with the API (want %v placed): %v", want, err)
	}
}

// expectNoHalfBound fails the test if any gang was half-bound beyond the
// grace, and logs each gang's figures, once the ledger has caught up.
func (l *gangLedger) expectNoHalfBound() ledgerReport {
	l.t.Helper()
	l.catchUp()
	r := l.report(time.Now())
	for _, line := range r.lines {
		l.t.Log(line)
	}
	for _, v := range r.violations {
		l.t.Error(v)
	}
	return r
}

// waitRepaired waits until no gang is degraded, and returns how long the
// last repair of the named gang took.
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
