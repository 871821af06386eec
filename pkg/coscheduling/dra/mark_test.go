package dra

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

func TestMarkRoundTrip(t *testing.T) {
	for _, api := range append(gang.APIs, gang.Composite) {
		claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
		want := Mark{Gang: gang.Key{API: api, Namespace: "ns", Name: "train.v1"}, Attempt: "a1"}
		want.Annotate(claim)
		got, ok, err := MarkOf(claim)
		if err != nil || !ok {
			t.Fatalf("%v: MarkOf = %v, %v", api, ok, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%v: mark (-want,+got):\n%s", api, diff)
		}
		Clear(claim)
		if _, ok, _ := MarkOf(claim); ok {
			t.Errorf("%v: a cleared claim still has a mark", api)
		}
	}
}

func TestMarkOfBadAnnotations(t *testing.T) {
	for name, ann := range map[string]map[string]string{
		"no token":     {scheduling.AnnotationClaimAllocatedFor: "podgroups.scheduling.x-k8s.io/a"},
		"no owner":     {scheduling.AnnotationClaimAllocationAttempt: "t"},
		"unknown kind": {scheduling.AnnotationClaimAllocatedFor: "jobs.batch/a", scheduling.AnnotationClaimAllocationAttempt: "t"},
		"no name":      {scheduling.AnnotationClaimAllocatedFor: "podgroups.scheduling.k8s.io/", scheduling.AnnotationClaimAllocationAttempt: "t"},
	} {
		t.Run(name, func(t *testing.T) {
			claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Annotations: ann}}
			if _, ok, err := MarkOf(claim); !ok || err == nil {
				t.Errorf("MarkOf = %v, %v; want a mark that cannot be read", ok, err)
			}
		})
	}
}
