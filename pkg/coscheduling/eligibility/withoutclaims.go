package eligibility

import (
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
)

// A template whose devices the capacity model counts exactly
// (Template.DevicesCounted) has DynamicResources' Filter skipped: its verdict on a
// node would be capacity, which the planner counts. Its PreFilter would
// still build an allocator over every slice and every allocated device,
// which costs more than the whole plan, only to have its Filter skipped.
// So the template's PreFilter plugins run for a stand-in: the member less
// the ResourceClaims and DRA-served extended resources the model counts.
// DynamicResources skips the stand-in; NodeResourcesFit, the other plugin
// that reads a DRA-served extended resource, is skipped for capacity
// anyway; GPUFleet reads the member's own GPU demand (contract.DemandPod), so
// its rules, uniform groups and kept verdicts stay the same. Every other
// plugin reads nothing the stand-in lacks.
//
// What DynamicResources' PreFilter would reject the member for without
// its Filter (a claim being deleted, allocated, made for another pod,
// being allocated in another cycle; a DRA-served extended resource whose
// claim a previous cycle made) keeps the member itself in PreFilter, as
// do devices the model does not count exactly (matchAttribute
// constraints, partitionable devices, admin access: DevicesCounted is not
// set), so DynamicResources judges those as before.

// WithoutCountedClaims returns the stand-in for t's PreFilter plugins: t's
// member less the claims and DRA-served extended resources the model
// counts. It returns false when t's member must run them itself (t.Devices,
// what the member takes of devices, is nil when it was not read); ext tells
// the pods whose extended resources have a claim already, for every
// template of the pass (Runner.ExtendedClaims).
func (r *Runner) WithoutCountedClaims(t *Template, ext *ExtendedClaims) (*v1.Pod, bool) {
	pd := t.Devices
	if r.devices == nil || !t.DevicesCounted || pd == nil || !pd.Any() {
		return nil, false
	}
	pod := t.Pod
	claims := r.devices.Manager().ResourceClaims()
	for i := range pod.Spec.ResourceClaims {
		name, mustCheckOwner, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil {
			return nil, false
		}
		if name == nil {
			continue // DynamicResources skips it too
		}
		claim, err := claims.Get(pod.Namespace, *name)
		if err != nil || claim.DeletionTimestamp != nil || claim.Status.Allocation != nil ||
			mustCheckOwner && resourceclaim.IsForPod(pod, claim, false) != nil ||
			claims.GetPendingAllocation(claim.UID) != nil {
			return nil, false
		}
	}
	if len(pd.Mapped) > 0 && ext.has(pod) {
		return nil, false
	}
	out := pod.DeepCopy()
	out.Spec.ResourceClaims = nil
	out.Status.ResourceClaimStatuses = nil
	out.Status.ExtendedResourceClaimStatus = nil
	strip := func(cs []v1.Container) {
		for i := range cs {
			r := &cs[i].Resources
			r.Claims = nil
			for _, m := range pd.Mapped {
				delete(r.Requests, m.Resource)
				delete(r.Limits, m.Resource)
			}
		}
	}
	strip(out.Spec.InitContainers)
	strip(out.Spec.Containers)
	return out, true
}

// ExtendedClaims tells whether a previous cycle made the claim for a pod's
// DRA-served extended resources, which DynamicResources' PreFilter then
// judges (a claim from a failed binding is deallocated first). Such claims
// are found only by listing every claim; the claim watch keeps them as its
// handler sees them, and without one a pass lists them once, when its first
// template asks, for all of its templates. Not safe for concurrent use: one
// pass's.
type ExtendedClaims struct {
	claims fwk.ResourceClaimTracker
	watch  *capacity.ClaimWatch
	read   bool
	// owners are the pods that control such a claim; err is why they
	// could not be read, which counts as every pod having one.
	owners sets.Set[capacity.PodRef]
	err    error
}

// ExtendedClaims returns a pass's view of extended-resource claims: the
// claim watch's, or else read from the DRA manager's claim tracker on
// first use.
func (r *Runner) ExtendedClaims() *ExtendedClaims {
	if r.devices == nil {
		return &ExtendedClaims{read: true, owners: sets.New[capacity.PodRef]()}
	}
	return NewExtendedClaims(r.devices.Manager().ResourceClaims(), r.devices.Inventories().Claims())
}

// NewExtendedClaims returns a pass's view of extended-resource claims:
// watch's when it is not nil, or else read from claims on first use.
func NewExtendedClaims(claims fwk.ResourceClaimTracker, watch *capacity.ClaimWatch) *ExtendedClaims {
	return &ExtendedClaims{claims: claims, watch: watch}
}

// has reports whether pod has such a claim.
func (e *ExtendedClaims) has(pod *v1.Pod) bool {
	if pod.Status.ExtendedResourceClaimStatus != nil {
		return true
	}
	ref := capacity.PodRef{Namespace: pod.Namespace, UID: pod.UID}
	if e.watch != nil {
		return e.watch.HasExtendedResourceClaim(ref)
	}
	if !e.read {
		e.read = true
		e.owners = sets.New[capacity.PodRef]()
		var all []*resourceapi.ResourceClaim
		if all, e.err = e.claims.List(); e.err == nil {
			for _, c := range all {
				if owner := capacity.ExtendedResourceOwner(c); owner != nil {
					e.owners.Insert(*owner)
				}
			}
		}
	}
	return e.err != nil || e.owners.Has(ref)
}
