package coscheduling

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/core"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/eligibility"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
)

// cudaSlice is gpuSlice of 8 H100s whose driver supports CUDA up to cuda.
func cudaSlice(node, cuda string) *resourceapi.ResourceSlice {
	s := gpuSlice(node, "H100", "H100", "H100", "H100", "H100", "H100", "H100", "H100")
	for i := range s.Spec.Devices {
		s.Spec.Devices[i].Attributes[scheduling.DeviceAttributeCUDADriverVersion] = resourceapi.DeviceAttribute{VersionValue: ptr.To(cuda)}
	}
	return s
}

// The template pass runs PreFilter for a stand-in without the claims and
// DRA-served extended resources the model counts (eligibility.Runner.WithoutCountedClaims); the GPU
// rules must still bind it. A gang that needs CUDA 12.4 whose GPUs come
// through DRA is planned on the 12.4 nodes only, though the 12.2 nodes
// come first in the planner's order.
func TestStandInKeepsFleetDemand(t *testing.T) {
	for _, source := range []string{gpusClaims, gpusMapped} {
		t.Run("gpus="+source, func(t *testing.T) {
			var nodes []*v1.Node
			objects := []runtime.Object{nvidiaClass()}
			for i, cuda := range []string{"12.2.0", "12.2.0", "12.4.0", "12.4.0"} {
				name := fmt.Sprintf("n%d", i)
				nodes = append(nodes, draNode(name))
				objects = append(objects, cudaSlice(name, cuda))
			}
			job := benchDRAJob("cuda", 2, source)
			var pods []*v1.Pod
			for _, m := range job {
				pods = append(pods, m.pod)
				objects = append(objects, m.claims...)
			}
			pg := gangtest.MakePodGroup("cuda", testNS).MinMember(2).Annotation(scheduling.AnnotationMinCUDA, "12.4").Obj()
			env := newTestEnv(t, nodes, pods, []*v1alpha1.PodGroup{pg}, withDRA(), withGPUFleetDevices(t), withObjects(objects...))

			planned := plannedNodes(t, env, pods)
			require.ElementsMatch(t, []string{"n2", "n3"}, planned, "the 12.2 nodes must not be planned on")

			// The plan above came from the stand-in: its template's devices
			// are counted and nothing keeps the member itself in PreFilter.
			d, status := env.pl.core.DemandOf(env.ctx, nil, pods, 0)
			require.Nil(t, status)
			templates, of := eligibility.TemplatesOf(pods, d.Requests)
			core.MarkCounted(d, templates, of)
			_, ok := env.pl.core.Eligibility().WithoutCountedClaims(templates[0], env.pl.core.Eligibility().ExtendedClaims())
			require.True(t, ok, "the template pass must run on a stand-in")
			env.pl.core.Eligibility().PreFilter(env.ctx, templates, env.pl.core.LiveNodes(snapshotNodes(t, env)), ledger.LessonView{})
			env.pl.core.Eligibility().Filter(env.ctx, templates, env.pl.core.LiveNodes(snapshotNodes(t, env)), eligibility.All)
			require.Equal(t, []bool{false, false, true, true}, templates[0].Eligible)
		})
	}
}

// snapshotNodes lists the nodes of the env's snapshot.
func snapshotNodes(t *testing.T, env *testEnv) []fwk.NodeInfo {
	t.Helper()
	nis, err := env.fh.SnapshotSharedLister().NodeInfos().List()
	require.NoError(t, err)
	return nis
}

// What DynamicResources' PreFilter would judge beyond capacity keeps the
// member itself in the template pass.
func TestStandInKeepsWhatDynamicResourcesJudges(t *testing.T) {
	tmpl := claimTemplate(testNS, "gpus", gpuClaimSpec(scheduling.DeviceClassGPU, 8, ""))
	for _, tt := range []struct {
		name string
		// edit changes the member's claim; nil leaves it as made.
		edit func(*resourceapi.ResourceClaim)
		want bool
	}{
		{name: "an unallocated claim of the pod's own", want: true},
		{name: "a claim being deleted", edit: func(c *resourceapi.ResourceClaim) { c.DeletionTimestamp = &metav1.Time{} }},
		{name: "a claim made for another pod", edit: func(c *resourceapi.ResourceClaim) { c.OwnerReferences[0].UID = "someone-else" }},
		{name: "an allocated claim", edit: func(c *resourceapi.ResourceClaim) {
			c.Status.Allocation = allocatedClaim("x", "y", "n0", "gpu-0").Status.Allocation
		}},
		{name: "a claim with a matchAttribute constraint", edit: func(c *resourceapi.ResourceClaim) {
			c.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(scheduling.DRADriverGPU + "/" + scheduling.DeviceAttributeProductName))}}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pod := member("g", "g-0", "")
			claim := claimFromTemplate(pod, "gpus", tmpl)
			if tt.edit != nil {
				tt.edit(claim)
			}
			env := newTestEnv(t, []*v1.Node{draNode("n0")}, []*v1.Pod{pod},
				[]*v1alpha1.PodGroup{gangtest.MakePodGroup("g", testNS).MinMember(1).Obj()},
				withDRA(), withObjects(nvidiaClass(), gpuSlice("n0", "H100", "H100", "H100", "H100", "H100", "H100", "H100", "H100"), tmpl, claim))
			d, status := env.pl.core.DemandOf(env.ctx, nil, []*v1.Pod{pod}, 0)
			require.Nil(t, status)
			templates, of := eligibility.TemplatesOf([]*v1.Pod{pod}, d.Requests)
			core.MarkCounted(d, templates, of)
			standIn, ok := env.pl.core.Eligibility().WithoutCountedClaims(templates[0], env.pl.core.Eligibility().ExtendedClaims())
			require.Equal(t, tt.want, ok)
			if ok {
				require.Empty(t, standIn.Spec.ResourceClaims)
				require.NotEmpty(t, pod.Spec.ResourceClaims, "the member itself is left as it is")
			}
		})
	}
}
