package coscheduling

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/core"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/eligibility"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// countingClaims is a claim tracker that counts its lists.
type countingClaims struct {
	fwk.ResourceClaimTracker
	lists int
}

func (c *countingClaims) List() ([]*resourceapi.ResourceClaim, error) {
	c.lists++
	return c.ResourceClaimTracker.List()
}

// A member asking for nvidia.com/gpu, which the DeviceClass maps, runs the
// template pass on a stand-in unless a previous cycle made the claim for
// its extended resources: a claim with the extended-resource annotation
// that the member controls, in its namespace. Without a claim watch one
// pass lists the claims once, however many templates ask; with one, it
// lists none.
func TestStandInSeesExtendedResourceClaims(t *testing.T) {
	pod := member("g", "g-0", "8")
	extClaim := func(edit func(*resourceapi.ResourceClaim)) *resourceapi.ResourceClaim {
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{
			Namespace: testNS, Name: "g-0-extended-resources-abcde", UID: "ext",
			Annotations: map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true),
			}},
		}}
		if edit != nil {
			edit(c)
		}
		return c
	}
	for _, tt := range []struct {
		name string
		// claim is the claim in the cluster besides the slices; nil for
		// none.
		claim *resourceapi.ResourceClaim
		want  bool
	}{
		{name: "no claim", want: true},
		{name: "the member's extended-resource claim", claim: extClaim(nil)},
		{name: "another pod's", claim: extClaim(func(c *resourceapi.ResourceClaim) { c.OwnerReferences[0].UID = "someone-else" }), want: true},
		{name: "in another namespace", claim: extClaim(func(c *resourceapi.ResourceClaim) { c.Namespace = "elsewhere" }), want: true},
		{name: "owned, not controlled", claim: extClaim(func(c *resourceapi.ResourceClaim) { c.OwnerReferences[0].Controller = nil }), want: true},
		{name: "without the annotation", claim: extClaim(func(c *resourceapi.ResourceClaim) { c.Annotations = nil }), want: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			objects := []runtime.Object{nvidiaClass(), gpuSlice("n0", "H100", "H100", "H100", "H100", "H100", "H100", "H100", "H100")}
			if tt.claim != nil {
				objects = append(objects, tt.claim)
			}
			env := newTestEnv(t, []*v1.Node{draNode("n0")}, []*v1.Pod{pod},
				[]*v1alpha1.PodGroup{gangtest.MakePodGroup("g", testNS).MinMember(1).Obj()},
				withDRA(), withObjects(objects...))
			if tt.claim != nil {
				require.Eventually(t, func() bool {
					_, err := env.pl.devices.Manager().ResourceClaims().Get(tt.claim.Namespace, tt.claim.Name)
					return err == nil
				}, sliceListedTimeout, sliceListedTimeout/100, "the claim tracker never held the claim")
			}
			d, status := env.pl.core.DemandOf(env.ctx, nil, []*v1.Pod{pod}, 0)
			require.Nil(t, status)
			templates, of := eligibility.TemplatesOf([]*v1.Pod{pod}, d.Requests)
			core.MarkCounted(d, templates, of)
			require.NotEmpty(t, templates[0].Devices.Mapped, "the member's GPUs must be mapped to devices")
			counting := &countingClaims{ResourceClaimTracker: env.pl.devices.Manager().ResourceClaims()}
			ext := eligibility.NewExtendedClaims(counting, nil)
			for range 3 {
				_, ok := env.pl.core.Eligibility().WithoutCountedClaims(templates[0], ext)
				require.Equal(t, tt.want, ok)
			}
			require.Equal(t, 1, counting.lists, "the claims of one pass are listed once")

			// With the claim watch, a pass lists no claim: the watch's
			// handler keeps the extended-resource claims by pod.
			counting.lists = 0
			watch := env.pl.devices.Inventories().Claims()
			require.NotNil(t, watch, "the plugin has a claim watch")
			watched := eligibility.NewExtendedClaims(counting, watch)
			if !tt.want {
				require.Eventually(t, func() bool {
					_, ok := env.pl.core.Eligibility().WithoutCountedClaims(templates[0], env.pl.core.Eligibility().ExtendedClaims())
					return !ok
				}, sliceListedTimeout, sliceListedTimeout/100, "the claim watch never saw the member's claim")
			}
			for range 3 {
				_, ok := env.pl.core.Eligibility().WithoutCountedClaims(templates[0], watched)
				require.Equal(t, tt.want, ok)
			}
			require.Zero(t, counting.lists, "with a claim watch no pass lists the claims")
		})
	}
}
