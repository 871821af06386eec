package metrics

import (
	"cmp"
	"slices"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-gang/gpu-gang/pkg/simulator/workload"
)

// ClaimCounter follows the workload's ResourceClaims as a watch delivers
// them, and counts what became of them: how many were made, from templates
// or by the scheduler for nvidia.com/gpu requests that DRA served, how
// many got devices allocated, and how many gave them back. It shows that
// a profile's DRA pods really took devices, and that finished pods freed
// them. Pre-fill's claims are left out. All methods are safe for
// concurrent use.
type ClaimCounter struct {
	mu     sync.Mutex
	claims map[types.UID]*claimState
	// order lists claims as first seen, so that the summary does not
	// depend on map order.
	order []*claimState
}

type claimState struct {
	extended, allocated, released bool
	devices                       int
	// job and pod are the job label and the owning pod of a claim made
	// from a template; results the devices of its latest allocation, kept
	// after the allocation is cleared.
	job, pod string
	results  []resourceapi.DeviceRequestAllocationResult
}

// NewClaimCounter returns a counter that has seen no claim.
func NewClaimCounter() *ClaimCounter {
	return &ClaimCounter{claims: map[types.UID]*claimState{}}
}

// Observe records the state of a claim as a watch delivered it.
func (c *ClaimCounter) Observe(claim *resourceapi.ResourceClaim) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cs := c.stateOf(claim)
	if cs == nil {
		return
	}
	if a := claim.Status.Allocation; a != nil && len(a.Devices.Results) > 0 {
		cs.results = slices.Clone(a.Devices.Results)
	}
	switch a := claim.Status.Allocation; {
	case a != nil && !cs.allocated:
		cs.allocated = true
		cs.devices = len(a.Devices.Results)
	case a == nil && cs.allocated:
		cs.released = true
	}
}

// ObserveDelete records that a claim is gone: an allocated claim gave its
// devices back.
func (c *ClaimCounter) ObserveDelete(claim *resourceapi.ResourceClaim) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cs := c.stateOf(claim); cs != nil && cs.allocated {
		cs.released = true
	}
}

func (c *ClaimCounter) stateOf(claim *resourceapi.ResourceClaim) *claimState {
	if claim.Labels[workload.RoleLabel] == workload.RolePrefill {
		return nil
	}
	if cs := c.claims[claim.UID]; cs != nil {
		return cs
	}
	cs := &claimState{
		extended: claim.Annotations[resourceapi.ExtendedResourceClaimAnnotation] == "true",
		job:      claim.Labels[workload.JobLabel],
	}
	if ref := metav1.GetControllerOf(claim); ref != nil && ref.Kind == "Pod" {
		cs.pod = ref.Name
	}
	c.claims[claim.UID] = cs
	c.order = append(c.order, cs)
	return cs
}

// Summary counts the claims seen; nil when there were none, or for a nil
// counter (a run without DRA nodes watches no claims).
func (c *ClaimCounter) Summary() *ClaimSummary {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.order) == 0 {
		return nil
	}
	s := &ClaimSummary{Claims: len(c.order)}
	for _, cs := range c.order {
		if cs.allocated {
			s.Allocated++
			s.AllocatedDevices += cs.devices
			if cs.extended {
				s.ExtendedResource++
			}
		}
		if cs.released {
			s.Released++
		}
	}
	return s
}

// PodAllocation is what one pod's claims got: the devices of their latest
// allocations.
type PodAllocation struct {
	// Job is the pod's job, from its claims' job label; Pod its name.
	Job, Pod string
	// Results are the allocated devices, claim by claim as first seen.
	Results []resourceapi.DeviceRequestAllocationResult
}

// Allocations lists, for every workload pod whose claims got devices,
// what they got, sorted by job and pod: claims made from templates carry
// their job, and jobOf names the job of a pod whose claim kube-scheduler
// made for its extended resources ("" for a pod of no job). A claim's
// devices stay listed after its pod is done and they are freed.
func (c *ClaimCounter) Allocations(jobOf func(pod string) string) []PodAllocation {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	byPod := map[[2]string]*PodAllocation{}
	var out []*PodAllocation
	for _, cs := range c.order {
		job := cs.job
		if job == "" && cs.extended && cs.pod != "" {
			job = jobOf(cs.pod)
		}
		if cs.pod == "" || job == "" || len(cs.results) == 0 {
			continue
		}
		key := [2]string{job, cs.pod}
		pa := byPod[key]
		if pa == nil {
			pa = &PodAllocation{Job: job, Pod: cs.pod}
			byPod[key] = pa
			out = append(out, pa)
		}
		pa.Results = append(pa.Results, cs.results...)
	}
	slices.SortFunc(out, func(a, b *PodAllocation) int {
		return cmp.Or(cmp.Compare(a.Job, b.Job), cmp.Compare(a.Pod, b.Pod))
	})
	list := make([]PodAllocation, len(out))
	for i, pa := range out {
		list[i] = *pa
	}
	return list
}
