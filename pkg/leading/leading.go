// Package leading tells plugins when their scheduler starts to schedule.
//
// kube-scheduler builds its plugins before leader election, and runs its
// scheduling loop only in the replica that holds the lease, or at once when
// leader election is off: cmd/kube-scheduler/app.Run calls Scheduler.Run
// from OnStartedLeading, and a replica that loses the lease exits. A
// plugin that writes to the cluster on its own, outside any scheduling or
// binding cycle, such as the gang plugin's claim reconciler, must write
// only while its process schedules: a standby cannot know what the
// leader's attempts plan. The framework gives plugins no such signal, so
// Notify makes one from the start of the scheduling loop: Scheduler.Run
// runs the scheduling queue first, in both cases and only then.
package leading

import (
	"slices"
	"sync"

	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
)

// Follower is a plugin that wants to know when its scheduler starts to
// schedule.
type Follower interface {
	// StartedLeading is called once, when the scheduling loop starts. It
	// must not block.
	StartedLeading()
}

// Notify makes sched call StartedLeading on every plugin of its profiles
// that is a Follower (found among the PreEnqueue plugins and the queueing
// hint plugins) when its scheduling loop starts. Call it after app.Setup
// and before app.Run, while nothing reads sched's queue yet.
func Notify(sched *scheduler.Scheduler) {
	names := make([]string, 0, len(sched.Profiles))
	for name := range sched.Profiles {
		names = append(names, name)
	}
	slices.Sort(names)
	var followers []Follower
	add := func(p any) {
		if f, ok := p.(Follower); ok && !slices.Contains(followers, f) {
			followers = append(followers, f)
		}
	}
	for _, name := range names {
		fw := sched.Profiles[name]
		for _, p := range fw.PreEnqueuePlugins() {
			add(p)
		}
		for _, p := range fw.EnqueueExtensions() {
			add(p)
		}
	}
	if len(followers) == 0 {
		return
	}
	sched.SchedulingQueue = &queue{SchedulingQueue: sched.SchedulingQueue, followers: followers}
}

// queue is the scheduler's queue, whose Run also tells the followers.
type queue struct {
	internalqueue.SchedulingQueue
	followers []Follower
	once      sync.Once
}

func (q *queue) Run(logger klog.Logger) {
	q.SchedulingQueue.Run(logger)
	q.once.Do(func() {
		logger.V(2).Info("Scheduling loop starts: telling the plugins that write on their own", "plugins", len(q.followers))
		for _, f := range q.followers {
			f.StartedLeading()
		}
	})
}
