package gpufleet

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// A pod this plugin turned away is tried again when a ResourceSlice
// changes so that its node may admit it, and not for slices that cannot.
func TestSliceHints(t *testing.T) {
	nodes := []*v1.Node{draNode("dra-0"), draNode("dra-labelled", gfd(h100, "535.104.05", "12.2", "9.0"))}
	env := newTestEnv(t, nodes, nil, nil, nil, withDRA(chartClass(), claimOf("gpus", scheduling.DeviceClassGPU, 8),
		gpuSlice("dra-0", eight(h100At122)...)))
	logger := env.pl.logger
	member := claimPod("m", "gpus").Annotation(scheduling.AnnotationMinCUDA, "12.4").Obj()

	old122, new124 := gpuSlice("dra-0", eight(h100At122)...), gpuSlice("dra-0", eight(h100At124)...)
	fewer124 := gpuSlice("dra-0", h100At124, h100At124)
	mixed := gpuSlice("dra-0", h100At124, h100At122)
	nic := st.MakeResourceSlice("dra-0", "nic.example.com").Device("nic-0").Obj()
	labelled := gpuSlice("dra-labelled", eight(h100At124)...)
	unknownNode := gpuSlice("gone", eight(h100At124)...)
	for _, tc := range []struct {
		name     string
		old, new *resourceapi.ResourceSlice
		want     fwk.QueueingHint
	}{
		{"the driver reports a newer CUDA version", old122, new124, fwk.Queue},
		{"a node's GPUs published that admit the member", nil, new124, fwk.Queue},
		{"a node's GPUs published that do not", nil, old122, fwk.QueueSkip},
		{"a slice that admitted it before and still does", new124, fewer124, fwk.QueueSkip},
		{"a node whose GPUs still include an old one", old122, mixed, fwk.QueueSkip},
		{"another driver's slice", nil, nic, fwk.QueueSkip},
		{"devices of a node whose labels say its version", nil, labelled, fwk.QueueSkip},
		{"devices of a node the scheduler does not know", nil, unknownNode, fwk.QueueSkip},
		{"GPUs withdrawn", old122, nil, fwk.Queue},
		{"another driver's devices withdrawn", nic, nil, fwk.QueueSkip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var old, cur interface{}
			if tc.old != nil {
				old = tc.old
			}
			if tc.new != nil {
				cur = tc.new
			}
			got, err := env.pl.isSliceNowAdmitting(logger, member, old, cur)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// A DRA node relabelled so that it admits the pod is judged with its
// devices: it says its CUDA version through them, not its labels.
func TestNodeHintOnDRANode(t *testing.T) {
	upgrading := draNode("dra-0", label(scheduling.LabelGPUDriverUpgradeState, "upgrade-required"))
	env := newTestEnv(t, []*v1.Node{upgrading}, nil, nil, nil, withDRA(chartClass(), claimOf("gpus", scheduling.DeviceClassGPU, 8),
		gpuSlice("dra-0", eight(h100At124)...)))
	member := claimPod("m", "gpus").Annotation(scheduling.AnnotationMinCUDA, "12.4").Obj()
	_, status := env.preFilter(member)
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "the only node is being upgraded")

	done := draNode("dra-0", label(scheduling.LabelGPUDriverUpgradeState, scheduling.UpgradeStateDone))
	got, err := env.pl.isNodeNowAdmitting(env.pl.logger, member, upgrading, done)
	require.NoError(t, err)
	require.Equal(t, fwk.Queue, got, "the upgrade ended on a node whose devices say CUDA 12.4")
	got, err = env.pl.isNodeNowAdmitting(env.pl.logger, member, nil, draNode("dra-1"))
	require.NoError(t, err)
	require.Equal(t, fwk.QueueSkip, got, "a new node that publishes no GPU yet says no CUDA version")
}

// A pod whose claims or classes PreFilter could not read is tried again
// when they come.
func TestClaimAndClassHints(t *testing.T) {
	p := claimPod("p", "named").PodResourceClaims(v1.PodResourceClaim{Name: "tmpl", ResourceClaimTemplateName: ptr.To("gpu-8")}).Obj()
	p.UID = "pod-uid"
	fromTemplate := claimOf("p-tmpl-x7k2", scheduling.DeviceClassGPU, 8)
	fromTemplate.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: ptr.To(true)}}
	otherNS := claimOf("named", scheduling.DeviceClassGPU, 8)
	otherNS.Namespace = "team-b"
	logger, _ := ktesting.NewTestContext(t)
	for _, tc := range []struct {
		name  string
		claim *resourceapi.ResourceClaim
		want  fwk.QueueingHint
	}{
		{"the claim the pod names", claimOf("named", scheduling.DeviceClassGPU, 8), fwk.Queue},
		{"a claim made from one of the pod's templates", fromTemplate, fwk.Queue},
		{"another pod's claim", claimOf("other", scheduling.DeviceClassGPU, 8), fwk.QueueSkip},
		{"a claim of that name in another namespace", otherNS, fwk.QueueSkip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := isPodsClaim(logger, p, nil, tc.claim)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}

	for _, tc := range []struct {
		name  string
		pod   *v1.Pod
		class *resourceapi.DeviceClass
		want  fwk.QueueingHint
	}{
		{"a pod with claims", p, nicClass(), fwk.Queue},
		{"a pod without claims, a class that maps no resource", pod("q", gpus("8")).Obj(), nicClass(), fwk.QueueSkip},
		{"a pod without claims, a class that maps one", pod("q", gpus("8")).Obj(), chartClass(), fwk.Queue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mayUseClass(logger, tc.pod, nil, tc.class)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}

	env := newTestEnv(t, nil, nil, nil, nil)
	made := p.DeepCopy()
	made.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "tmpl", ResourceClaimName: ptr.To("p-tmpl-x7k2")}}
	got, err := env.pl.isRequirementChange(logger, p, p, made)
	require.NoError(t, err)
	require.Equal(t, fwk.Queue, got, "the claims made from the pod's templates named in its status")
}

// The DRA events are registered where the scheduler runs DRA, and only
// there.
func TestEventsToRegisterWithDRA(t *testing.T) {
	resources := func(objs ...runtime.Object) []fwk.EventResource {
		var opts []envOption
		if objs != nil {
			opts = append(opts, withDRA(objs...))
		}
		env := newTestEnv(t, nil, nil, nil, nil, opts...)
		events, err := env.pl.EventsToRegister(env.ctx)
		require.NoError(t, err)
		var out []fwk.EventResource
		for _, e := range events {
			require.NotNil(t, e.QueueingHintFn, "event %v has a hint", e.Event)
			out = append(out, e.Event.Resource)
		}
		return out
	}
	require.NotContains(t, resources(), fwk.ResourceSlice)
	got := resources(chartClass())
	for _, r := range []fwk.EventResource{fwk.ResourceSlice, fwk.ResourceClaim, fwk.DeviceClass} {
		require.Contains(t, got, r)
	}
}
