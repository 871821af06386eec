package podgroup

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// members is what a PodGroup's pods say about its gang. Whether the gang has
// enough members is pkg/gang's to say: census and quorum come from
// gang.Census and gang.QuorumOf, as the scheduler decides them, and every
// condition that speaks of quorum reads them here. Failed members and
// members being deleted do not count; succeeded members count while some
// member is still bound.
type members struct {
	// minMember is the quorum of a valid spec (at least 1).
	minMember int32
	census    gang.Census
	quorum    gang.Quorum
	// present are the pods not being deleted, in any phase, sorted by
	// name: the ones messages and hints name.
	present []*corev1.Pod
	// running counts present members in phase Running: what tells a gang
	// that runs from one whose members are only bound.
	running int32
	// lastCreated is when the newest present pod was created.
	lastCreated time.Time
}

func countMembers(minMember int32, pods []corev1.Pod) members {
	m := members{minMember: minMember, present: presentPods(pods)}
	for i := range pods {
		m.census.Add(&pods[i])
	}
	for _, p := range m.present {
		if p.Status.Phase == corev1.PodRunning {
			m.running++
		}
		if t := p.CreationTimestamp.Time; t.After(m.lastCreated) {
			m.lastCreated = t
		}
	}
	m.quorum = gang.QuorumOf(minMember, m.census)
	return m
}

// active counts the members that have not finished and are not being
// deleted.
func (m members) active() int32 { return m.census.Waiting + m.census.Bound }

// placed is how many members hold or held a node, for messages: the count
// the quorum reached, or minMember less what it misses.
func (m members) placed() int32 {
	if m.quorum.Placed {
		return m.census.Placed()
	}
	return m.minMember - m.quorum.Missing
}

// gathered is how many members exist, for messages: every member that
// exists once the quorum gathered, or minMember less those absent.
func (m members) gathered() int32 {
	if m.quorum.Gathered {
		return m.census.Present()
	}
	return m.minMember - m.quorum.Absent
}

// runningQuorum reports whether minMember members run or have succeeded:
// the quorum placed, with only the members whose containers run counted as
// bound.
func (m members) runningQuorum() bool {
	return gang.QuorumOf(m.minMember, gang.Census{Bound: m.running, Succeeded: m.census.Succeeded}).Placed
}

// phaseCounts counts pods by phase, those being deleted included. They are
// the status fields running, succeeded and failed, which scheduler-plugins
// defines so (what a person listing the group's pods sees), and they tell
// how a run ended while its pods are cleaned up. They never decide quorum.
type phaseCounts struct {
	running, succeeded, failed int32
}

func countPhases(pods []corev1.Pod) phaseCounts {
	var n phaseCounts
	for i := range pods {
		switch pods[i].Status.Phase {
		case corev1.PodRunning:
			n.running++
		case corev1.PodSucceeded:
			n.succeeded++
		case corev1.PodFailed:
			n.failed++
		}
	}
	return n
}
