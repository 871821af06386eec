package coscheduling

import (
	"context"
	"fmt"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/util/retry"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"

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
// node, with kube-scheduler's own allocator, and writes the allocation as
// DynamicResources' PreBind would. The members then find the claim allocated
// and are kept on its node by DynamicResources. If the attempt fails, the
// allocation is given back, unless a member already uses it.

// sharers groups the members that share an unallocated claim, each group in
// rank order, groups in order of their first member. Members linked through
// several claims form one group.
func sharers(d *demand) (groups [][]int, claims [][]types.NamespacedName) {
	if d.gang == nil {
		return nil, nil
	}
	parent := make([]int, len(d.pods))
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
	for i, pd := range d.pods {
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
	for i := range d.pods {
		byRoot[find(i)] = append(byRoot[find(i)], i)
	}
	for i := range d.pods {
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

// sharedAllocations remembers the claims the plugin allocated for a gang's
// attempt in flight, to give them back if the attempt fails. Safe for
// concurrent use.
type sharedAllocations struct {
	mu     sync.Mutex
	byGang map[gang.Key][]types.NamespacedName
	cel    *cel.Cache
}

func newSharedAllocations() *sharedAllocations {
	return &sharedAllocations{byGang: map[gang.Key][]types.NamespacedName{}, cel: cel.NewCache(64, cel.Features{})}
}

func (s *sharedAllocations) note(key gang.Key, claim types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byGang[key] = append(s.byGang[key], claim)
}

// take forgets and returns the claims allocated for the gang.
func (s *sharedAllocations) take(key gang.Key) []types.NamespacedName {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.byGang[key]
	delete(s.byGang, key)
	return out
}

// allocateShared allocates, on the node the plan chose for them, the claims
// that several members of the plan share. When it wrote any, the member in
// this cycle is sent back to retry at once: DynamicResources read the claim
// unallocated earlier in the cycle.
func (pl *Plugin) allocateShared(ctx context.Context, spec *gang.Spec, members []*v1.Pod, d *demand, req *placement.Request, plan *placement.Plan) *fwk.Status {
	groups, claims := sharers(d)
	if len(groups) == 0 {
		return nil
	}
	wrote := 0
	for g, group := range groups {
		node := req.Nodes[plan.NodeOf[group[0]]].Name
		for _, name := range claims[g] {
			ok, err := pl.allocateClaim(ctx, spec.Key, name, node)
			if err != nil {
				why := fmt.Sprintf("ResourceClaim %s, which members %s share, could not be allocated on node %s: %v", name, memberNames(members, group), node, err)
				pl.failGang(ctx, spec.Key, ReasonGangRejected, why, true)
				return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s: %s", spec.Key, why))
			}
			if ok {
				pl.shared.note(spec.Key, name)
				wrote++
			}
		}
	}
	if wrote == 0 {
		return nil
	}
	klog.FromContext(ctx).V(3).Info("Allocated the claims the gang's members share", "podGroup", spec.Key, "claims", wrote)
	pl.activate(spec.Key)
	return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s: allocated %d claim(s) its members share; they schedule now", spec.Key, wrote))
}

func memberNames(members []*v1.Pod, idx []int) string {
	out := make([]string, len(idx))
	for i, j := range idx {
		out[i] = members[j].Name
	}
	return fmt.Sprint(out)
}

// allocateClaim allocates claim on node with kube-scheduler's allocator and
// writes it: the finalizer DynamicResources adds, then the allocation. It
// reports false when the claim was allocated already.
func (pl *Plugin) allocateClaim(ctx context.Context, key gang.Key, name types.NamespacedName, nodeName string) (bool, error) {
	dra := pl.devices.dra
	claim, err := dra.ResourceClaims().Get(name.Namespace, name.Name)
	if err != nil {
		return false, err
	}
	if claim.Status.Allocation != nil {
		return false, nil
	}
	node, err := pl.nodeLister.Get(nodeName)
	if err != nil {
		return false, err
	}
	state, err := dra.ResourceClaims().GatherAllocatedState()
	if err != nil {
		return false, err
	}
	resourceSlices, err := dra.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return false, err
	}
	features := dynamicresources.AllocatorFeatures(feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate))
	allocator, err := structured.NewAllocator(ctx, features, *state, dra.DeviceClasses(), resourceSlices, pl.shared.cel)
	if err != nil {
		return false, err
	}
	results, err := allocator.Allocate(ctx, node, []*resourceapi.ResourceClaim{claim})
	if err != nil {
		return false, err
	}
	if len(results) != 1 {
		return false, fmt.Errorf("the node's free devices do not satisfy it")
	}
	// DynamicResources stamps an allocation it made with its time when
	// device binding conditions are on, and an allocation cannot change
	// once written: stamp it here, as it would.
	if results[0].AllocationTimestamp == nil {
		results[0].AllocationTimestamp = &metav1.Time{Time: pl.clock.Now()}
	}
	client := pl.handle.ClientSet().ResourceV1().ResourceClaims(name.Namespace)
	var written *resourceapi.ResourceClaim
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := client.Get(ctx, name.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c.Status.Allocation != nil {
			return fmt.Errorf("it was allocated elsewhere in the meantime")
		}
		markAllocation(key, c)
		if !slices.Contains(c.Finalizers, resourceapi.Finalizer) {
			c.Finalizers = append(c.Finalizers, resourceapi.Finalizer)
		}
		if c, err = client.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
			return err
		}
		c.Status.Allocation = &results[0]
		written, err = client.UpdateStatus(ctx, c, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return false, err
	}
	if err := dra.ResourceClaims().AssumeClaimAfterAPICall(written); err != nil {
		klog.FromContext(ctx).V(5).Info("Allocated claim not stored in the assume cache", "claim", name, "err", err)
	}
	// The tracker holds the allocation before the informer delivers it:
	// passes must not keep what they read before.
	pl.devices.inventories.Claims().Changed()
	return true, nil
}

// releaseShared gives back the claims allocated for a gang whose attempt
// failed, unless a member uses one already. It runs in the background:
// the API calls must not hold up a scheduling cycle.
func (pl *Plugin) releaseShared(key gang.Key) {
	claims := pl.shared.take(key)
	if len(claims) == 0 {
		return
	}
	go func() {
		ctx := context.Background()
		client := pl.handle.ClientSet().ResourceV1()
		for _, name := range claims {
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				c, err := client.ResourceClaims(name.Namespace).Get(ctx, name.Name, metav1.GetOptions{})
				if err != nil || c.Status.Allocation == nil || len(c.Status.ReservedFor) > 0 {
					return nil // gone, given back, or in use
				}
				c.Status.Allocation = nil
				if c, err = client.ResourceClaims(name.Namespace).UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
					return err
				}
				if i := slices.Index(c.Finalizers, resourceapi.Finalizer); i >= 0 {
					c.Finalizers = slices.Delete(c.Finalizers, i, i+1)
					_, err = client.ResourceClaims(name.Namespace).Update(ctx, c, metav1.UpdateOptions{})
				}
				return err
			})
			if err != nil {
				pl.logger.Error(err, "Could not give back a claim allocated for a gang that failed", "podGroup", key, "claim", name)
				continue
			}
			pl.logger.V(3).Info("Gave back a claim allocated for a gang that failed", "podGroup", key, "claim", name)
		}
	}()
}
