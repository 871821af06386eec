package core

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

const leafLabel = "network.topology.nvidia.com/leaf"

// TestReturningMemberHierarchy checks the hierarchy of a segmented gang's
// returning member. Ranks 0 and 1 run on one node, rank 2 on another, rank
// 3 returns: the request puts rank 3 with rank 2's anchor, in segment 1,
// and rank 0 and 1's anchors in segment 0.
func TestReturningMemberHierarchy(t *testing.T) {
	job := make([]*v1.Pod, 4)
	for i := range job {
		name := fmt.Sprintf("back-%d", i)
		job[i] = st.MakePod().Namespace("team-a").Name(name).UID("team-a/"+name).
			Label(scheduling.PodGroupLabel, "back").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1", "nvidia.com/gpu": "4"}).Obj()
	}
	seg, err := gang.SegmentsOf(gang.FromPodGroup(gangtest.MakePodGroup("back", "team-a").MinMember(4).
		Annotation(scheduling.AnnotationSegmentSize, "2").
		Annotation(scheduling.AnnotationSegmentTopologyRequired, leafLabel).Obj()), job)
	require.NoError(t, err)
	anchorOf := map[types.UID]int{job[0].UID: 0, job[1].UID: 1, job[2].UID: 2}
	got, err := gangHierarchy("back", seg, placement.Policy{}, job, job[3:], anchorOf, &dra.PassDemand{})
	require.NoError(t, err)
	leaf := placement.Policy{Level: leafLabel, Required: true}
	want := &placement.Subgroup{Name: "back", Children: []placement.Subgroup{
		{Name: "back segment 0 (ranks 0-1)", Policy: leaf, Anchors: []int{0, 1}},
		{Name: "back segment 1 (ranks 2-3)", Policy: leaf, Members: []int{0}, Anchors: []int{2}},
	}}
	require.Equal(t, want, got)
}
