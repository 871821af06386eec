package dra

import (
	"context"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

func allocatedClaim(m *Mark, reservedBy ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "shared", Finalizers: []string{resourceapi.Finalizer}},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
				{Request: "gpu", Driver: "gpu.nvidia.com", Pool: "node-a", Device: "gpu-0"}}},
		}},
	}
	if m != nil {
		m.Annotate(c)
	}
	for _, pod := range reservedBy {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: pod, UID: types.UID(pod)})
	}
	return c
}

func TestRelease(t *testing.T) {
	mine := Mark{Gang: gang.Key{Namespace: "ns", Name: "train"}, Attempt: "t1"}
	later := Mark{Gang: mine.Gang, Attempt: "t2"}
	serverTimeout := apierrors.NewServerTimeout(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, "update", 1)
	for _, tc := range []struct {
		name string
		// claim is what the API server has; nil when it has none.
		claim *resourceapi.ResourceClaim
		// fail makes the first n status updates fail with err.
		fail        int
		err         error
		want        Outcome
		wantErr     bool
		wantAlloc   bool
		wantMarked  bool
		wantFinaliz bool
	}{
		{name: "marked by the write: released", claim: allocatedClaim(&mine), want: Released},
		{name: "marked by a later write: kept", claim: allocatedClaim(&later), want: NotOurs, wantAlloc: true, wantMarked: true, wantFinaliz: true},
		{name: "not marked: kept", claim: allocatedClaim(nil), want: NotOurs, wantAlloc: true, wantFinaliz: true},
		{name: "reserved: kept", claim: allocatedClaim(&mine, "pod-0"), want: InUse, wantAlloc: true, wantMarked: true, wantFinaliz: true},
		{name: "deleted", want: Gone},
		{name: "transient errors are retried", claim: allocatedClaim(&mine), fail: 2, err: serverTimeout, want: Released},
		{name: "conflicts are retried", claim: allocatedClaim(&mine), fail: 2,
			err: apierrors.NewConflict(schema.GroupResource{Resource: "resourceclaims"}, "shared", nil), want: Released},
		{name: "a refusal is not retried", claim: allocatedClaim(&mine), fail: 100,
			err: apierrors.NewForbidden(schema.GroupResource{Resource: "resourceclaims"}, "shared", nil), wantErr: true,
			wantAlloc: true, wantMarked: true, wantFinaliz: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			if tc.claim != nil {
				objs = append(objs, tc.claim)
			}
			client := fake.NewClientset(objs...)
			calls := 0
			client.PrependReactor("update", "resourceclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "status" {
					return false, nil, nil
				}
				calls++
				if calls <= tc.fail {
					return true, nil, tc.err
				}
				return false, nil, nil
			})
			r := &Releaser{Client: client.ResourceV1(), Backoff: wait.Backoff{Steps: 4, Duration: time.Millisecond}}
			got, err := r.Release(context.Background(), types.NamespacedName{Namespace: "ns", Name: "shared"}, mine)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Release error = %v, want an error: %v", err, tc.wantErr)
			}
			if !tc.wantErr && got != tc.want {
				t.Errorf("Release = %v, want %v", got, tc.want)
			}
			if tc.claim == nil {
				return
			}
			c, err := client.ResourceV1().ResourceClaims("ns").Get(context.Background(), "shared", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			_, marked, _ := MarkOf(c)
			if (c.Status.Allocation != nil) != tc.wantAlloc || marked != tc.wantMarked || (len(c.Finalizers) > 0) != tc.wantFinaliz {
				t.Errorf("after release: allocated %v, marked %v, finalizers %v; want %v, %v, %v",
					c.Status.Allocation != nil, marked, c.Finalizers, tc.wantAlloc, tc.wantMarked, tc.wantFinaliz)
			}
		})
	}
}
