package ledger

import (
	"cmp"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// QueueOrder is where a pod's gang stands in the queue: higher priority
// first, then the gang created first, then by name. A pod outside gangs is a
// gang of its own, dated by its own creation. QueueSort and the head hold
// both order by it, so the gang that heads the queue is the one that may
// hold capacity.
type QueueOrder struct {
	// Priority is the pod's priority.
	Priority int32
	// Created is when the gang's PodGroup (or the lone pod) was created.
	Created time.Time
	// Group names the gang or the lone pod (GangOwner, PodOwner).
	Group string
}

// Compare returns -1 if a comes before b in the queue, 1 if after, 0 if
// they are the same gang.
func (a QueueOrder) Compare(b QueueOrder) int {
	if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
		return c
	}
	if c := a.Created.Compare(b.Created); c != 0 {
		return c
	}
	return cmp.Compare(a.Group, b.Group)
}

// Before reports whether a comes before b in the queue.
func (a QueueOrder) Before(b QueueOrder) bool { return a.Compare(b) < 0 }

// Owner names what a pod is scheduled as: its gang (GangOwner) or, outside
// gangs, itself (PodOwner). Preemption records are kept by it.
func Owner(pod *v1.Pod) string {
	if key, ok := gang.Of(pod); ok {
		return GangOwner(key)
	}
	return PodOwner(pod)
}

// GangOwner names a gang: "pg/<namespace>/<name>".
func GangOwner(key gang.Key) string { return "pg/" + key.String() }

// PodOwner names a pod outside gangs: "pod/<namespace>/<name>".
func PodOwner(pod *v1.Pod) string { return "pod/" + pod.Namespace + "/" + pod.Name }
