package simulator

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/controlplane"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/metrics"
)

// holdsInterval is how often what the scheduler holds with no pod bound is
// read: gathering the scheduler's metrics costs more than a sample.
const holdsInterval = time.Second

// sampleHolds reads, every interval until ctx ends, what an in-process
// scheduler keeps from other work with no pod bound, into tracker: the
// members waiting in Permit in any of its profiles, and what gpu-gang's
// plans and head hold keep (its held-capacity gauge, read from this
// process's metrics registry; absent for the stock profiles). Both are read
// the same way for every profile. The waiting members also go to waiting,
// when set (DomainTracker.ObserveWaiting): they take their nodes' GPUs.
func sampleHolds(ctx context.Context, tracker *metrics.Tracker, waiting func([]*v1.Pod, time.Time), sched *controlplane.Scheduler, interval time.Duration) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case now := <-ticker.C:
			var pods []*v1.Pod
			sched.WaitingPods(func(p *v1.Pod) { pods = append(pods, p) })
			tracker.ObserveHeld(pods, plannedGPUs(), now)
			if waiting != nil {
				waiting(pods, now)
			}
		case <-ctx.Done():
			return
		}
	}
}

// plannedGPUs reads gpu-gang's held-capacity gauge for GPUs from this
// process's metrics registry; 0 when no gpu-gang plugin runs here.
func plannedGPUs() int {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return 0
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != scheduling.HeldCapacityMetric {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "resource" && l.GetValue() == string(fabric.GPU) {
					total += m.GetGauge().GetValue()
				}
			}
		}
	}
	return int(total)
}
