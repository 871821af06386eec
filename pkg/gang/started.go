package gang

import (
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
)

// StartedAt is when a running gang began to run: when the member that
// completed its quorum started, the minMember-th of pods to start. It is
// zero while fewer than minMember have started. A quorum below 1, which
// Spec.Validate rejects and QuorumOf finds met by any census, is met by the
// first member to start: a gang cannot have run before any of its members
// did. Preemption's cost order reads it, to spare the gangs that have run
// longest.
func StartedAt(pods []*v1.Pod, minMember int32) time.Time {
	var starts []time.Time
	for _, p := range pods {
		if p.Status.StartTime != nil {
			starts = append(starts, p.Status.StartTime.Time)
		}
	}
	k := max(int(minMember), 1)
	if len(starts) < k {
		return time.Time{}
	}
	slices.SortFunc(starts, time.Time.Compare)
	return starts[k-1]
}
