package podgroup

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// maxLostPerGroup bounds the members remembered per PodGroup; the oldest
// go first.
const maxLostPerGroup = 256

// lostLedger remembers members that left while they held a node and had not
// finished. The API keeps no trace of a deleted pod, and a person repairing
// a job needs to know which ranks are gone. It lives in memory: after a
// restart the controller can count missing members but not name those it
// did not see go.
type lostLedger struct {
	mu      sync.Mutex
	byGroup map[types.NamespacedName][]lostMember
}

// record remembers pod if it was a member of a gang of api that held a node
// and had not finished. spotReclaimed says its node was a spot node that
// went away. Each API's reconciler keeps a ledger of its own, so that two
// gangs of one name, one per API, keep theirs apart.
func (l *lostLedger) record(pod *corev1.Pod, api gang.API, spotReclaimed bool, now time.Time) {
	key, ok := gang.Of(pod)
	if !ok || key.API != api || pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded {
		return
	}
	how := howLost(pod, pod.Spec.NodeName)
	if spotReclaimed {
		how = "reclaimed with spot node " + pod.Spec.NodeName
	}
	m := lostMember{name: pod.Name, node: pod.Spec.NodeName, how: how, at: now}
	group := types.NamespacedName{Namespace: key.Namespace, Name: key.Name}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byGroup == nil {
		l.byGroup = map[types.NamespacedName][]lostMember{}
	}
	ms := append(l.byGroup[group], m)
	if len(ms) > maxLostPerGroup {
		ms = ms[len(ms)-maxLostPerGroup:]
	}
	l.byGroup[group] = ms
}

// of returns a copy of what is remembered of a group.
func (l *lostLedger) of(group types.NamespacedName) []lostMember {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]lostMember(nil), l.byGroup[group]...)
}

// forget drops a deleted group's members.
func (l *lostLedger) forget(group types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.byGroup, group)
}

// lostWithNode reports whether the pod was deleted because its node went
// away, as the pod garbage collector and the taint manager mark it.
func lostWithNode(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue &&
			(c.Reason == "DeletionByPodGC" || c.Reason == "DeletionByTaintManager") {
			return true
		}
	}
	return false
}

// howLost says how a member went from node, from what its last state shows.
func howLost(pod *corev1.Pod, node string) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			switch c.Reason {
			case "PreemptionByScheduler":
				return "preempted from node " + node
			case "DeletionByTaintManager", "DeletionByPodGC":
				return "lost with node " + node
			case "EvictionByEvictionAPI":
				return "evicted from node " + node
			}
			return "disrupted (" + c.Reason + ") on node " + node
		}
	}
	if pod.Status.Phase == corev1.PodFailed {
		return "failed and deleted on node " + node
	}
	return "deleted from node " + node
}
