package metrics

import (
	"testing"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-gang/gpu-gang/pkg/simulator/workload"
)

func TestClaimCounter(t *testing.T) {
	claim := func(uid string, devices int) *resourceapi.ResourceClaim {
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: uid,
			Labels: map[string]string{workload.RoleLabel: workload.RoleWorkload}}}
		if devices > 0 {
			c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
				Results: make([]resourceapi.DeviceRequestAllocationResult, devices)}}
		}
		return c
	}
	var none *ClaimCounter
	require.Nil(t, none.Summary(), "a run without DRA nodes has no counter")
	c := NewClaimCounter()
	require.Nil(t, c.Summary(), "no claim, no summary: the run used no DRA")

	// From a template: made, allocated, then deallocated and deleted once
	// its pod is done; seen twice on the way, counted once.
	c.Observe(claim("a", 0))
	c.Observe(claim("a", 8))
	c.Observe(claim("a", 8))
	c.Observe(claim("a", 0))
	c.ObserveDelete(claim("a", 0))
	// The scheduler's claim for nvidia.com/gpu, made allocated, deleted.
	ext := claim("b", 8)
	ext.Labels = nil
	ext.Annotations = map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"}
	c.Observe(ext)
	c.ObserveDelete(ext)
	// Still running at the end.
	c.Observe(claim("c", 1))
	// Never allocated: made again for a pod already done.
	c.Observe(claim("d", 0))
	c.ObserveDelete(claim("d", 0))
	// The scheduler's claim of an attempt given up before allocation.
	lost := claim("f", 0)
	lost.Labels = nil
	lost.Annotations = ext.Annotations
	c.Observe(lost)
	c.ObserveDelete(lost)
	// Pre-fill's are not the workload's.
	pre := claim("e", 4)
	pre.Labels[workload.RoleLabel] = workload.RolePrefill
	c.Observe(pre)

	require.Equal(t, &ClaimSummary{Claims: 5, Allocated: 3, AllocatedDevices: 17, ExtendedResource: 1, Released: 2}, c.Summary())
}
