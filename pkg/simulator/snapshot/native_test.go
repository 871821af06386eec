package snapshot

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

// Gangs are read as the scheduler reads them: a native PodGroup
// (scheduling.k8s.io/v1beta1) and the pods that name it in
// spec.schedulingGroup are a gang, the field winning over a label, with the
// native topology constraint as a required level; a scheduler-plugins
// PodGroup without annotations takes Kueue's on its first member in rank
// order.
func TestParseNativePodGroups(t *testing.T) {
	rl := gangtest.MakeNativePodGroup("rl", "train").MinCount(2).Topology(leafKey).Created(created.Add(4 * time.Minute)).Obj()
	ft := podGroup("train", "ft", 2, 6, nil)
	rl0 := gangtest.InNativeGroup(gpuPod("train", "rl-0", 8, 4), "rl")
	// The label names a PodGroup the snapshot lacks: the field wins, as
	// gang.Of says, so the pod is rl's member and no error.
	rl1 := gangtest.InNativeGroup(member(gpuPod("train", "rl-1", 8, 4), "elsewhere"), "rl")
	ft0 := member(gpuPod("train", "ft-0", 4, 6), "ft")
	ft0.Annotations = map[string]string{scheduling.KueuePreferredTopologyAnnotation: cliqueKey}
	ft1 := member(gpuPod("train", "ft-1", 4, 6), "ft")
	ft1.Annotations = map[string]string{scheduling.KueueRequiredTopologyAnnotation: spineKey}
	objs := []runtime.Object{
		gpuNode("gpu-0", "spine-0", "leaf-0", "nvl-0", 8), gpuNode("gpu-1", "spine-0", "leaf-0", "nvl-0", 8),
		gpuNode("gpu-2", "spine-0", "leaf-1", "nvl-1", 8), gpuNode("gpu-3", "spine-0", "leaf-1", "nvl-1", 8),
		rl, ft, rl0, rl1, ft0, ft1,
	}

	s, err := Parse(list(t, objs...))
	require.NoError(t, err)
	want := []Gang{
		{Key: gang.Key{API: gang.Native, Namespace: "train", Name: "rl"}, MinMember: 2, Created: rl.CreationTimestamp.Time,
			Policy:  placement.Policy{Level: leafKey, Required: true},
			Members: []Pod{{Namespace: "train", Name: "rl-0", GPUs: 8, Created: rl0.CreationTimestamp.Time}, {Namespace: "train", Name: "rl-1", GPUs: 8, Created: rl1.CreationTimestamp.Time}}},
		{Key: gang.Key{Namespace: "train", Name: "ft"}, MinMember: 2, Created: ft.CreationTimestamp.Time,
			Policy:  placement.Policy{Level: cliqueKey},
			Members: []Pod{{Namespace: "train", Name: "ft-0", GPUs: 4, Created: ft0.CreationTimestamp.Time}, {Namespace: "train", Name: "ft-1", GPUs: 4, Created: ft1.CreationTimestamp.Time}}},
	}
	if diff := cmp.Diff(want, s.Gangs); diff != "" {
		t.Errorf("gangs (-want,+got):\n%s", diff)
	}
	require.Empty(t, s.Pending, "every pending pod is a gang member")

	in, err := s.Input(nvidiaOptions(false))
	require.NoError(t, err)
	require.Len(t, in.Jobs, 2)
	require.Equal(t, scenario.Job{Name: "gang-000", Gang: true, Pods: 2, GPUsPerPod: 8, Topology: &scenario.Topology{Level: scenario.TierLeaf, Required: true}}, in.Jobs[0])
	require.Equal(t, &scenario.Topology{Level: scenario.TierClique}, in.Jobs[1].Topology)
}

func TestParseNativePodGroupErrors(t *testing.T) {
	base := []runtime.Object{gpuNode("gpu-0", "s", "l", "", 8), gpuPod("ns", "wait", 1, 0)}
	for _, tc := range []struct {
		name string
		objs []runtime.Object
		want []string
	}{
		{
			name: "member of a missing native PodGroup",
			objs: []runtime.Object{gangtest.InNativeGroup(gpuPod("ns", "m", 1, 0), "nope")},
			want: []string{"Pod ns/m joins PodGroup ns/nope (scheduling.k8s.io/v1beta1), which the snapshot does not hold", NativeCommand},
		},
		{
			name: "native PodGroup with minCount 0",
			objs: []runtime.Object{gangtest.MakeNativePodGroup("zero", "ns").MinCount(0).Obj()},
			want: []string{"PodGroup ns/zero (scheduling.k8s.io/v1beta1): spec.schedulingPolicy.gang.minCount is 0"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(list(t, append(append([]runtime.Object{}, base...), tc.objs...)...))
			require.Error(t, err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

// A pod or node whose only accelerators are not nvidia.com/gpu is left out
// as such, not as CPU-only: the note names what the simulator cannot
// simulate.
func TestParseOtherAccelerators(t *testing.T) {
	amd := gpuPod("ns", "rocm", 0, 1)
	amd.Spec.Containers[0].Resources.Requests = v1.ResourceList{"amd.com/gpu": resource.MustParse("2"), "hugepages-2Mi": resource.MustParse("1Gi")}
	pages := gpuPod("ns", "dpdk", 0, 1)
	pages.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), "hugepages-2Mi": resource.MustParse("1Gi")}
	mig := gpuNode("mig-0", "s", "l", "", 0)
	mig.Status.Allocatable["nvidia.com/mig-1g.10gb"] = resource.MustParse("7")
	s, err := Parse(list(t, gpuNode("gpu-0", "s", "l", "", 8), mig, gpuNode("cpu-0", "", "", "", 0), gpuPod("ns", "wait", 1, 0), amd, pages))
	require.NoError(t, err)
	require.Equal(t, []string{
		"1 nodes without accelerators",
		"1 nodes whose only accelerators are ones the simulator does not simulate (nvidia.com/mig-1g.10gb)",
		"1 pods without accelerators",
		"1 pods whose only accelerators are ones the simulator does not simulate (amd.com/gpu); gang members among them are left out of their gangs",
	}, s.Notes)
}
