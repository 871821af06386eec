package gang

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

func TestSortByRank(t *testing.T) {
	pods := []*v1.Pod{
		pod("worker-10").Label(scheduling.KubeflowReplicaTypeLabel, "worker").Label(scheduling.KubeflowReplicaIndexLabel, "10").Obj(),
		pod("worker-2").Label(scheduling.KubeflowReplicaTypeLabel, "worker").Label(scheduling.KubeflowReplicaIndexLabel, "2").Obj(),
		pod("launcher").Label(scheduling.KubeflowReplicaTypeLabel, "launcher").Obj(),
		pod("job-b").Label(scheduling.JobCompletionIndexLabel, "1").Obj(),
		pod("job-a").Label(scheduling.JobCompletionIndexLabel, "not-a-number").Obj(),
		pod("own").Label(scheduling.RankLabel, "0").Obj(),
	}
	SortByRank(pods)
	var got []string
	for _, p := range pods {
		got = append(got, p.Name)
	}
	// Role 0 first (no replica type, or launcher): unindexed, then by index,
	// then by name; workers after, by index.
	want := []string{"job-a", "launcher", "own", "job-b", "worker-2", "worker-10"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("order (-want,+got):\n%s", diff)
	}
}

func TestEssential(t *testing.T) {
	for _, tc := range []struct {
		name string
		pods []*v1.Pod
		want []bool
	}{
		{name: "no pods", want: []bool{}},
		{
			name: "workers only: the lowest rank hosts the rendezvous",
			pods: []*v1.Pod{
				pod("w-2").Label(scheduling.RankLabel, "2").Obj(),
				pod("w-0").Label(scheduling.RankLabel, "0").Obj(),
				pod("w-1").Label(scheduling.RankLabel, "1").Obj(),
			},
			want: []bool{false, true, false},
		},
		{
			name: "an MPI launcher and the lowest-ranked worker",
			pods: []*v1.Pod{
				pod("worker-1").Label(scheduling.KubeflowReplicaTypeLabel, "worker").Label(scheduling.KubeflowReplicaIndexLabel, "1").Obj(),
				pod("launcher").Label(scheduling.KubeflowReplicaTypeLabel, "launcher").Obj(),
				pod("worker-0").Label(scheduling.KubeflowReplicaTypeLabel, "worker").Label(scheduling.KubeflowReplicaIndexLabel, "0").Obj(),
			},
			want: []bool{false, true, false},
		},
		{
			name: "a PyTorchJob master ranks first; a chief is kept too",
			pods: []*v1.Pod{
				pod("chief").Label(scheduling.KubeflowReplicaTypeLabel, "chief").Label(scheduling.KubeflowReplicaIndexLabel, "1").Obj(),
				pod("master").Label(scheduling.KubeflowReplicaTypeLabel, "master").Label(scheduling.KubeflowReplicaIndexLabel, "0").Obj(),
				pod("worker-0").Label(scheduling.KubeflowReplicaTypeLabel, "worker").Label(scheduling.KubeflowReplicaIndexLabel, "0").Obj(),
			},
			want: []bool{true, true, false},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Essential(tc.pods)); diff != "" {
				t.Errorf("Essential (-want,+got):\n%s", diff)
			}
		})
	}
}
