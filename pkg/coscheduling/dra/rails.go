package dra

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Members of a rail-aligned gang take their devices on the rails the plan
// chose. kube-scheduler's allocator picks devices first fit, pod by pod, so
// left to DynamicResources two members would get unrelated rails: gpu-gang
// allocates each aligned member's claims itself, on its planned node, with
// the allocator restricted to one device per chosen rail of each aligned
// dimension, and writes them through the same owned path as shared claims
// (marked, written off the cycle, given back by the attempt that wrote
// them). The members then find their claims allocated, as DynamicResources
// expects, and only reserve them.

// Aligned is what a rail-aligned plan fixed: each member's rails and the
// dimensions bound by them.
type Aligned struct {
	// Sets[i] is the rail set member i uses, 0 for members not bound by
	// rails. Members in one scalable unit use one set.
	Sets []capacity.RailSet
	// Dims are the device dimensions taken one device per rail.
	Dims []v1.ResourceName
}

// AllocateAligned allocates, on the node the plan chose for each aligned
// member, its unallocated claims on the plan's rails, and hands the writes
// to the allocations table. Like AllocateShared it makes no API call;
// while writes are in flight the gang's members wait (ClaimsBusy).
func (c *GangClaims) AllocateAligned(ctx context.Context, spec *gang.Spec, members []*v1.Pod, d *PassDemand, req *placement.Request, plan *placement.Plan, a *Aligned) *fwk.Status {
	if c.source == nil || a == nil || d.Devices == nil {
		return nil
	}
	// chosen are the devices already given to a member of this plan, so
	// that two members on one node take different devices of a rail.
	chosen := sets.New[structured.DeviceID]()
	handed := 0
	var batch *Batch
	for i, p := range members {
		if i >= len(a.Sets) || a.Sets[i] == 0 || d.Pods[i] == nil || len(d.Pods[i].Claims) == 0 {
			continue
		}
		nodeName := req.Nodes[plan.NodeOf[i]].Name
		if batch == nil {
			var err error
			if batch, err = c.source.Allocator().Batch(ctx); err != nil {
				return c.claimFailed(ctx, spec, members, d, []int{i}, d.Pods[i].Claims[0].Name, nodeName, err)
			}
		}
		wrote, status := c.allocateMember(ctx, spec, members, d, i, p, nodeName, a, chosen, batch)
		if status != nil {
			return status
		}
		handed += wrote
	}
	if handed == 0 {
		return nil
	}
	c.source.Inventories().Claims().Changed()
	klog.FromContext(ctx).V(3).Info("Writing the rail-aligned claims of the gang's members", "podGroup", spec.Key, "claims", handed)
	return ClaimsBusy(spec.Key)
}

// allocateMember allocates member i's claims on node with one device per
// rail of a.Sets[i] in each aligned dimension, and hands the writes over; it
// returns how many it handed.
func (c *GangClaims) allocateMember(ctx context.Context, spec *gang.Spec, members []*v1.Pod, d *PassDemand, i int, p *v1.Pod, nodeName string, a *Aligned,
	chosen sets.Set[structured.DeviceID], batch *Batch) (int, *fwk.Status) {
	group := []int{i}
	var claims []*resourceapi.ResourceClaim
	for _, cd := range d.Pods[i].Claims {
		claim, err := c.source.Manager().ResourceClaims().Get(cd.Name.Namespace, cd.Name.Name)
		if err != nil {
			return 0, c.claimFailed(ctx, spec, members, d, group, cd.Name, nodeName, err)
		}
		if claim.Status.Allocation == nil {
			claims = append(claims, claim)
		}
	}
	if len(claims) == 0 {
		return 0, nil
	}
	first := claims[0]
	name := types.NamespacedName{Namespace: first.Namespace, Name: first.Name}
	// Every device of the aligned dimensions on the node is excluded but
	// one free device per chosen rail.
	excluded := sets.New[structured.DeviceID]()
	mine := sets.New[structured.DeviceID]()
	for _, dim := range a.Dims {
		for _, dev := range d.Devices.DevicesOf(ctx, nodeName, dim) {
			excluded.Insert(dev.ID)
		}
		for _, r := range a.Sets[i].Rails() {
			var pick *capacity.Device
			for _, dev := range d.Devices.RailDevices(ctx, nodeName, dim, r) {
				if !chosen.Has(dev.ID) && !mine.Has(dev.ID) {
					pick = &dev
					break
				}
			}
			if pick == nil {
				err := fmt.Errorf("%w: no free device of %s on rail %d", ErrNoFit, d.Describe(string(dim)), r)
				return 0, c.claimFailed(ctx, spec, members, d, group, name, nodeName, err)
			}
			mine.Insert(pick.ID)
		}
	}
	excluded = excluded.Difference(mine)
	node, err := c.nodes.Get(nodeName)
	if err != nil {
		return 0, c.claimFailed(ctx, spec, members, d, group, name, nodeName, err)
	}
	results, err := batch.AllocateAmong(ctx, node, claims, excluded)
	if err != nil {
		return 0, c.claimFailed(ctx, spec, members, d, group, name, nodeName, err)
	}
	chosen.Insert(mine.UnsortedList()...)
	sigs := c.groupSignatures(members, d, group)
	handed := 0
	for k, claim := range claims {
		claimName := types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}
		failed := func(err error) {
			ctx := klog.NewContext(context.Background(), c.logger)
			c.claimFailedLater(ctx, spec, MemberNames(members, group), sigs, claimName, nodeName, err)
		}
		if err := c.allocations.Write(spec.Key, claim, &results[k], failed); err != nil {
			if errors.Is(err, ErrBusy) {
				return handed, ClaimsBusy(spec.Key)
			}
			return handed, c.claimFailed(ctx, spec, members, d, group, claimName, nodeName, err)
		}
		handed++
	}
	klog.FromContext(ctx).V(4).Info("Allocating a member's claims on its rails", "pod", klog.KObj(p), "node", nodeName, "rails", a.Sets[i].String(), "claims", len(claims))
	return handed, nil
}
