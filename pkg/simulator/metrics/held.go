package metrics

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/simulator/workload"
)

// ObserveHeld records the GPUs the scheduler keeps from other work at now
// with no pod bound on them: workload members reserved and waiting in
// Permit (waiting, each on the node its spec.nodeName names), and planned,
// what the scheduler's own plans and holds keep besides. Every profile's
// waiting members count alike; planned is gpu-gang's head hold and the
// unreserved part of its plans in flight. Until the next call they count as
// idle-held: read at an interval, the integral is a step function of the
// readings.
func (t *Tracker) ObserveHeld(waiting []*v1.Pod, planned int, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	gpus := planned
	for _, p := range waiting {
		if p.Labels[workload.RoleLabel] != workload.RoleWorkload {
			continue
		}
		if n, ok := t.nodeIdx[p.Spec.NodeName]; ok {
			gpus += t.claimSpecs.podGPUs(p, t.layout.Nodes[n].GPUs)
		}
	}
	if t.boundPods >= t.expect {
		// Every workload pod is bound: nothing is kept from other work any
		// more, whatever a reading taken before the last binds still says.
		gpus = 0
	}
	t.advance(now)
	t.setSchedHeld(gpus)
}

// setSchedHeld replaces what the scheduler holds with no pod bound.
func (t *Tracker) setSchedHeld(gpus int) {
	t.idleHeld += gpus - t.schedHeld
	t.schedHeld = gpus
}
