package coscheduling

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

	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/eligibility"
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
// node, with kube-scheduler's own allocator (package dra). The cycle only
// computes the allocation: package dra shows it in flight in the tracker
// and writes it, marked with the gang and a token of the write, off the
// scheduling loop, while the gang's members wait with the plan kept. When
// the write lands, the members find the claim allocated and are kept on its
// node by DynamicResources. If the attempt fails, the allocation is given
// back, unless a member already uses it; a claim an earlier write for the
// gang allocated is adopted (re-marked) before the members use it.

// sharers groups the members that share an unallocated claim, each group in
// rank order, groups in order of their first member. Members linked through
// several claims form one group.
func sharers(d *dra.PassDemand) (groups [][]int, claims [][]types.NamespacedName) {
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
		slices.SortFunc(cs, func(a, b types.NamespacedName) int { return cmpNames(a, b) })
		claims = append(claims, cs)
	}
	return groups, claims
}

func cmpNames(a, b types.NamespacedName) int {
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

// claimsBusy is the status of a member whose gang waits for package dra:
// the plan is kept, and Options.Done activates the gang. Preemption cannot
// help it.
func claimsBusy(key gang.Key) *fwk.Status {
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gang %s: %s; its members schedule once that is done", key, ErrReasonClaimsWriting))
}

// allocateShared allocates, on the node the plan chose for them, the claims
// that several members of the plan share, and adopts the claims an earlier
// write for the gang allocated. It makes no API call: it hands the writes
// to package dra, and while any is in flight the member in this cycle and
// its siblings wait (claimsBusy), with the plan kept.
func (pl *Plugin) allocateShared(ctx context.Context, spec *gang.Spec, members []*v1.Pod, d *dra.PassDemand, req *placement.Request, plan *placement.Plan) *fwk.Status {
	if pl.devices == nil {
		return nil
	}
	handed, status := pl.adoptClaims(ctx, spec, members)
	if status != nil {
		return status
	}
	groups, claims := sharers(d)
	for g, group := range groups {
		nodeName := req.Nodes[plan.NodeOf[group[0]]].Name
		for _, name := range claims[g] {
			wrote, status := pl.allocateClaim(ctx, spec, members, d, group, name, nodeName)
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
	pl.devices.Inventories().Claims().Changed()
	klog.FromContext(ctx).V(3).Info("Writing the claims the gang's members share", "podGroup", spec.Key, "claims", handed)
	return claimsBusy(spec.Key)
}

// allocateClaim computes the allocation of a shared claim on node and hands
// its write to package dra. It reports false when the claim is allocated
// already.
func (pl *Plugin) allocateClaim(ctx context.Context, spec *gang.Spec, members []*v1.Pod, d *dra.PassDemand, group []int, name types.NamespacedName, nodeName string) (bool, *fwk.Status) {
	claim, err := pl.devices.Manager().ResourceClaims().Get(name.Namespace, name.Name)
	if err != nil {
		return false, pl.claimFailed(ctx, spec, members, d, group, name, nodeName, err)
	}
	if claim.Status.Allocation != nil {
		return false, nil
	}
	node, err := pl.nodeLister.Get(nodeName)
	if err != nil {
		return false, pl.claimFailed(ctx, spec, members, d, group, name, nodeName, err)
	}
	allocation, err := pl.devices.Allocator().Allocate(ctx, node, claim)
	if err != nil {
		return false, pl.claimFailed(ctx, spec, members, d, group, name, nodeName, err)
	}
	sigs := groupSignatures(members, d, group)
	failed := func(err error) {
		ctx := klog.NewContext(context.Background(), pl.logger)
		pl.claimFailedLater(ctx, spec, memberNames(members, group), sigs, name, nodeName, err)
	}
	if err := pl.claims.Write(spec.Key, claim, allocation, failed); err != nil {
		if errors.Is(err, dra.ErrBusy) {
			return false, claimsBusy(spec.Key)
		}
		return false, pl.claimFailed(ctx, spec, members, d, group, name, nodeName, err)
	}
	return true, nil
}

// adoptClaims hands package dra the adoption of the claims of members that
// an earlier write for the gang allocated and nothing of this process holds
// any more (an attempt that failed and whose release failed, or a write of
// an earlier process): they are re-marked for this attempt before any
// member uses them, so that a release of the earlier write can never take
// the allocation from under them.
func (pl *Plugin) adoptClaims(ctx context.Context, spec *gang.Spec, members []*v1.Pod) (int, *fwk.Status) {
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
	slices.SortFunc(names, cmpNames)
	adopted := 0
	for _, name := range names {
		claim, err := pl.devices.Manager().ResourceClaims().Get(name.Namespace, name.Name)
		if err != nil {
			continue // demandOf has said what is wrong with it
		}
		old, ok := pl.claims.Adoptable(spec.Key, claim)
		if !ok {
			continue
		}
		failed := func(err error) {
			ctx := klog.NewContext(context.Background(), pl.logger)
			why := fmt.Sprintf("ResourceClaim %s, allocated by an earlier attempt, could not be adopted: %v", name, err)
			pl.failGang(ctx, spec.Key, ReasonGangRejected, why, false)
		}
		if err := pl.claims.Adopt(spec.Key, claim, old, failed); err != nil {
			if errors.Is(err, dra.ErrBusy) {
				return adopted, claimsBusy(spec.Key)
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
func groupSignatures(members []*v1.Pod, d *dra.PassDemand, group []int) []string {
	var sigs []string
	for _, i := range group {
		if sig := eligibility.FilterSignature(members[i], d.Requests[i]); !slices.Contains(sigs, sig) {
			sigs = append(sigs, sig)
		}
	}
	return sigs
}

// claimFailed ends the gang's attempt because a shared claim could not be
// allocated in this cycle; see claimFailedLater.
func (pl *Plugin) claimFailed(ctx context.Context, spec *gang.Spec, members []*v1.Pod, d *dra.PassDemand, group []int, name types.NamespacedName, node string, err error) *fwk.Status {
	why := pl.claimFailedLater(ctx, spec, memberNames(members, group), groupSignatures(members, d, group), name, node, err)
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
func (pl *Plugin) claimFailedLater(ctx context.Context, spec *gang.Spec, sharers string, sigs []string, name types.NamespacedName, node string, err error) string {
	why := fmt.Sprintf("ResourceClaim %s, which members %s share, could not be allocated on node %s: %v", name, sharers, node, err)
	if dra.Transient(err) || errors.Is(err, dra.ErrClaimChanged) || apierrors.IsNotFound(err) {
		pl.failGang(ctx, spec.Key, ReasonGangRejected, why+"; trying again", false)
		return why
	}
	learned := false
	for _, sig := range sigs {
		if pl.ledger.Lessons.LearnExclusion(spec.Key, sig, node) {
			learned = true
		}
	}
	pl.ledger.FailPlan(spec.Key)
	pl.failGang(ctx, spec.Key, ReasonGangRejected, why, !learned)
	return why
}

func memberNames(members []*v1.Pod, idx []int) string {
	out := make([]string, len(idx))
	for i, j := range idx {
		out[i] = members[j].Name
	}
	return fmt.Sprint(out)
}

// claimsDone is package dra's word that a write, adoption or release for
// the gang ended: the tracker changed, and its members may schedule.
func (pl *Plugin) claimsDone(key gang.Key) {
	if pl.devices != nil {
		pl.devices.Inventories().Claims().Changed()
	}
	pl.activate(key)
}

// claimsOptions configure the plugin's table of allocations.
func claimsOptions(handle fwk.Handle, devices *dra.DeviceSource, logger klog.Logger) dra.Options {
	o := dra.Options{
		Client:   handle.ClientSet().ResourceV1(),
		Recorder: handle.EventRecorder(),
		Logger:   logger,
	}
	if devices != nil {
		o.Tracker = devices.Manager().ResourceClaims()
	}
	return o
}
