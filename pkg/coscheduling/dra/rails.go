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
// to the allocations table; for the devices a member asks for through an
// extended resource, it sets the fence its cycles raise (Fences). Like
// AllocateShared it makes no API call; while writes are in flight the
// gang's members wait (ClaimsBusy).
func (c *GangClaims) AllocateAligned(ctx context.Context, spec *gang.Spec, members []*v1.Pod, d *PassDemand, req *placement.Request, plan *placement.Plan, a *Aligned) *fwk.Status {
	if c.source == nil || a == nil || d.Devices == nil {
		return nil
	}
	// chosen are the devices already given to a member of this plan, so
	// that two members on one node take different devices of a rail, and
	// those other plans chose for their fenced members.
	chosen := sets.New[structured.DeviceID]()
	for _, ids := range c.fences.ChosenByOthers(spec.Key) {
		chosen.Insert(ids...)
	}
	fenced := map[types.UID]Fence{}
	handed := 0
	var batch *Batch
	for i, p := range members {
		if i >= len(a.Sets) || a.Sets[i] == 0 || d.Pods[i] == nil || !d.Pods[i].Any() {
			continue
		}
		nodeName := req.Nodes[plan.NodeOf[i]].Name
		claims, status := c.unallocatedClaims(ctx, spec, members, d, i, nodeName)
		if status != nil {
			return status
		}
		fencing := len(d.Pods[i].Mapped) > 0 && c.Fencing()
		if len(claims) == 0 && !fencing {
			continue // its devices are allocated already
		}
		mine, status := c.railPicks(ctx, spec, members, d, i, nodeName, a, chosen)
		if status != nil {
			return status
		}
		chosen.Insert(mine.UnsortedList()...)
		if fence, ok := mappedFence(ctx, d, i, nodeName, mine); ok && fencing {
			fenced[p.UID] = fence
		}
		if len(claims) == 0 {
			continue
		}
		if batch == nil {
			var err error
			if batch, err = c.source.Allocator().Batch(ctx); err != nil {
				return c.claimFailed(ctx, spec, members, d, []int{i}, d.Pods[i].Claims[0].Name, nodeName, err)
			}
		}
		wrote, status := c.allocateMember(ctx, spec, members, d, i, p, nodeName, a, claims, mine, batch)
		if status != nil {
			return status
		}
		handed += wrote
	}
	c.fences.Set(spec.Key, fenced)
	if handed == 0 {
		return nil
	}
	c.source.Inventories().Claims().Changed()
	klog.FromContext(ctx).V(3).Info("Writing the rail-aligned claims of the gang's members", "podGroup", spec.Key, "claims", handed)
	return ClaimsBusy(spec.Key)
}

// railPicks chooses member i's devices on node: one free device per rail
// of a.Sets[i] in each aligned dimension, none that chosen holds.
func (c *GangClaims) railPicks(ctx context.Context, spec *gang.Spec, members []*v1.Pod, d *PassDemand, i int, nodeName string, a *Aligned,
	chosen sets.Set[structured.DeviceID]) (sets.Set[structured.DeviceID], *fwk.Status) {
	mine := sets.New[structured.DeviceID]()
	for _, dim := range a.Dims {
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
				if len(d.Pods[i].Claims) > 0 {
					return nil, c.claimFailed(ctx, spec, members, d, []int{i}, d.Pods[i].Claims[0].Name, nodeName, err)
				}
				// The plan counted the rails this pass read: it cannot
				// want more than they have free. Plan again, at once.
				why := fmt.Sprintf("member %s's devices on node %s: %v", members[i].Name, nodeName, err)
				c.gangs.Reject(ctx, spec.Key, why+"; trying again", false)
				return nil, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s: %s", spec.Key, why))
			}
			mine.Insert(pick.ID)
		}
	}
	return mine, nil
}

// mappedFence is the fence of member i on node, whose devices on its rails
// are mine: for each class it asks for through an extended resource, the
// node's devices of the class but mine. It is not ok when the member asks
// for no aligned devices that way.
func mappedFence(ctx context.Context, d *PassDemand, i int, node string, mine sets.Set[structured.DeviceID]) (Fence, bool) {
	fence := Fence{Node: node}
	for _, m := range d.Pods[i].Mapped {
		for _, dev := range d.Devices.DevicesOf(ctx, node, m.Kind.Dimension) {
			if mine.Has(dev.ID) {
				fence.Chosen = append(fence.Chosen, dev.ID)
			} else {
				fence.Others = append(fence.Others, dev.ID)
			}
		}
	}
	return fence, len(fence.Chosen) > 0
}

// unallocatedClaims reads member i's claims and returns those not
// allocated yet.
func (c *GangClaims) unallocatedClaims(ctx context.Context, spec *gang.Spec, members []*v1.Pod, d *PassDemand, i int, nodeName string) ([]*resourceapi.ResourceClaim, *fwk.Status) {
	var claims []*resourceapi.ResourceClaim
	for _, cd := range d.Pods[i].Claims {
		claim, err := c.source.Manager().ResourceClaims().Get(cd.Name.Namespace, cd.Name.Name)
		if err != nil {
			return nil, c.claimFailed(ctx, spec, members, d, []int{i}, cd.Name, nodeName, err)
		}
		if claim.Status.Allocation == nil {
			claims = append(claims, claim)
		}
	}
	return claims, nil
}

// allocateMember allocates claims, member i's unallocated ones, on node,
// with the aligned dimensions' devices restricted to mine, and hands the
// writes over; it returns how many it handed.
func (c *GangClaims) allocateMember(ctx context.Context, spec *gang.Spec, members []*v1.Pod, d *PassDemand, i int, p *v1.Pod, nodeName string, a *Aligned,
	claims []*resourceapi.ResourceClaim, mine sets.Set[structured.DeviceID], batch *Batch) (int, *fwk.Status) {
	group := []int{i}
	first := claims[0]
	name := types.NamespacedName{Namespace: first.Namespace, Name: first.Name}
	// Every device of the aligned dimensions on the node is excluded but
	// the member's own picks.
	excluded := sets.New[structured.DeviceID]()
	for _, dim := range a.Dims {
		for _, dev := range d.Devices.DevicesOf(ctx, nodeName, dim) {
			if !mine.Has(dev.ID) {
				excluded.Insert(dev.ID)
			}
		}
	}
	node, err := c.nodes.Get(nodeName)
	if err != nil {
		return 0, c.claimFailed(ctx, spec, members, d, group, name, nodeName, err)
	}
	results, err := batch.AllocateAmong(ctx, node, claims, excluded)
	if err != nil {
		return 0, c.claimFailed(ctx, spec, members, d, group, name, nodeName, err)
	}
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
