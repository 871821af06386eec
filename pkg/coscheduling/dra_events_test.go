package coscheduling

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// draGang is a gang of size members on nodes of 8 GPUs each published as a
// ResourceSlice (products[i] on node i), each member with its own claim
// made from one template of spec.
func draGang(t *testing.T, group string, size int, spec resourceapi.ResourceClaimSpec, products ...string) (*testEnv, []*v1.Pod) {
	t.Helper()
	var nodes []*v1.Node
	objects := []runtime.Object{nvidiaClass()}
	for i, product := range products {
		name := fmt.Sprintf("node-%d", i)
		nodes = append(nodes, draNode(name))
		objects = append(objects, gpuSlice(name, strings.Split(strings.Repeat(product+",", 8), ",")[:8]...))
	}
	tmpl := claimTemplate(testNS, "gpus", spec)
	objects = append(objects, tmpl)
	var job []*v1.Pod
	for i := range size {
		p := member(group, fmt.Sprintf("%s-%d", group, i), "")
		objects = append(objects, claimFromTemplate(p, "gpus", tmpl))
		job = append(job, p)
	}
	env := newTestEnv(t, nodes, job, []*v1alpha1.PodGroup{gangtest.MakePodGroup(group, testNS).MinMember(int32(size)).Obj()},
		withTopology(t), withDRA(), withObjects(objects...))
	return env, job
}

// Events name devices as the user's claim does (the class and its
// selectors), never by the model's internal dimension names, also where the
// planner's own words are quoted: here the reason a gang too large for the
// fabric gives.
func TestDeviceEventsNameDevicesAsWritten(t *testing.T) {
	env, job := draGang(t, "big", 3, gpuClaimSpec(scheduling.DeviceClassGPU, 8, "H100"), "H100", "H100")
	_, status := env.schedule(job[0])
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "3 members of 8 GPUs cannot fit 2 nodes of 8: %v", status)

	events := env.recorded()
	require.True(t, hasEvent(events, ReasonGangTooLarge, "gpu.nvidia.com devices with "), "the Event names the class and selector: %q", events)
	for _, text := range append(events, status.Message()) {
		require.NotContains(t, text, capacity.DimensionPrefix, "an internal dimension name reached people")
	}
}

// The plan's Event says which subrequest of a firstAvailable request it
// planned with: the first one no node can serve is passed over for the next.
func TestGangScheduledNamesFirstAvailableChoice(t *testing.T) {
	subrequest := func(name, product string) resourceapi.DeviceSubRequest {
		exact := gpuClaimSpec(scheduling.DeviceClassGPU, 8, product).Devices.Requests[0].Exactly
		return resourceapi.DeviceSubRequest{Name: name, DeviceClassName: exact.DeviceClassName, Selectors: exact.Selectors,
			AllocationMode: exact.AllocationMode, Count: exact.Count}
	}
	spec := resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
		Name: "gpus", FirstAvailable: []resourceapi.DeviceSubRequest{subrequest("h200", "H200"), subrequest("h100", "H100")},
	}}}}
	env, job := draGang(t, "job", 2, spec, "H100", "H100")

	env.runGang(job)
	events := env.recorded()
	require.True(t, hasEvent(events, ReasonGangScheduled, "firstAvailable: job-0-gpus/gpus: h100"), "events: %q", events)
	require.False(t, hasEvent(events, ReasonGangScheduled, ": h200"), "events: %q", events)
}

// A claim the claim controller made from a native PodGroup's template gets
// its InvalidResourceClaim Event even when it reaches the plugin before the
// PodGroup does: the controller makes the claim as soon as it sees the
// group, and the plugin's PodGroup informer may lag its claim informer.
// Here no informer has the PodGroup at all. A claim some other controller
// owns gets no Event.
func TestTemplateClaimOfUnheardPodGroupIsReported(t *testing.T) {
	env, _ := draGang(t, "job", 0, gpuClaimSpec(scheduling.DeviceClassGPU, 8, "H100"), "H100")
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "serve-gpus-x7k2p",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: schedulingv1beta1.SchemeGroupVersion.String(), Kind: "PodGroup",
			Name: "serve", UID: "serve-uid", Controller: ptr.To(true)}}}}
	other := claim.DeepCopy()
	other.Name, other.OwnerReferences[0].APIVersion, other.OwnerReferences[0].Kind = "job-gpus", "batch/v1", "Job"

	env.pl.gangClaims.ClaimAdded(other)
	env.pl.gangClaims.ClaimAdded(claim)
	events := env.recorded()
	require.Len(t, events, 1, "events: %q", events)
	require.True(t, hasEvent(events, ReasonInvalidResourceClaim, "ResourceClaim serve-gpus-x7k2p was made for this PodGroup"), "events: %q", events)
	require.Contains(t, events[0], "resourceClaimName", "the Event says what to do instead")
}
