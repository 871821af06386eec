package gang

import (
	"sort"
	"strconv"

	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// Rank orders a gang's members: role first (a launcher or master before
// workers), then index, then name, so that the order is total.
type Rank struct {
	role  int
	index int
	name  string
}

// Less reports whether r comes before o.
func (r Rank) Less(o Rank) bool {
	if r.role != o.role {
		return r.role < o.role
	}
	if r.index != o.index {
		return r.index < o.index
	}
	return r.name < o.name
}

// Index is the member's index within its role, or -1 when no label gives
// one.
func (r Rank) Index() int { return r.index }

// RankOf reads a member's rank from the first label that gives one: gpu-gang's
// own rank label, Kubeflow's replica index, JobSet's job index or an indexed
// Job's completion index. Kubeflow masters, chiefs and launchers rank before
// workers.
func RankOf(pod *v1.Pod) Rank {
	r := Rank{index: -1, name: pod.Name}
	if pod.Labels[scheduling.KubeflowReplicaTypeLabel] != "" && !IsLeader(pod) {
		r.role = 1
	}
	for _, label := range []string{scheduling.RankLabel, scheduling.KubeflowReplicaIndexLabel, scheduling.JobSetJobIndexLabel, scheduling.JobCompletionIndexLabel} {
		if v, ok := pod.Labels[label]; ok {
			if i, err := strconv.Atoi(v); err == nil && i >= 0 {
				r.index = i
				break
			}
		}
	}
	return r
}

// IsLeader reports whether pod is a Kubeflow launcher, master or chief: the
// one member of its role, which ranks before the workers, is essential to
// the running gang (Essential) and sits outside segments that slice the
// workers (SegmentsOf).
func IsLeader(pod *v1.Pod) bool {
	switch pod.Labels[scheduling.KubeflowReplicaTypeLabel] {
	case "launcher", "master", "chief":
		return true
	}
	return false
}

// SortByRank sorts pods in place by rank.
func SortByRank(pods []*v1.Pod) {
	ranks := make(map[*v1.Pod]Rank, len(pods))
	for _, p := range pods {
		ranks[p] = RankOf(p)
	}
	sort.SliceStable(pods, func(i, j int) bool { return ranks[pods[i]].Less(ranks[pods[j]]) })
}

// Essential marks, for a running gang's pods, the members it cannot lose
// and keep running: a Kubeflow launcher, master or chief, and the
// lowest-ranked member, which hosts the rendezvous in torchrun, DeepSpeed
// and most other launchers. Preemption may take a gang's members above
// minMember one by one, but never these: they go only with the whole gang.
func Essential(pods []*v1.Pod) []bool {
	out := make([]bool, len(pods))
	first := -1
	var firstRank Rank
	for i, p := range pods {
		out[i] = IsLeader(p)
		if r := RankOf(p); first < 0 || r.Less(firstRank) {
			first, firstRank = i, r
		}
	}
	if first >= 0 {
		out[first] = true
	}
	return out
}
