package coscheduling

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// A member is queued when another member of its unit appears or binds,
// never for itself, a pod of another unit or a pod outside any gang.
func TestSiblingHint(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	job := gang.Key{Namespace: testNS, Name: "job"}
	units := map[string]gang.Key{"m0": job, "m1": job, "other": {Namespace: testNS, Name: "other"}}
	unitOf := func(p *v1.Pod) (gang.Key, bool) {
		k, ok := units[p.Name]
		return k, ok
	}
	pod := func(name string) *v1.Pod { return st.MakePod().Namespace(testNS).Name(name).UID(name).Obj() }

	for _, tc := range []struct {
		name      string
		pod       *v1.Pod
		newObj    any
		want      fwk.QueueingHint
		wantError bool
	}{
		{name: "a sibling", pod: pod("m0"), newObj: pod("m1"), want: fwk.Queue},
		{name: "the pod itself", pod: pod("m0"), newObj: pod("m0"), want: fwk.QueueSkip},
		{name: "a member of another gang", pod: pod("m0"), newObj: pod("other"), want: fwk.QueueSkip},
		{name: "a pod outside any gang", pod: pod("m0"), newObj: pod("loner"), want: fwk.QueueSkip},
		{name: "the pod is outside any gang", pod: pod("loner"), newObj: pod("m1"), want: fwk.QueueSkip},
		{name: "not a pod", pod: pod("m0"), newObj: &v1.Node{}, want: fwk.Queue, wantError: true},
		{name: "not a pod, for a pod outside any gang", pod: pod("loner"), newObj: &v1.Node{}, want: fwk.QueueSkip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := siblingHint(logger, unitOf, tc.pod, tc.newObj)
			require.Equal(t, tc.wantError, err != nil, "error: %v", err)
			require.Equal(t, tc.want, got)
		})
	}
}

// A node update queues a pod only when it could make room: the node is
// new, allocatable grew, a taint or the unschedulable mark went away, or
// its labels changed.
func TestIsNodeMoreCapable(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	base := st.MakeNode().Name("n").Label("zone", "a").Capacity(map[v1.ResourceName]string{"cpu": "4"}).Taints([]v1.Taint{{Key: "k", Effect: v1.TaintEffectNoSchedule}}).Obj()
	with := func(edit func(n *v1.Node)) *v1.Node {
		n := base.DeepCopy()
		edit(n)
		return n
	}
	for _, tc := range []struct {
		name      string
		old, new  any
		want      fwk.QueueingHint
		wantError bool
	}{
		{name: "added", old: nil, new: base, want: fwk.Queue},
		{name: "allocatable grew", old: base, new: with(func(n *v1.Node) { n.Status.Allocatable["cpu"] = resource.MustParse("8") }), want: fwk.Queue},
		{name: "a new resource", old: base, new: with(func(n *v1.Node) { n.Status.Allocatable[gpu] = resource.MustParse("8") }), want: fwk.Queue},
		{name: "a taint went away", old: base, new: with(func(n *v1.Node) { n.Spec.Taints = nil }), want: fwk.Queue},
		{name: "no longer unschedulable", old: with(func(n *v1.Node) { n.Spec.Unschedulable = true }), new: base, want: fwk.Queue},
		{name: "labels changed", old: base, new: with(func(n *v1.Node) { n.Labels["zone"] = "b" }), want: fwk.Queue},
		{name: "allocatable shrank", old: base, new: with(func(n *v1.Node) { n.Status.Allocatable["cpu"] = resource.MustParse("2") }), want: fwk.QueueSkip},
		{name: "a taint added", old: base, new: with(func(n *v1.Node) { n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: "j"}) }), want: fwk.QueueSkip},
		{name: "cordoned", old: base, new: with(func(n *v1.Node) { n.Spec.Unschedulable = true }), want: fwk.QueueSkip},
		{name: "nothing that helps", old: base, new: with(func(n *v1.Node) { n.Annotations = map[string]string{"a": "b"} }), want: fwk.QueueSkip},
		{name: "not a node", old: nil, new: &v1.Pod{}, want: fwk.Queue, wantError: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := isNodeMoreCapable(logger, st.MakePod().Name("p").Obj(), tc.old, tc.new)
			require.Equal(t, tc.wantError, err != nil, "error: %v", err)
			require.Equal(t, tc.want, got)
		})
	}
}

// A claim change queues a pod when the claim's devices free up or a claim
// the pod names appears; nothing else does.
func TestClaimChangeHint(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	claim := func(name string, allocated bool) *resourceapi.ResourceClaim {
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name}}
		if allocated {
			c.Status.Allocation = &resourceapi.AllocationResult{}
		}
		return c
	}
	pod := st.MakePod().Namespace(testNS).Name("p").Obj()
	pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("own")}}
	elsewhere := claim("own", false)
	elsewhere.Namespace = "other"

	for _, tc := range []struct {
		name      string
		old, new  any
		want      fwk.QueueingHint
		wantError bool
	}{
		{name: "an allocated claim deleted", old: claim("c", true), new: nil, want: fwk.Queue},
		{name: "an allocated claim deleted, as a tombstone", old: cache.DeletedFinalStateUnknown{Obj: claim("c", true)}, new: nil, want: fwk.Queue},
		{name: "a claim deallocated", old: claim("c", true), new: claim("c", false), want: fwk.Queue},
		{name: "the pod's own claim created", old: nil, new: claim("own", false), want: fwk.Queue},
		{name: "a claim of the same name elsewhere", old: nil, new: elsewhere, want: fwk.QueueSkip},
		{name: "another claim created", old: nil, new: claim("c", false), want: fwk.QueueSkip},
		{name: "a claim allocated", old: claim("c", false), new: claim("c", true), want: fwk.QueueSkip},
		{name: "an unallocated claim deleted", old: claim("c", false), new: nil, want: fwk.QueueSkip},
		{name: "not a claim", old: nil, new: &v1.Pod{}, want: fwk.Queue, wantError: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := claimChangeHint(logger, pod, tc.old, tc.new)
			require.Equal(t, tc.wantError, err != nil, "error: %v", err)
			require.Equal(t, tc.want, got)
		})
	}
}
