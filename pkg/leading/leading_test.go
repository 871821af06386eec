package leading

import (
	"testing"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/profile"
)

// follower is a PreEnqueue plugin that counts StartedLeading calls.
type follower struct {
	fwk.PreEnqueuePlugin
	started int
}

func (f *follower) StartedLeading() { f.started++ }

// other is a plugin that does not ask.
type other struct{ fwk.PreEnqueuePlugin }

// profileOf is a framework that lists plugins as PreEnqueue plugins and
// queueing hint plugins; nothing else of it is used.
type profileOf struct {
	framework.Framework
	preEnqueue []fwk.PreEnqueuePlugin
}

func (p profileOf) PreEnqueuePlugins() []fwk.PreEnqueuePlugin { return p.preEnqueue }

func (p profileOf) EnqueueExtensions() []fwk.EnqueueExtensions { return nil }

// queueRuns counts Run calls.
type queueRuns struct {
	internalqueue.SchedulingQueue
	runs int
}

func (q *queueRuns) Run(klog.Logger) { q.runs++ }

func TestNotify(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	shared := &follower{}
	mine := &follower{}
	q := &queueRuns{}
	sched := &scheduler.Scheduler{
		SchedulingQueue: q,
		Profiles: profile.Map{
			// Two profiles share one plugin instance; each is told once.
			"a": profileOf{preEnqueue: []fwk.PreEnqueuePlugin{shared, other{}}},
			"b": profileOf{preEnqueue: []fwk.PreEnqueuePlugin{shared, mine}},
		},
	}
	Notify(sched)
	if shared.started != 0 || mine.started != 0 {
		t.Fatalf("told before the scheduling loop started: %d, %d", shared.started, mine.started)
	}
	sched.SchedulingQueue.Run(logger)
	sched.SchedulingQueue.Run(logger)
	if q.runs != 2 {
		t.Errorf("the scheduler's own queue ran %d times, want 2", q.runs)
	}
	if shared.started != 1 || mine.started != 1 {
		t.Errorf("StartedLeading calls: shared %d, mine %d; want 1 each", shared.started, mine.started)
	}
}

// With no plugin that asks, the scheduler's queue is left as it is.
func TestNotifyWithoutFollowers(t *testing.T) {
	q := &queueRuns{}
	sched := &scheduler.Scheduler{SchedulingQueue: q, Profiles: profile.Map{"a": profileOf{preEnqueue: []fwk.PreEnqueuePlugin{other{}}}}}
	Notify(sched)
	if sched.SchedulingQueue != internalqueue.SchedulingQueue(q) {
		t.Errorf("queue replaced though no plugin follows")
	}
}
