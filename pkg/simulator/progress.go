package simulator

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/gpu-gang/gpu-gang/pkg/simulator/metrics"
)

// progress shows how far a run is: redrawn in place once a second on a
// terminal, a line every ten seconds otherwise.
type progress struct {
	w       io.Writer
	tty     bool
	profile string
	tracker *metrics.Tracker
	start   time.Time
	mu      sync.Mutex
	drawn   bool
}

func newProgress(w io.Writer, tty bool, profile string, tracker *metrics.Tracker, start time.Time) *progress {
	return &progress{w: w, tty: tty, profile: profile, tracker: tracker, start: start}
}

func (p *progress) run(ctx context.Context) {
	if p.w == nil {
		return
	}
	every := 10 * time.Second
	if p.tty {
		every = time.Second
	}
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		select {
		case <-ticker.C:
			p.draw()
		case <-ctx.Done():
			return
		}
	}
}

func (p *progress) draw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	bound, settled, expected := p.tracker.Progress()
	line := fmt.Sprintf("[%s] %5.1fs  bound %d/%d pods  settled %d/%d", p.profile, time.Since(p.start).Seconds(), bound, expected, settled, expected)
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		p.drawn = true
		return
	}
	fmt.Fprintln(p.w, line)
}

// finish ends the redrawn line so that later output starts on a new one.
func (p *progress) finish() {
	if p.w == nil {
		return
	}
	p.draw()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.drawn {
		fmt.Fprintln(p.w)
	}
}
