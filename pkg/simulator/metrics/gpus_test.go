package metrics

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/workload"
)

func TestPodGPUs(t *testing.T) {
	exact := func(class string, n int64) resourceapi.DeviceRequest {
		return resourceapi.DeviceRequest{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: n}}
	}
	spec := func(reqs ...resourceapi.DeviceRequest) *resourceapi.ResourceClaimSpec {
		return &resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: reqs}}
	}
	specs := claimSpecs{
		templates: map[string]*resourceapi.ResourceClaimSpec{
			"eight": spec(exact(scheduling.DeviceClassGPU, 8)),
			"all": spec(resourceapi.DeviceRequest{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: scheduling.DeviceClassGPU, AllocationMode: resourceapi.DeviceAllocationModeAll}}),
			"gpu-and-nic": spec(exact(scheduling.DeviceClassGPU, 2), exact("rdma.example.com", 1)),
			"default-one": spec(exact(scheduling.DeviceClassGPU, 0)),
			"prioritized": spec(resourceapi.DeviceRequest{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
				{Name: "big", DeviceClassName: scheduling.DeviceClassGPU, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 4},
				{Name: "small", DeviceClassName: scheduling.DeviceClassGPU, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
			}}),
		},
		claims: map[string]*resourceapi.ResourceClaimSpec{"five": spec(exact(scheduling.DeviceClassGPU, 5))},
	}
	pod := func(gpus int64, claims ...v1.PodResourceClaim) *v1.Pod {
		p := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{}}, ResourceClaims: claims}}
		if gpus > 0 {
			p.Spec.Containers[0].Resources.Requests = v1.ResourceList{fabric.GPU: *resource.NewQuantity(gpus, resource.DecimalSI)}
		}
		return p
	}
	fromTemplate := func(name string) v1.PodResourceClaim {
		return v1.PodResourceClaim{Name: "gpus", ResourceClaimTemplateName: ptr.To(name)}
	}
	mapped := pod(8)
	mapped.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "p-extended-resources-abcde"}
	tests := []struct {
		name string
		pod  *v1.Pod
		want int
	}{
		{name: "nvidia.com/gpu", pod: pod(8), want: 8},
		{name: "nvidia.com/gpu served through DRA: the scheduler's claim holds those very GPUs", pod: mapped, want: 8},
		{name: "claim from a template", pod: pod(0, fromTemplate("eight")), want: 8},
		{name: "named claim", pod: pod(0, v1.PodResourceClaim{Name: "gpus", ResourceClaimName: ptr.To("five")}), want: 5},
		{name: "every GPU of the node", pod: pod(0, fromTemplate("all")), want: 16},
		{name: "devices of another class are no GPUs", pod: pod(0, fromTemplate("gpu-and-nic")), want: 2},
		{name: "an exact count defaults to one", pod: pod(0, fromTemplate("default-one")), want: 1},
		{name: "a prioritized list counts its first choice", pod: pod(0, fromTemplate("prioritized")), want: 4},
		{name: "both", pod: pod(1, fromTemplate("eight")), want: 9},
		{name: "a template the run did not make", pod: pod(0, fromTemplate("other")), want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, specs.podGPUs(tc.pod, 16))
		})
	}
}

// The same placements measure the same whether the GPUs come from the
// device plugin, from DRA devices through the DeviceClass's extended
// resource, or through claims: no profile's figures can gain from how its
// pods ask for GPUs, and a DRA node's GPUs are its slice's devices.
func TestDRAPodsMeasureAsDevicePluginPods(t *testing.T) {
	jobs := []scenario.Job{
		{Name: "g", Gang: true, Pods: 2, GPUsPerPod: 8, Duration: 4 * time.Second},
		{Name: "h", Gang: true, Pods: 2, GPUsPerPod: 8},
		{Name: "p", Pods: 1, GPUsPerPod: 2},
	}
	run := func(t *testing.T, source, request string) *Result {
		l, err := fabric.NewLayout(scenario.Fabric{Spines: 1, LeavesPerSpine: 2, NodesPerLeaf: 4, GPUsPerNode: 8, CliqueSize: 2, Preset: "nvidia", GPUSource: source})
		require.NoError(t, err)
		tr, err := NewTracker(l, Grace{Base: time.Second})
		require.NoError(t, err)
		js := make([]scenario.Job, len(jobs))
		b := &workload.Builder{Namespace: "sim", Flavor: workload.Plain}
		pods := map[string][]*v1.Pod{}
		var templates []*resourceapi.ResourceClaimTemplate
		for i, j := range jobs {
			j.GPURequest = request
			js[i] = j
			o, err := b.Build(&js[i])
			require.NoError(t, err)
			pods[j.Name] = o.Pods
			templates = append(templates, o.ClaimTemplate)
		}
		tr.Expect(js)
		tr.Start(t0)
		for _, j := range js {
			tr.Submitted(j.Name, t0)
		}
		dra := source == scenario.GPUSourceDRA
		tr.KnowClaims(templates, []*resourceapi.ResourceClaim{workload.PrefillClaim("sim", 0, "s0-l1-n3", 6)})
		tr.Observe(workload.PrefillPod("sim", 0, "s0-l1-n3", 6, dra), at(0))
		bind := func(job string, i int, node string, s float64) {
			p := bound(pods[job][i], node)
			if dra && request == scenario.GPURequestExtendedResource {
				p.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: p.Name + "-extended-resources-x"}
			}
			tr.Observe(p, at(s))
		}
		bind("g", 0, "s0-l0-n0", 1)
		tr.Sample(at(1.5))
		bind("g", 1, "s0-l1-n0", 3)
		bind("p", 0, "s0-l0-n1", 3)
		bind("h", 0, "s0-l0-n2", 4)
		bind("h", 1, "s0-l0-n3", 4.5)
		tr.Sample(at(5))
		for i, n := range []string{"s0-l0-n0", "s0-l1-n0"} {
			tr.Observe(finished(pods["g"][i], n), at(7))
		}
		tr.Sample(at(8))
		return tr.Result(at(10), false)
	}
	want := run(t, scenario.GPUSourceDevicePlugin, scenario.GPURequestExtendedResource)
	require.InDelta(t, 16*4+2*7+16*5.5, want.Summary.UsefulGPUSeconds, 1e-9)
	require.InDelta(t, 8*2+8*0.5, want.Summary.IdleHeldGPUSecondsToEnd, 1e-9)
	require.Equal(t, 6, want.Fabric.PrefilledGPUs)
	require.Equal(t, 1, want.Summary.AtJointBound, "h in one clique; g across leaves")
	for _, tc := range []struct{ name, source, request string }{
		{"nvidia.com/gpu from DRA devices", scenario.GPUSourceDRA, scenario.GPURequestExtendedResource},
		{"claims", scenario.GPUSourceDRA, scenario.GPURequestClaim},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := run(t, tc.source, tc.request)
			require.Equal(t, FabricSize{Spines: 1, Leaves: 2, Cliques: 4, Nodes: 8, GPUs: 64, PrefilledGPUs: 6, DRANodes: 8, DRAGPUs: 64}, got.Fabric)
			got.Fabric.DRANodes, got.Fabric.DRAGPUs = 0, 0
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("result (-device plugin,+%s):\n%s", tc.name, diff)
			}
		})
	}
}

// A gang that claims its GPUs can only use DRA nodes, so its lower bounds
// count only theirs: a free clique of device-plugin nodes does not make a
// claim gang split over two DRA cliques look worse than it could be. A gang
// that asks for nvidia.com/gpu could have used that clique, and is charged.
func TestClaimGangBoundCountsOnlyDRANodes(t *testing.T) {
	l, err := fabric.NewLayout(scenario.Fabric{Spines: 2, LeavesPerSpine: 1, NodesPerLeaf: 4, GPUsPerNode: 8, CliqueSize: 2, Preset: "nvidia",
		GPUSource: scenario.GPUSourceMixed, DRANodes: &scenario.DRANodes{Spines: []int{1}}})
	require.NoError(t, err)
	for _, tc := range []struct {
		request    string
		wantClique int
	}{
		{request: scenario.GPURequestClaim, wantClique: 2},
		{request: scenario.GPURequestExtendedResource, wantClique: 1},
	} {
		t.Run(tc.request, func(t *testing.T) {
			tr, err := NewTracker(l, Grace{Base: time.Second})
			require.NoError(t, err)
			job := scenario.Job{Name: "g", Gang: true, Pods: 2, GPUsPerPod: 8, GPURequest: tc.request}
			o, err := (&workload.Builder{Namespace: "sim", Flavor: workload.Plain}).Build(&job)
			require.NoError(t, err)
			tr.Expect([]scenario.Job{job})
			tr.Start(t0)
			tr.KnowClaims([]*resourceapi.ResourceClaimTemplate{o.ClaimTemplate}, nil)
			// Pre-fill takes one node of each DRA clique; the
			// device-plugin spine s0 is empty.
			for i, n := range []string{"s1-l0-n1", "s1-l0-n3"} {
				tr.KnowClaims(nil, []*resourceapi.ResourceClaim{workload.PrefillClaim("sim", i, n, 8)})
				tr.Observe(workload.PrefillPod("sim", i, n, 8, true), at(0))
			}
			tr.Observe(bound(o.Pods[0], "s1-l0-n0"), at(1))
			tr.Observe(bound(o.Pods[1], "s1-l0-n2"), at(1))
			spans := tr.Result(at(2), false).Gangs[0].Spans
			require.Equal(t, Span{Level: "NVLink domain", Domains: 2, LowerBound: tc.wantClique, JointBound: tc.wantClique}, spans[2])
		})
	}
}

// A job that claims its GPUs needs as many leaves as DRA nodes hold it in.
func TestFewestLeavesOfAClaimJob(t *testing.T) {
	l, err := fabric.NewLayout(scenario.Fabric{Spines: 2, LeavesPerSpine: 2, NodesPerLeaf: 2, GPUsPerNode: 8, Preset: "nvidia",
		GPUSource: scenario.GPUSourceMixed, DRANodes: &scenario.DRANodes{Spines: []int{1}}})
	require.NoError(t, err)
	mapped := scenario.Job{Name: "m", Gang: true, Pods: 6, GPUsPerPod: 8}
	claim := mapped
	claim.GPURequest = scenario.GPURequestClaim
	pt := NewPreemptionTracker(l, []scenario.Job{mapped})
	require.Equal(t, 3, pt.fewestLeaves(mapped), "three whole leaves hold six nodes")
	require.Equal(t, 4, pt.fewestLeaves(claim), "the two DRA leaves hold four of them: no set of leaves holds it")
	claim.Pods = 4
	require.Equal(t, 2, pt.fewestLeaves(claim))
}
