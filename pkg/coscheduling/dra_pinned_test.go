package coscheduling

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// A member with an allocated claim and an unallocated one: the allocated
// claim's devices sit on one node (its allocation's nodeSelector), so the
// member may run only there, although the model counts the unallocated
// claim's devices and DynamicResources' Filter, which enforces the node
// selector in kube-scheduler, is skipped for it.
//
// Here a running gang of three has job-0 on node-0 and job-1 on node-1;
// job-1 shares a claim allocated on node-1 with job-2, which is replaced.
// The replacement has the shared claim and a claim of its own made from a
// template. node-0, its gang's other node, fits its own claim best (another
// workload holds 4 of its GPUs), so a planner that forgets the shared claim
// puts it there. It must be planned on node-1; when node-1 has no room for
// its own claim, it waits and says which claim keeps it there.
func TestAllocatedClaimKeepsMemberOnItsNode(t *testing.T) {
	tests := []struct {
		name string
		// othersOnPinned are GPUs of node-1 another workload holds.
		othersOnPinned int
		// sharedOnly leaves the replacement the shared claim alone: then
		// it asks for no devices, DynamicResources' Filter runs for it,
		// and kept it on node-1 before the planner knew of pins too.
		sharedOnly bool
		wantNode   string
	}{
		{name: "room on the claim's node", othersOnPinned: 2, wantNode: "node-1"},
		{name: "no room on the claim's node", othersOnPinned: 5},
		{name: "the allocated claim alone", othersOnPinned: 5, sharedOnly: true, wantNode: "node-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, replacement := pinnedReplacement(t, tt.othersOnPinned, tt.sharedOnly)
			require.Nil(t, env.preEnqueue(replacement), "a running gang's replacement is not held for quorum")
			node, status := env.schedule(replacement)
			events := env.recorded()
			if tt.wantNode != "" {
				require.True(t, status.IsSuccess(), "status %v; events %q", status, events)
				require.Equal(t, tt.wantNode, node, "events %q", events)
				return
			}
			require.Empty(t, node, "the replacement must not be placed away from its shared claim's node; events %q", events)
			require.Equal(t, fwk.Unschedulable, status.Code(), "room can free up on node-1: %v", status)
			require.Contains(t, status.Message(), "may run only on node node-1, which holds the devices of its allocated ResourceClaim team-a/job-shared",
				"the status says which claim keeps the member where")
		})
	}
}

// A Filter plugin's rejection of a planned node keeps the member off that
// node only if it still holds. DynamicResources reads the allocated devices
// in its PreFilter, before the gang plugin plans: a claim released in
// between leaves it rejecting the node the plan chose from the newer state.
// The replacement here may run only on node-1, its shared claim's node; a
// stale rejection taken for a lesson would strand it there for the
// lesson's lifetime.
func TestFilterRejectionTeachesOnlyWhileItHolds(t *testing.T) {
	for _, tt := range []struct {
		name string
		// fill has another workload take node-1's room after the plan,
		// so that the rejection holds.
		fill bool
	}{
		{name: "no longer holds"},
		{name: "still holds", fill: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env, replacement := pinnedReplacement(t, 2, false)
			key := gang.Key{API: gang.XK8s, Namespace: testNS, Name: "job"}
			require.Nil(t, env.preEnqueue(replacement), "a running gang's replacement is not held for quorum")
			state := framework.NewCycleState()
			_, status, _ := env.fh.RunPreFilterPlugins(env.ctx, state, replacement)
			require.True(t, status.IsSuccess(), "node-1 has 3 GPUs free, the replacement needs 2: %v", status)
			if tt.fill {
				late := allocatedClaim("other", "late", "node-1", gpuNames(3, 5)...)
				_, err := env.client.ResourceV1().ResourceClaims("other").Create(env.ctx, late, metav1.CreateOptions{})
				require.NoError(t, err)
				taken := structured.MakeDeviceID(scheduling.DRADriverGPU, "node-1", gpuNames(3, 4)[0])
				require.Eventually(t, func() bool {
					ids, err := env.fh.SharedDRAManager().ResourceClaims().ListAllAllocatedDevices()
					return err == nil && ids.Has(taken)
				}, wait.ForeverTestTimeout, time.Millisecond, "the DRA manager counts the devices of the claim that fills node-1")
			}
			// What DynamicResources' Filter says on a node whose devices
			// its PreFilter read as taken.
			statuses := framework.NewDefaultNodeToStatus()
			statuses.Set("node-1", fwk.NewStatus(fwk.Unschedulable, "cannot allocate all claims").WithPlugin(names.DynamicResources))
			env.fh.RunPostFilterPlugins(env.ctx, state, replacement, statuses)

			excluded := false
			for _, nodes := range env.ledger().Lessons.View(key).Excluded {
				excluded = excluded || nodes.Has("node-1")
			}
			if tt.fill {
				require.True(t, excluded, "a rejection that holds keeps the member off node-1")
				return
			}
			require.False(t, excluded, "a rejection that no longer holds teaches nothing")
			env.clock.Step(3 * time.Second) // the gang's backoff
			node, status := env.schedule(replacement)
			require.True(t, status.IsSuccess(), "status %v; events %q", status, env.recorded())
			require.Equal(t, "node-1", node)
		})
	}
}

// pinnedReplacement builds the gang of TestAllocatedClaimKeepsMemberOnItsNode
// and returns its environment and the replacement: othersOnPinned GPUs of
// node-1 are held by another workload; with sharedOnly the replacement has
// the shared claim alone.
func pinnedReplacement(t *testing.T, othersOnPinned int, sharedOnly bool) (*testEnv, *v1.Pod) {
	nodes := []*v1.Node{draNode("node-0"), draNode("node-1")}
	h100s := func(node string) *resourceapi.ResourceSlice {
		return gpuSlice(node, "H100", "H100", "H100", "H100", "H100", "H100", "H100", "H100")
	}
	tmpl := claimTemplate(testNS, "gpus", gpuClaimSpec(scheduling.DeviceClassGPU, 2, ""))
	objects := []runtime.Object{nvidiaClass(), h100s("node-0"), h100s("node-1"), tmpl,
		allocatedClaim("other", "busy-0", "node-0", gpuNames(4, 8)...)}
	if othersOnPinned > 0 {
		objects = append(objects, allocatedClaim("other", "busy-1", "node-1", gpuNames(8-othersOnPinned, 8)...))
	}

	// shared is allocated gpu-0 of node-1 and reserved for job-1.
	shared := allocatedClaim(testNS, "job-shared", "node-1", gpuNames(0, 1)...)
	shared.Spec = gpuClaimSpec(scheduling.DeviceClassGPU, 1, "")
	shared.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "job-1", UID: types.UID(testNS + "/job-1")}}
	objects = append(objects, shared)
	useShared := func(p *v1.Pod) {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: "shared", ResourceClaimName: ptr.To(shared.Name)})
	}
	// running is a bound member whose own claim holds devices of node.
	running := func(name, node string, devices ...string) *v1.Pod {
		p := member("job", name, "")
		own := claimFromTemplate(p, "gpus", tmpl)
		own.Finalizers = []string{resourceapi.Finalizer}
		own.Status = *allocatedClaim(testNS, own.Name, node, devices...).Status.DeepCopy()
		own.Status.ReservedFor[0].Name, own.Status.ReservedFor[0].UID = p.Name, p.UID
		p.Spec.NodeName = node
		objects = append(objects, own)
		return p
	}
	job0 := running("job-0", "node-0", gpuNames(0, 2)...)
	job1 := running("job-1", "node-1", gpuNames(1, 3)...)
	useShared(job1)
	replacement := member("job", "job-2", "")
	replacement.UID = types.UID(testNS + "/job-2-replacement")
	useShared(replacement)
	if !sharedOnly {
		objects = append(objects, claimFromTemplate(replacement, "gpus", tmpl))
	}
	env := newTestEnv(t, nodes, []*v1.Pod{job0, job1, replacement},
		[]*v1alpha1.PodGroup{gangtest.MakePodGroup("job", testNS).MinMember(3).Obj()},
		withDRA(), withObjects(objects...))
	return env, replacement
}

// gpuNames names the GPUs from..to-1 of a node's slice.
func gpuNames(from, to int) []string {
	var out []string
	for d := from; d < to; d++ {
		out = append(out, fmt.Sprint(scheduling.DeviceNameGPUPrefix, d))
	}
	return out
}
