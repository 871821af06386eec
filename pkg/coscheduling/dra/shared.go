package dra

import (
	"context"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Members that share one ResourceClaim (a claim named by several pods, or a
// PodGroup's claim) use the devices of one allocation. kube-scheduler 1.37
// allocates a claim in the Reserve of the first pod that reaches it and
// refuses every other pod that names the claim ("in the process of being
// allocated") until that pod has bound; it shares an allocation in flight
// only inside its own PodGroup cycle. A gang's members wait for each other
// in Permit, before any binds, so a shared claim would deadlock the gang.
//
// So the plugin plans the sharers together, on the one node that must hold
// the claim's devices (a subgroup of the gang pinned to a node), and once the
// whole gang's plan exists it allocates the shared claim itself, on that
// node, with kube-scheduler's own allocator (Allocator). The cycle only
// computes the allocation: Allocations shows it in flight in the tracker
// and writes it, marked with the gang and a token of the write, off the
// scheduling loop, while the gang's members wait with the plan kept. When
// the write lands, the members find the claim allocated and are kept on its
// node by DynamicResources. If the attempt fails, the allocation is given
// back, unless a member already uses it; a claim an earlier write for the
// gang allocated is adopted (re-marked) before the members use it.

// Sharers groups the members of the pass that share an unallocated claim, each group in
// rank order, groups in order of their first member. Members linked through
// several claims form one group.
func (d *PassDemand) Sharers() (groups [][]int, claims [][]types.NamespacedName) {
	if d.Gang == nil {
		return nil, nil
	}
	parent := make([]int, len(d.Pods))
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			i = parent[i]
		}
		return i
	}
	// first is each claim's first member and its name; shared stays nil
	// while no claim has a second member, as in most gangs, which then
	// return here.
	type use struct {
		member int
		name   types.NamespacedName
	}
	first := map[types.UID]use{}
	var shared map[types.UID]bool
	for i, pd := range d.Pods {
		if pd == nil {
			continue
		}
		for _, c := range pd.Claims {
			if u, ok := first[c.UID]; ok {
				parent[find(i)] = find(u.member)
				if shared == nil {
					shared = map[types.UID]bool{}
				}
				shared[c.UID] = true
				continue
			}
			first[c.UID] = use{member: i, name: c.Name}
		}
	}
	if shared == nil {
		return nil, nil
	}
	byRoot := map[int][]int{}
	for i := range d.Pods {
		byRoot[find(i)] = append(byRoot[find(i)], i)
	}
	for i := range d.Pods {
		g := byRoot[find(i)]
		if len(g) < 2 || g[0] != i {
			continue
		}
		groups = append(groups, g)
		var cs []types.NamespacedName
		for uid, u := range first {
			if shared[uid] && find(u.member) == find(i) {
				cs = append(cs, u.name)
			}
		}
		slices.SortFunc(cs, func(a, b types.NamespacedName) int { return CompareNames(a, b) })
		claims = append(claims, cs)
	}
	return groups, claims
}

// CompareNames orders names by namespace, then name.
func CompareNames(a, b types.NamespacedName) int {
	if a.Namespace != b.Namespace {
		if a.Namespace < b.Namespace {
			return -1
		}
		return 1
	}
	switch {
	case a.Name < b.Name:
		return -1
	case a.Name > b.Name:
		return 1
	}
	return 0
}

// ErrReasonClaimsWriting starts the status of a member whose gang waits
// for the claims its members share to be written, adopted or given back.
const ErrReasonClaimsWriting = "the ResourceClaims the gang's members share are being written"

// ClaimsBusy is the status of a member whose gang waits for the allocations table:
// the plan is kept, and Options.Done activates the gang. Preemption cannot
// help it.
func ClaimsBusy(key gang.Key) *fwk.Status {
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gang %s: %s; its members schedule once that is done", key, ErrReasonClaimsWriting))
}

// AllocateShared allocates, on the node the plan chose for them, the claims
// that several members of the plan share, and adopts the claims an earlier
// write for the gang allocated. It makes no API call: it hands the writes
// to the allocations table, and while any is in flight the member in this cycle and
// its siblings wait (ClaimsBusy), with the plan kept.
func (c *GangClaims) AllocateShared(ctx context.Context, spec *gang.Spec, members []*v1.Pod, d *PassDemand, req *placement.Request, plan *placement.Plan) *fwk.Status {
	if c.source == nil {
		return nil
	}
	handed, status := c.adoptClaims(ctx, spec, members)
	if status != nil {
		return status
	}
	groups, claims := d.Sharers()
	for g, group := range groups {
		nodeName := req.Nodes[plan.NodeOf[group[0]]].Name
		for _, name := range claims[g] {
			wrote, status := c.allocateClaim(ctx, spec, members, d, group, name, nodeName)
			if status != nil {
				return status
			}
			if wrote {
				handed++
			}
		}
	}
	if handed == 0 {
		return nil
	}
	// The tracker holds the allocations in flight before the informer
	// delivers anything: passes must not keep what they read before.
	c.source.Inventories().Claims().Changed()
	klog.FromContext(ctx).V(3).Info("Writing the claims the gang's members share", "podGroup", spec.Key, "claims", handed)
	return ClaimsBusy(spec.Key)
}

// allocateClaim computes the allocation of a shared claim on node and hands
// its write to the allocations table. It reports false when the claim is allocated
// already.
func (c *GangClaims) allocateClaim(ctx context.Context, spec *gang.Spec, members []*v1.Pod, d *PassDemand, group []int, name types.NamespacedName, nodeName string) (bool, *fwk.Status) {
	claim, err := c.source.Manager().ResourceClaims().Get(name.Namespace, name.Name)
	if err != nil {
		return false, c.claimFailed(ctx, spec, members, d, group, name, nodeName, err)
	}
	if claim.Status.Allocation != nil {
		return false, nil
	}
	node, err := c.nodes.Get(nodeName)
	if err != nil {
		return false, c.claimFailed(ctx, spec, members, d, group, name, nodeName, err)
	}
	allocation, err := c.source.Allocator().Allocate(ctx, node, claim)
	if err != nil {
		return false, c.claimFailed(ctx, spec, members, d, group, name, nodeName, err)
	}
	sigs := c.groupSignatures(members, d, group)
	failed := func(err error) {
		ctx := klog.NewContext(context.Background(), c.logger)
		c.claimFailedLater(ctx, spec, MemberNames(members, group), sigs, name, nodeName, err)
	}
	if err := c.allocations.Write(spec.Key, claim, allocation, failed); err != nil {
		if errors.Is(err, ErrBusy) {
			return false, ClaimsBusy(spec.Key)
		}
		return false, c.claimFailed(ctx, spec, members, d, group, name, nodeName, err)
	}
	return true, nil
}

// adoptClaims hands the allocations table the adoption of the claims of members that
// an earlier write for the gang allocated and nothing of this process holds
// any more (an attempt that failed and whose release failed, or a write of
// an earlier process): they are re-marked for this attempt before any
// member uses them, so that a release of the earlier write can never take
// the allocation from under them.
func (c *GangClaims) adoptClaims(ctx context.Context, spec *gang.Spec, members []*v1.Pod) (int, *fwk.Status) {
	seen := map[types.NamespacedName]bool{}
	var names []types.NamespacedName
	for _, p := range members {
		for i := range p.Spec.ResourceClaims {
			n, _, err := resourceclaim.Name(p, &p.Spec.ResourceClaims[i])
			if err != nil || n == nil {
				continue
			}
			name := types.NamespacedName{Namespace: p.Namespace, Name: *n}
			if !seen[name] {
				seen[name] = true
				names = append(names, name)
			}
		}
	}
	slices.SortFunc(names, CompareNames)
	adopted := 0
	for _, name := range names {
		claim, err := c.source.Manager().ResourceClaims().Get(name.Namespace, name.Name)
		if err != nil {
			continue // DeviceSource.Demand has said what is wrong with it
		}
		old, ok := c.allocations.Adoptable(spec.Key, claim)
		if !ok {
			continue
		}
		failed := func(err error) {
			ctx := klog.NewContext(context.Background(), c.logger)
			why := fmt.Sprintf("ResourceClaim %s, allocated by an earlier attempt, could not be adopted: %v", name, err)
			c.gangs.Reject(ctx, spec.Key, why, false)
		}
		if err := c.allocations.Adopt(spec.Key, claim, old, failed); err != nil {
			if errors.Is(err, ErrBusy) {
				return adopted, ClaimsBusy(spec.Key)
			}
			return adopted, fwk.AsStatus(err)
		}
		klog.FromContext(ctx).V(3).Info("Adopting a claim an earlier attempt allocated", "podGroup", spec.Key, "claim", name, "earlierAttempt", old.Attempt)
		adopted++
	}
	return adopted, nil
}

// groupSignatures are the filter signatures of a group's members, as the
// plan's templates have them.
func (c *GangClaims) groupSignatures(members []*v1.Pod, d *PassDemand, group []int) []string {
	var sigs []string
	for _, i := range group {
		if sig := c.gangs.Signature(members[i], d.Requests[i]); !slices.Contains(sigs, sig) {
			sigs = append(sigs, sig)
		}
	}
	return sigs
}

// claimFailed ends the gang's attempt because a shared claim could not be
// allocated in this cycle; see claimFailedLater.
func (c *GangClaims) claimFailed(ctx context.Context, spec *gang.Spec, members []*v1.Pod, d *PassDemand, group []int, name types.NamespacedName, node string, err error) *fwk.Status {
	why := c.claimFailedLater(ctx, spec, MemberNames(members, group), c.groupSignatures(members, d, group), name, node, err)
	return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s: %s", spec.Key, why))
}

// claimFailedLater ends the gang's attempt because a shared claim could not
// be allocated or written on node. A failure that may pass (the tracker's
// read raced a change, an API timeout or throttling) or that says nothing
// of the node (the claim or the node changed or went under the plan) lets
// the gang plan again at once, without a penalty. Any other failure (the
// node's free devices do not satisfy the claim, the API server refuses the
// write) is a lesson: the sharers are kept off the node and the plan is not
// tried again; the gang plans again at once if that is news, after its
// backoff if not.
func (c *GangClaims) claimFailedLater(ctx context.Context, spec *gang.Spec, sharers string, sigs []string, name types.NamespacedName, node string, err error) string {
	why := fmt.Sprintf("ResourceClaim %s, which members %s share, could not be allocated on node %s: %v", name, sharers, node, err)
	if Transient(err) || errors.Is(err, ErrClaimChanged) || apierrors.IsNotFound(err) {
		c.gangs.Reject(ctx, spec.Key, why+"; trying again", false)
		return why
	}
	learned := c.gangs.KeepOff(spec.Key, sigs, node)
	c.gangs.Reject(ctx, spec.Key, why, !learned)
	return why
}

// MemberNames lists the names of members[i] for i in idx, for people.
func MemberNames(members []*v1.Pod, idx []int) string {
	out := make([]string, len(idx))
	for i, j := range idx {
		out[i] = members[j].Name
	}
	return fmt.Sprint(out)
}
