package integration

// The Events that tell a DRA gang's owner what is wrong with its devices
// and what to do: each test makes the fault on the real API server and
// requires the Event on the gang's PodGroup, naming the object at fault and
// the fix.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-gang/gpu-gang/pkg/coscheduling"
)

// classClaimSpec asks for count devices of class.
func classClaimSpec(class string, count int) resourceapi.ResourceClaimSpec {
	spec := gpuClaimSpec(count)
	spec.Devices.Requests[0].Exactly.DeviceClassName = class
	return spec
}

// expectNote fails the test unless the Event's note contains every part.
func expectNote(t *testing.T, reason, note string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(note, p) {
			t.Errorf("the %s Event's note lacks %q: %s", reason, p, note)
		}
	}
}

// A gang whose claims ask for a DeviceClass that no published device
// matches (A100s on a cluster of H100s) waits with DevicesUnavailable,
// naming the devices and what to change, and holds nothing.
func TestDRADevicesUnavailableEvent(t *testing.T) {
	const class = "a100.example.com"
	env := newDRAEnv(t, gpuClass(true), deviceClass(class,
		`device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-80GB'`))
	env.draNodes(h100DRA, "n0", "n1")
	env.createClaimTemplate("a100", classClaimSpec(class, 8))

	start := time.Now()
	pods := env.templateGang("job", 2, "a100", nil)
	ev := env.waitForEvent("PodGroup", "job", coscheduling.ReasonDevicesUnavailable)
	t.Logf("Event %s after the gang was created: %s", time.Since(start).Round(time.Millisecond), ev.Note)
	expectNote(t, ev.Reason, ev.Note, "8 "+class+" devices", "no node publishes one",
		"correct the claim's device class or selectors, or add nodes whose driver publishes such devices")
	env.expectNothingHeld(draWindow, pods...)
}

// Two DeviceClasses that map the same extended resource: kube-scheduler
// serves it from the newer, which may not be the one meant. A gang that
// asks for the resource gets DeviceClassConflict naming both classes and
// the resource, and what to remove; it still runs, served by one of them.
func TestDRADeviceClassConflictEvent(t *testing.T) {
	second := gpuClass(true)
	second.Name = "gpu-copy.example.com"
	env := newDRAEnv(t, gpuClass(true), second)
	env.draNodes(h100DRA, "n0", "n1")

	start := time.Now()
	pods := env.gang("job", 2, nil)
	ev := env.waitForEvent("PodGroup", "job", coscheduling.ReasonDeviceClassConflict)
	t.Logf("Event %s after the gang was created: %s", time.Since(start).Round(time.Millisecond), ev.Note)
	expectNote(t, ev.Reason, ev.Note, "DeviceClasses "+second.Name+", "+gpuClassName, "extended resource "+string(gpu),
		"remove extendedResourceName from the others")
	env.waitForBound(bindTimeout, pods...)
}

// A claim of a member that reserved its node and waits in Permit for a
// held sibling is deleted: the gang gives back its nodes at once with
// ClaimDeleted, naming the claim, the member and how the claim comes back.
// Once the claim is created again and the held member is let go, the gang
// starts.
func TestDRAClaimDeletedEvent(t *testing.T) {
	withHoldPlugin(t)
	env := newDRAEnv(t, gpuClass(true))
	env.draNodes(h100DRA, "n0", "n1", "n2")
	claimOf := func(i int) string { return fmt.Sprintf("job-%d-gpus", i) }
	env.createGangPodGroup("job", 3, nil)
	pods := make([]*v1.Pod, 3)
	for i := range pods {
		env.createClaim(claimOf(i), gpuClaimSpec(8))
		pods[i] = withClaims(env.gangPod(fmt.Sprintf("job-%d", i), "job").Res(cpuOnly()).Obj(), namedClaim("gpus", claimOf(i)))
	}
	pods[2].Labels[holdLabel] = "true"
	env.createPods(pods...)
	waitForGauge(t, "gpu_gang_members_waiting_in_permit", 2)

	start := time.Now()
	if err := kubeClient.ResourceV1().ResourceClaims(env.ns).Delete(t.Context(), claimOf(0), metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting claim %s: %v", claimOf(0), err)
	}
	ev := env.waitForEvent("PodGroup", "job", coscheduling.ReasonClaimDeleted)
	expectNote(t, ev.Reason, ev.Note, "ResourceClaim "+claimOf(0), "member job-0", "created again")
	waitForGauge(t, "gpu_gang_members_waiting_in_permit", 0)
	t.Logf("Event, and the siblings released, %s after the deletion: %s", time.Since(start).Round(time.Millisecond), ev.Note)

	env.createClaim(claimOf(0), gpuClaimSpec(8))
	env.release(pods[2].Name)
	nodes := env.waitForBound(retryBindTimeout, pods...)
	env.expectDevicesOnNodes(nodes, wholeNode, pods...)
}

// A DeviceClass whose CEL selector fails on the published devices (an
// attribute the driver does not publish, read without has()) matches none
// of them: the gang gets DeviceClassSelectorError naming the class, the
// expression and the error, and the PodScheduled condition of the member
// whose cycle planned the gang says the same, where before the gang was
// told that no node publishes its devices.
func TestDRADeviceClassSelectorErrorEvent(t *testing.T) {
	const (
		class = "big-memory.example.com"
		expr  = `device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].memoryGiB >= 80`
	)
	env := newDRAEnv(t, gpuClass(true), deviceClass(class, expr))
	env.draNodes(h100DRA, "n0", "n1")
	env.createClaimTemplate("big", classClaimSpec(class, 8))

	start := time.Now()
	pods := env.templateGang("job", 2, "big", nil)
	ev := env.waitForEvent("PodGroup", "job", coscheduling.ReasonDeviceClassSelectorError)
	t.Logf("Event %s after the gang was created: %s", time.Since(start).Round(time.Millisecond), ev.Note)
	want := []string{"DeviceClass " + class, expr, "no such key: memoryGiB", "correct the selector of DeviceClass " + class}
	expectNote(t, ev.Reason, ev.Note, want...)
	// The member whose cycle planned the gang carries the status; a
	// sibling tried while its claim was not made yet says so instead.
	var msgs []string
	var msg string
	err := waitFor(t.Context(), eventTimeout, func(ctx context.Context) (bool, error) {
		msgs = msgs[:0]
		for _, p := range pods {
			got, err := kubeClient.CoreV1().Pods(env.ns).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range got.Status.Conditions {
				if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse {
					msgs = append(msgs, c.Message)
					if strings.Contains(c.Message, "DeviceClass "+class) {
						msg = c.Message
					}
				}
			}
		}
		return msg != "", nil
	})
	if err != nil {
		t.Fatalf("waiting %s for a member's PodScheduled condition to name the class: %v (messages %q)", eventTimeout, err, msgs)
	}
	expectNote(t, "PodScheduled condition", msg, want...)
	env.expectNothingHeld(draWindow, pods...)
}
