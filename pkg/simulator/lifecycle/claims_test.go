package lifecycle

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// claimWait bounds each wait for the controller to act.
const claimWait = 30 * time.Second

// newClient is a fake API server that, unlike the fake's object tracker,
// names objects created with generateName, as kube-apiserver does.
func newClient(objects ...runtime.Object) *fake.Clientset {
	client := fake.NewClientset(objects...)
	var n atomic.Int64
	client.PrependReactor("create", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		obj := action.(k8stesting.CreateAction).GetObject().(metav1.Object)
		if obj.GetName() == "" && obj.GetGenerateName() != "" {
			obj.SetName(fmt.Sprintf("%s%05d", obj.GetGenerateName(), n.Add(1)))
		}
		return false, nil, nil
	})
	return client
}

func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, claimWait, true, cond)
	require.NoError(t, err, "waiting until %s", what)
}

// The controller does for the simulator what kube-controller-manager does in
// a cluster: a pod's claim is made from its template and named in the
// pod's status, and once the pod is done, its claim gives its devices back
// and goes.
func TestClaimControllerFromTemplateToRelease(t *testing.T) {
	template := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "sim"},
		Spec: resourceapi.ResourceClaimTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"job": "job"}},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "gpus", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", Count: 8},
			}}}},
		},
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "job-0", Namespace: "sim", UID: "pod-uid"},
		Spec: v1.PodSpec{
			Containers:     []v1.Container{{Name: "train", Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpus"}}}}},
			ResourceClaims: []v1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("job")}},
		},
	}
	client := newClient(template, pod)
	ctrl, err := StartClaimController(t.Context(), client, "sim")
	require.NoError(t, err)
	defer ctrl.Stop()

	pods := client.CoreV1().Pods("sim")
	claims := client.ResourceV1().ResourceClaims("sim")
	var claimName string
	eventually(t, "the pod's claim is made and named in its status", func(ctx context.Context) (bool, error) {
		p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil || len(p.Status.ResourceClaimStatuses) == 0 {
			return false, err
		}
		claimName = ptr.Deref(p.Status.ResourceClaimStatuses[0].ResourceClaimName, "")
		return claimName != "", nil
	})
	claim, err := claims.Get(t.Context(), claimName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, template.Spec.Spec, claim.Spec)
	require.Equal(t, "job", claim.Labels["job"], "the template's labels")

	// What the scheduler does: allocate, reserve for the pod, bind.
	claim.Finalizers = []string{resourceapi.Finalizer}
	claim, err = claims.Update(t.Context(), claim, metav1.UpdateOptions{})
	require.NoError(t, err)
	claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "gpus", Driver: "gpu.nvidia.com", Pool: "n", Device: "gpu-0"},
	}}}
	claim.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
	_, err = claims.UpdateStatus(t.Context(), claim, metav1.UpdateOptions{})
	require.NoError(t, err)
	running, err := pods.Get(t.Context(), pod.Name, metav1.GetOptions{})
	require.NoError(t, err)
	running.Spec.NodeName = "n"
	running.Status.Phase = v1.PodRunning
	running, err = pods.Update(t.Context(), running, metav1.UpdateOptions{})
	require.NoError(t, err)

	// What kwok does when the pod's duration has passed.
	running.Status.Phase = v1.PodSucceeded
	_, err = pods.UpdateStatus(t.Context(), running, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, "the done pod's claim is gone", func(ctx context.Context) (bool, error) {
		_, err := claims.Get(ctx, claimName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	// Whether the controller clears the reservation before it deletes the
	// claim depends on which of its work items runs first (it raced under
	// load); either way the devices are free once the claim is gone, which
	// is what the simulator relies on.
}

// A pre-fill pod bound straight to its node takes a claim that is allocated
// already; the controller reserves it for the pod, as for any pod that a
// scheduler did not place.
func TestClaimControllerReservesPreallocatedClaim(t *testing.T) {
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "prefill-0", Namespace: "sim"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpus", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", Count: 1},
		}}}},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpus", Driver: "gpu.nvidia.com", Pool: "n", Device: "gpu-0"}},
		}}},
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "prefill-0", Namespace: "sim", UID: "prefill-uid"},
		Spec: v1.PodSpec{
			NodeName:       "n",
			Containers:     []v1.Container{{Name: "c"}},
			ResourceClaims: []v1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To("prefill-0")}},
		},
	}
	client := newClient(claim, pod)
	ctrl, err := StartClaimController(t.Context(), client, "sim")
	require.NoError(t, err)
	defer ctrl.Stop()
	eventually(t, "the claim is reserved for the pod", func(ctx context.Context) (bool, error) {
		c, err := client.ResourceV1().ResourceClaims("sim").Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(c.Status.ReservedFor) == 1 && c.Status.ReservedFor[0].UID == pod.UID, nil
	})
}
