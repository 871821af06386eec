package coscheduling

import (
	"sort"
	"strconv"

	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// gangKey names a gang: a PodGroup in a namespace.
type gangKey struct {
	namespace string
	name      string
}

func (k gangKey) String() string { return k.namespace + "/" + k.name }

// gangOf returns the gang a pod belongs to, if any.
func gangOf(pod *v1.Pod) (gangKey, bool) {
	name, ok := pod.Labels[scheduling.PodGroupLabel]
	if !ok || name == "" {
		return gangKey{}, false
	}
	return gangKey{namespace: pod.Namespace, name: name}, true
}

// rankKey orders members: role first (a launcher or master before workers),
// then index, then name so that the order is total.
type rankKey struct {
	role  int
	index int
	name  string
}

func (a rankKey) less(b rankKey) bool {
	if a.role != b.role {
		return a.role < b.role
	}
	if a.index != b.index {
		return a.index < b.index
	}
	return a.name < b.name
}

func rankOf(pod *v1.Pod) rankKey {
	k := rankKey{index: -1, name: pod.Name}
	switch pod.Labels[scheduling.KubeflowReplicaTypeLabel] {
	case "":
	case "launcher", "master", "chief":
		k.role = 0
	default:
		k.role = 1
	}
	for _, label := range []string{scheduling.RankLabel, scheduling.KubeflowReplicaIndexLabel, scheduling.JobSetJobIndexLabel, scheduling.JobCompletionIndexLabel} {
		if v, ok := pod.Labels[label]; ok {
			if i, err := strconv.Atoi(v); err == nil && i >= 0 {
				k.index = i
				break
			}
		}
	}
	return k
}

// sortByRank sorts pods in place by rank.
func sortByRank(pods []*v1.Pod) {
	keys := make(map[*v1.Pod]rankKey, len(pods))
	for _, p := range pods {
		keys[p] = rankOf(p)
	}
	sort.SliceStable(pods, func(i, j int) bool { return keys[pods[i]].less(keys[pods[j]]) })
}
