package coscheduling

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// railSlices are node's GPU slice, its GPUs on PCIe roots, and a dra.net
// slice of 8 RDMA NICs, NIC k (in PCI order: rail k) on the root of
// GPU gpuOfRail[k]. A NIC's address is both dranet's dra.net/pciAddress and
// the standard resource.kubernetes.io/pciBusID, which the model reads first.
func railSlices(node string, gpuOfRail []int) []runtime.Object {
	gpus := gpuSlice(node, "H100", "H100", "H100", "H100", "H100", "H100", "H100", "H100")
	nics := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-dra.net"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   "dra.net",
			Pool:     resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(node),
		},
	}
	for rail, g := range gpuOfRail {
		root := fmt.Sprintf("pci0000:%02x", 0x10*(g+1))
		address := fmt.Sprintf("0000:%02x:00.0", 0x10*(rail+1))
		gpus.Spec.Devices[g].Attributes[capacity.PCIeRootAttribute] = resourceapi.DeviceAttribute{StringValue: ptr.To(root)}
		nics.Spec.Devices = append(nics.Spec.Devices, resourceapi.Device{
			Name: fmt.Sprintf("nic-%d", g),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"dra.net/rdma":                     {BoolValue: ptr.To(true)},
				"dra.net/pciAddress":               {StringValue: ptr.To(address)},
				scheduling.DeviceAttributePCIBusID: {StringValue: ptr.To(address)},
				capacity.PCIeRootAttribute:         {StringValue: ptr.To(root)},
			},
		})
	}
	return []runtime.Object{gpus, nics}
}

// railFabric is DRA nodes node-0, node-1, ... with railSlices of the
// given layouts, and the objects to create: the GPU class, the slices.
func railFabric(layouts ...[]int) ([]*v1.Node, []runtime.Object) {
	objs := []runtime.Object{nvidiaClass()}
	var nodes []*v1.Node
	for i, l := range layouts {
		n := fmt.Sprint("node-", i)
		nodes = append(nodes, draNode(n))
		objs = append(objs, railSlices(n, l)...)
	}
	return nodes, objs
}

// halfNodeGang is gang rl of n members that each claim 4 GPUs (half a
// node) through one template, with the template and the claims added to
// objs.
func halfNodeGang(n int, objs []runtime.Object) ([]*v1.Pod, []runtime.Object) {
	tmpl := claimTemplate(testNS, "half", gpuClaimSpec(scheduling.DeviceClassGPU, 4, ""))
	objs = append(objs, tmpl)
	job := members("rl", n, "")
	for _, p := range job {
		objs = append(objs, claimFromTemplate(p, "gpus", tmpl))
	}
	return job, objs
}

// railOfGPU inverts gpuOfRail.
func railOfGPU(gpuOfRail []int, gpu int) int { return slices.Index(gpuOfRail, gpu) }

// claimRails reads an allocated claim of railFabric's GPUs: its node and
// the rails of its devices, sorted, layout giving each node's railFabric
// layout.
func claimRails(tb testing.TB, c *resourceapi.ResourceClaim, layout func(node string) []int) (string, []int) {
	tb.Helper()
	node := c.Status.Allocation.NodeSelector.NodeSelectorTerms[0].MatchFields[0].Values[0]
	var rails []int
	for _, r := range c.Status.Allocation.Devices.Results {
		var gpu int
		if _, err := fmt.Sscanf(r.Device, "gpu-%d", &gpu); err != nil {
			tb.Fatalf("claim %s: device %s is not a GPU: %v", c.Name, r.Device, err)
		}
		rails = append(rails, railOfGPU(layout(node), gpu))
	}
	slices.Sort(rails)
	return node, rails
}

// indexedLayout gives claimRails the layout of node-<i> from layouts.
func indexedLayout(tb testing.TB, layouts [][]int) func(node string) []int {
	return func(node string) []int {
		var n int
		if _, err := fmt.Sscanf(node, "node-%d", &n); err != nil {
			tb.Fatalf("node %s is not railFabric's: %v", node, err)
		}
		return layouts[n]
	}
}

// A gang whose members take half a node each is planned on one rail set
// and gpu-gang writes each member's claim on those rails, though the free
// halves of the nodes sit on different rails and the GPUs' names do not
// follow their rails: node-0 has rails 4-7 free, node-1 rails 0-3, node-2
// and node-3 are free. The members' claims are allocated, marked, on the
// same rails.
func TestRailAlignedGangWritesItsMembersOnOneRailSet(t *testing.T) {
	straight := []int{0, 1, 2, 3, 4, 5, 6, 7}
	reversed := []int{7, 6, 5, 4, 3, 2, 1, 0} // gpu-7 is on rail 0
	layout := map[string][]int{"node-0": reversed, "node-1": straight, "node-2": reversed, "node-3": straight}
	objs := []runtime.Object{nvidiaClass()}
	var nodes []*v1.Node
	for _, n := range []string{"node-0", "node-1", "node-2", "node-3"} {
		nodes = append(nodes, draNode(n))
		objs = append(objs, railSlices(n, layout[n])...)
	}
	// node-0: rails 0-3 busy (gpu-7..4); node-1: rails 4-7 busy (gpu-4..7).
	objs = append(objs, allocatedClaim(testNS, "busy-0", "node-0", "gpu-7", "gpu-6", "gpu-5", "gpu-4"),
		allocatedClaim(testNS, "busy-1", "node-1", "gpu-4", "gpu-5", "gpu-6", "gpu-7"))
	tmpl := claimTemplate(testNS, "half", gpuClaimSpec(scheduling.DeviceClassGPU, 4, ""))
	objs = append(objs, tmpl)
	job := members("rl", 2, "")
	for _, p := range job {
		objs = append(objs, claimFromTemplate(p, "gpus", tmpl))
	}
	env := newTestEnv(t, nodes, job, []*v1alpha1.PodGroup{gangtest.MakePodGroup("rl", testNS).MinMember(2).Obj()},
		withDRA(), withObjects(objs...))

	_, status := env.schedule(job[0])
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "status: %v", status)
	require.Contains(t, status.Message(), dra.ErrReasonClaimsWriting)

	var got [][]int
	var on []string
	for _, p := range job {
		name := p.Name + "-gpus"
		var c *resourceapi.ResourceClaim
		err := wait.PollUntilContextTimeout(env.ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			var err error
			c, err = env.client.ResourceV1().ResourceClaims(testNS).Get(ctx, name, metav1.GetOptions{})
			return err == nil && c.Status.Allocation != nil, nil
		})
		require.NoError(t, err, "claim %s is never allocated", name)
		_, marked, _ := dra.MarkOf(c)
		require.True(t, marked, "claim %s carries gpu-gang's mark", name)
		node, rails := claimRails(t, c, func(node string) []int { return layout[node] })
		got = append(got, rails)
		on = append(on, node)
	}
	require.NotEqual(t, on[0], on[1], "one member per node: each takes half of one")
	require.Equal(t, got[0], got[1], "both members on the same rails (nodes %v)", on)
	require.Len(t, got[0], 4)

	// The DRA manager sees the writes: each member's cycle then runs on
	// its claim as allocated, DynamicResources' Filter included, and the
	// member lands on its claim's node. The write's own goroutine marks
	// it done after the API server answers, which the claim informer may
	// deliver first: wait for both.
	tracker := env.pl.devices.Manager().ResourceClaims()
	key := gang.Key{Namespace: testNS, Name: "rl"}
	for i, p := range job {
		require.Eventually(t, func() bool {
			c, err := tracker.Get(testNS, p.Name+"-gpus")
			return err == nil && c.Status.Allocation != nil && !env.pl.claims.Busy(key)
		}, 10*time.Second, 10*time.Millisecond, "the DRA manager never saw claim %s allocated, or its write never ended", p.Name+"-gpus")
		node, status := env.schedule(p)
		require.Equal(t, on[i], node, "member %s lands on its claim's node: %v", p.Name, status)
	}
}

// A gang whose annotation says "none" is left to DynamicResources: gpu-gang
// writes none of its members' claims.
func TestRailAlignmentNoneLeavesClaimsToDynamicResources(t *testing.T) {
	straight := []int{0, 1, 2, 3, 4, 5, 6, 7}
	nodes, objs := railFabric(straight, straight)
	job, objs := halfNodeGang(2, objs)
	pg := gangtest.MakePodGroup("rl", testNS).MinMember(2).Obj()
	pg.Annotations = map[string]string{scheduling.AnnotationRailAlignment: scheduling.RailAlignmentNone}
	env := newTestEnv(t, nodes, job, []*v1alpha1.PodGroup{pg}, withDRA(), withObjects(objs...))
	node, status := env.schedule(job[0])
	require.NotEmpty(t, node, "status: %v", status)
	c, err := env.client.ResourceV1().ResourceClaims(testNS).Get(env.ctx, job[0].Name+"-gpus", metav1.GetOptions{})
	require.NoError(t, err)
	_, marked, _ := dra.MarkOf(c)
	require.False(t, marked, "gpu-gang wrote nothing")
}

// A gang that requires rail alignment waits while only halves on different
// rails are free, with a RailsNotFree Event naming the nodes and their free
// rails, and writes nothing; once an aligned set is free it is planned.
func TestRailAlignmentRequiredWaitsForAnAlignedSet(t *testing.T) {
	straight := []int{0, 1, 2, 3, 4, 5, 6, 7}
	nodes, objs := railFabric(straight, straight)
	busy1 := allocatedClaim(testNS, "busy-1", "node-1", "gpu-0", "gpu-1", "gpu-2", "gpu-3")
	objs = append(objs, allocatedClaim(testNS, "busy-0", "node-0", "gpu-4", "gpu-5", "gpu-6", "gpu-7"), busy1)
	job, objs := halfNodeGang(2, objs)
	pg := gangtest.MakePodGroup("rl", testNS).MinMember(2).Obj()
	pg.Annotations = map[string]string{scheduling.AnnotationRailAlignment: scheduling.RailAlignmentRequired}
	env := newTestEnv(t, nodes, job, []*v1alpha1.PodGroup{pg}, withDRA(), withObjects(objs...))

	_, status := env.schedule(job[0])
	require.Equal(t, fwk.Unschedulable, status.Code(), "status: %v", status)
	require.Contains(t, status.Message(), "requires rail alignment")
	var events []string
	require.Eventually(t, func() bool {
		events = append(events, env.recorded()...)
		return hasEvent(events, scheduling.ReasonRailsNotFree, "node-0 (rails 0-3), node-1 (rails 4-7)")
	}, 10*time.Second, 10*time.Millisecond, "a RailsNotFree Event names the nodes and their free rails: %q", events)
	for _, p := range job {
		c, err := env.client.ResourceV1().ResourceClaims(testNS).Get(env.ctx, p.Name+"-gpus", metav1.GetOptions{})
		require.NoError(t, err)
		require.Nil(t, c.Status.Allocation, "nothing is written while the gang waits")
	}

	// node-1's busy claim goes: rails 0-3 are free on both nodes.
	require.NoError(t, env.client.ResourceV1().ResourceClaims(testNS).Delete(env.ctx, busy1.Name, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, status := env.schedule(job[0])
		return status != nil && strings.Contains(status.Message(), dra.ErrReasonClaimsWriting)
	}, 10*time.Second, 50*time.Millisecond, "the gang is planned once an aligned set is free")
}

// A gang that asks for rail alignment on device-plugin nodes is scheduled
// at once, and its GangScheduled Event says, once, that the kubelet picks
// the GPUs.
func TestRailAlignmentOnDevicePluginNodesIsSaidNotAwaited(t *testing.T) {
	job := members("dp", 2, "4")
	pg := gangtest.MakePodGroup("dp", testNS).MinMember(2).Obj()
	pg.Annotations = map[string]string{scheduling.AnnotationRailAlignment: scheduling.RailAlignmentRequired}
	env := newTestEnv(t, gpuNodes(2), job, []*v1alpha1.PodGroup{pg})
	env.runGang(job)
	events := env.recorded()
	require.True(t, hasEvent(events, ReasonGangScheduled, "not rail-aligned: the device plugin on node"), "events: %q", events)
}

// A gang that requires rail alignment while its members ask for half a
// DRA node's GPUs as nvidia.com/gpu, which the GPU class serves, is
// scheduled at once on nodes whose free halves sit on different rails:
// DynamicResources makes those claims when the pods bind, so no plan
// decides their devices, and the GangScheduled Event says so, naming the
// fix. Members that take a whole node's GPUs are aligned as they are, and
// nothing is said.
func TestRailAlignmentOfMappedGPUsIsSaidNotAwaited(t *testing.T) {
	straight := []int{0, 1, 2, 3, 4, 5, 6, 7}
	for _, tt := range []struct {
		gpus string
		said bool
	}{{"4", true}, {"8", false}} {
		t.Run("gpus="+tt.gpus, func(t *testing.T) {
			nodes, objs := railFabric(straight, straight)
			if tt.said {
				objs = append(objs, allocatedClaim(testNS, "busy-0", "node-0", "gpu-4", "gpu-5", "gpu-6", "gpu-7"),
					allocatedClaim(testNS, "busy-1", "node-1", "gpu-0", "gpu-1", "gpu-2", "gpu-3"))
			}
			job := members("mp", 2, tt.gpus)
			pg := gangtest.MakePodGroup("mp", testNS).MinMember(2).Annotation(scheduling.AnnotationRailAlignment, scheduling.RailAlignmentRequired).Obj()
			env := newTestEnv(t, nodes, job, []*v1alpha1.PodGroup{pg}, withDRA(), withObjects(objs...))
			env.runGang(job)
			events := env.recorded()
			require.True(t, hasEvent(events, ReasonGangScheduled, "2 pods on 2 nodes"), "events: %q", events)
			said := hasEvent(events, ReasonGangScheduled, "not rail-aligned: member team-a/mp-0 asks for nvidia.com/gpu, which DeviceClass gpu.nvidia.com serves")
			require.Equal(t, tt.said, said, "events: %q", events)
			if tt.said {
				require.True(t, hasEvent(events, ReasonGangScheduled, "ask for them with a ResourceClaim"), "events: %q", events)
			}
		})
	}
}

// A running gang's replacement takes the rails its siblings use: the two
// running members hold rails 4-7 of their nodes, and the replacement's
// claim is written on rails 4-7 of a free node, where first fit would
// take gpu-0..3 (rails 0-3).
func TestRailReplacementJoinsItsSiblingsRails(t *testing.T) {
	straight := []int{0, 1, 2, 3, 4, 5, 6, 7}
	objs := []runtime.Object{nvidiaClass()}
	var nodes []*v1.Node
	for _, n := range []string{"node-0", "node-1", "node-2"} {
		nodes = append(nodes, draNode(n))
		objs = append(objs, railSlices(n, straight)...)
	}
	tmpl := claimTemplate(testNS, "half", gpuClaimSpec(scheduling.DeviceClassGPU, 4, ""))
	objs = append(objs, tmpl)
	running := func(name, node string) *v1.Pod {
		p := member("rl", name, "")
		own := claimFromTemplate(p, "gpus", tmpl)
		own.Finalizers = []string{resourceapi.Finalizer}
		own.Status = *allocatedClaim(testNS, own.Name, node, gpuNames(4, 8)...).Status.DeepCopy()
		own.Status.ReservedFor[0].Name, own.Status.ReservedFor[0].UID = p.Name, p.UID
		p.Spec.NodeName = node
		objs = append(objs, own)
		return p
	}
	job0, job1 := running("rl-0", "node-0"), running("rl-1", "node-1")
	replacement := member("rl", "rl-2", "")
	objs = append(objs, claimFromTemplate(replacement, "gpus", tmpl))
	env := newTestEnv(t, nodes, []*v1.Pod{job0, job1, replacement},
		[]*v1alpha1.PodGroup{gangtest.MakePodGroup("rl", testNS).MinMember(3).Obj()}, withDRA(), withObjects(objs...))

	_, status := env.schedule(replacement)
	require.NotNil(t, status, "the replacement waits for its claim's write")
	require.Contains(t, status.Message(), dra.ErrReasonClaimsWriting)
	var c *resourceapi.ResourceClaim
	err := wait.PollUntilContextTimeout(env.ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		c, err = env.client.ResourceV1().ResourceClaims(testNS).Get(ctx, "rl-2-gpus", metav1.GetOptions{})
		return err == nil && c.Status.Allocation != nil, nil
	})
	require.NoError(t, err, "the replacement's claim is never written")
	var got []string
	for _, r := range c.Status.Allocation.Devices.Results {
		got = append(got, r.Device)
	}
	slices.Sort(got)
	require.Equal(t, gpuNames(4, 8), got, "the replacement takes its siblings' rails 4-7")
}

// Members in different leaves (the rails' scalable unit by default) may use
// different rail sets; members in one leaf use one. node-0 and node-1, in
// leaf l-a, have rails 4-7 free; node-2 and node-3, in leaf l-b, rails
// 0-3: no set is free on all four, yet a gang of four that requires
// alignment is planned, each leaf's members on its leaf's free rails. With
// the spine as the unit, the same gang waits, and its Event says the rails
// must be the same on every node of a spine.
func TestRailAlignmentIsPerScalableUnit(t *testing.T) {
	straight := []int{0, 1, 2, 3, 4, 5, 6, 7}
	setup := func(t *testing.T, args config.CoschedulingArgs) (*testEnv, []*v1.Pod) {
		nodes, objs := railFabric(straight, straight, straight, straight)
		for i, n := range nodes {
			leaf := []string{"l-a", "l-a", "l-b", "l-b"}[i]
			n.Labels = map[string]string{v1.LabelHostname: n.Name, scheduling.LabelLeaf: leaf, scheduling.LabelSpine: "s0"}
			busy := gpuNames(0, 4)
			if leaf == "l-b" {
				busy = gpuNames(4, 8)
			}
			objs = append(objs, allocatedClaim(testNS, fmt.Sprint("busy-", i), n.Name, busy...))
		}
		job, objs := halfNodeGang(4, objs)
		pg := gangtest.MakePodGroup("rl", testNS).MinMember(4).Obj()
		pg.Annotations = map[string]string{scheduling.AnnotationRailAlignment: scheduling.RailAlignmentRequired}
		return newTestEnv(t, nodes, job, []*v1alpha1.PodGroup{pg}, withDRA(), withObjects(objs...), withArgs(args)), job
	}

	t.Run("leaf", func(t *testing.T) {
		env, job := setup(t, defaultTestArgs())
		_, status := env.schedule(job[0])
		require.NotNil(t, status)
		require.Contains(t, status.Message(), dra.ErrReasonClaimsWriting, "the gang is planned and its claims written")
		want := map[string][]string{"node-0": gpuNames(4, 8), "node-1": gpuNames(4, 8), "node-2": gpuNames(0, 4), "node-3": gpuNames(0, 4)}
		got := map[string][]string{}
		for _, p := range job {
			var c *resourceapi.ResourceClaim
			err := wait.PollUntilContextTimeout(env.ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
				var err error
				c, err = env.client.ResourceV1().ResourceClaims(testNS).Get(ctx, p.Name+"-gpus", metav1.GetOptions{})
				return err == nil && c.Status.Allocation != nil, nil
			})
			require.NoError(t, err, "claim of %s is never written", p.Name)
			node := c.Status.Allocation.NodeSelector.NodeSelectorTerms[0].MatchFields[0].Values[0]
			var devices []string
			for _, r := range c.Status.Allocation.Devices.Results {
				devices = append(devices, r.Device)
			}
			slices.Sort(devices)
			got[node] = devices
		}
		require.Equal(t, want, got, "each leaf's members on that leaf's free rails, one member per node")
	})

	t.Run("spine", func(t *testing.T) {
		args := defaultTestArgs()
		args.RailUnitLevel = scheduling.LabelSpine
		env, job := setup(t, args)
		_, status := env.schedule(job[0])
		require.Equal(t, fwk.Unschedulable, status.Code(), "status: %v", status)
		var events []string
		require.Eventually(t, func() bool {
			events = append(events, env.recorded()...)
			return hasEvent(events, scheduling.ReasonRailsNotFree, "the same on every node of a spine")
		}, 10*time.Second, 10*time.Millisecond, "a RailsNotFree Event: %q", events)
	})
}

// fullRailNodes is the fabric of the rail preemption tests: node-0 (GPU k
// on rail k) and node-1 (GPU names backwards), one leaf, both full: on
// node-0 low-a (priority 1) holds rails 0-3 and low-b (2) rails 4-7; on
// node-1 low-c (2) holds rails 0-3, low-d (1) rails 6-7, and rails 4-5
// are free. It returns the layouts, the nodes, the running pods and the
// objects to create (the slices, the class, the pods' claims).
func fullRailNodes() ([][]int, []*v1.Node, []*v1.Pod, []runtime.Object) {
	straight := []int{0, 1, 2, 3, 4, 5, 6, 7}
	reversed := []int{7, 6, 5, 4, 3, 2, 1, 0}
	layouts := [][]int{straight, reversed}
	nodes, objs := railFabric(layouts...)
	for _, n := range nodes {
		n.Labels = map[string]string{cliqueLabel: "c0", leafLabel: "l0", spineLabel: "s0"}
	}
	var running []*v1.Pod
	for _, v := range []struct {
		name, node string
		gpus       []string
		prio       int32
	}{
		{"low-a", "node-0", gpuNames(0, 4), 1},
		{"low-b", "node-0", gpuNames(4, 8), 2},
		{"low-c", "node-1", gpuNames(4, 8), 2},
		{"low-d", "node-1", gpuNames(0, 2), 1},
	} {
		claim := allocatedClaim(testNS, v.name, v.node, v.gpus...)
		ref := claim.Status.ReservedFor[0]
		pod := st.MakePod().Namespace(testNS).Name(ref.Name).UID(string(ref.UID)).Node(v.node).Priority(v.prio).Obj()
		pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To(claim.Name)}}
		pod.Status.Phase = v1.PodRunning
		pod.Status.StartTime = ptr.To(metav1.NewTime(t0))
		running = append(running, pod)
		objs = append(objs, claim)
	}
	return layouts, nodes, running, objs
}

// scheduleOnRails runs member p's cycle, which must place it, and returns
// its node and the rails, sorted, of the devices it took there: those the
// DRA manager holds allocated or in flight after the cycle and not before
// (DynamicResources reserves them in flight). layouts gives node-<i>'s
// railFabric layout.
func (e *testEnv) scheduleOnRails(p *v1.Pod, layouts [][]int) (string, []int) {
	e.t.Helper()
	tracker := e.fh.SharedDRAManager().ResourceClaims()
	before, err := tracker.ListAllAllocatedDevices()
	require.NoError(e.t, err)
	node, status := e.schedule(p)
	require.NotEmpty(e.t, node, "member %s is placed: %v", p.Name, status)
	after, err := tracker.ListAllAllocatedDevices()
	require.NoError(e.t, err)
	var rails []int
	for id := range after.Difference(before) {
		require.Equal(e.t, node, id.Pool.String(), "member %s's devices are on its node", p.Name)
		var gpu int
		_, err := fmt.Sscanf(id.Device.String(), "gpu-%d", &gpu)
		require.NoError(e.t, err)
		rails = append(rails, railOfGPU(indexedLayout(e.t, layouts)(node), gpu))
	}
	slices.Sort(rails)
	return node, rails
}

// A preemptor gang that requires rail alignment evicts pods whose devices
// free the same rails on every node it frees, and once they are gone its
// members' claims are written on those rails. Both nodes are full. On
// node-0 (GPU k on rail k) a pod of priority 1 holds rails 0-3 and one of
// priority 2 rails 4-7. On node-1 (GPU names run backwards: gpu-7 is on
// rail 0) a pod of priority 2 holds rails 0-3, one of priority 1 rails 6-7,
// and rails 4-5 are free. Counting GPUs alone, the two pods of priority 1
// are the cheapest victims, and they free rails 0-3 of node-0 and 4-7 of
// node-1. Counting rails, node-1's pod on rails 0-3 goes instead; and
// there first fit would take gpu-2..5, rails 2-5, where gpu-gang's plan
// takes gpu-4..7, rails 0-3.
func TestRailAlignedPreemptorEvictsOnOneRailSet(t *testing.T) {
	layouts, nodes, running, objs := fullRailNodes()
	job, objs := halfNodeGang(2, objs)
	for _, p := range job {
		p.Spec.Priority = ptr.To[int32](100)
	}
	pg := gangtest.MakePodGroup("rl", testNS).MinMember(2).Annotation(scheduling.AnnotationRailAlignment, scheduling.RailAlignmentRequired).Obj()
	env := newTestEnv(t, nodes, append(running, job...), []*v1alpha1.PodGroup{pg}, withTopology(t), withDRA(), withObjects(objs...))
	rec := env.record()
	env.syncWatch()

	_, status := env.attempt(job[0])
	require.True(t, status.IsSuccess(), "the gang preempts: %v", status)
	require.Equal(t, []string{"low-a", "low-c"}, env.deleted(), "the victims free rails 0-3 of both nodes")
	req := rec.last()
	require.True(t, slices.ContainsFunc(req.Resources, func(r string) bool { return strings.HasPrefix(r, "rail 0 of "+capacity.DimensionPrefix) }),
		"the engine counts the rails of the set: %v", req.Resources)

	// The victims go, and their claims with them (the claim controller's
	// part). The gang is planned again on what they freed, and its
	// members' claims are written on rails 0-3 of both nodes.
	for _, p := range podsNamed(running, "low-a", "low-c") {
		env.waitForLister(p, nil)
		env.forget(p)
		require.NoError(t, env.client.ResourceV1().ResourceClaims(testNS).Delete(env.ctx, p.Name, metav1.DeleteOptions{}))
	}
	require.Eventually(t, func() bool {
		_, status := env.schedule(job[0])
		return status != nil && strings.Contains(status.Message(), dra.ErrReasonClaimsWriting)
	}, 10*time.Second, 50*time.Millisecond, "the gang is planned again for its rails once the victims are gone")
	on := map[string][]int{}
	for _, p := range job {
		var c *resourceapi.ResourceClaim
		require.NoError(t, wait.PollUntilContextTimeout(env.ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			var err error
			c, err = env.client.ResourceV1().ResourceClaims(testNS).Get(ctx, p.Name+"-gpus", metav1.GetOptions{})
			return err == nil && c.Status.Allocation != nil, nil
		}), "the claim of %s is never written", p.Name)
		node, rails := claimRails(t, c, indexedLayout(t, layouts))
		on[node] = rails
	}
	require.Equal(t, map[string][]int{"node-0": {0, 1, 2, 3}, "node-1": {0, 1, 2, 3}}, on)
}

// A gang of members that ask for nvidia.com/gpu preempts for one rail set
// too, and once the victims are gone its members take the freed rails
// through their fences: the victims and rails of
// TestRailAlignedPreemptorEvictsOnOneRailSet, the members' devices picked
// by DynamicResources.
func TestRailAlignedMappedPreemptorTakesTheFreedRails(t *testing.T) {
	layouts, nodes, running, objs := fullRailNodes()
	job := members("mp", 2, "4")
	for _, p := range job {
		p.Spec.Priority = ptr.To[int32](100)
	}
	pg := gangtest.MakePodGroup("mp", testNS).MinMember(2).Annotation(scheduling.AnnotationRailAlignment, scheduling.RailAlignmentRequired).Obj()
	env := newTestEnv(t, nodes, append(running, job...), []*v1alpha1.PodGroup{pg}, withTopology(t), withRailFence(), withDRA(), withObjects(objs...))
	env.syncWatch()

	_, status := env.attempt(job[0])
	require.True(t, status.IsSuccess(), "the gang preempts: %v", status)
	require.Equal(t, []string{"low-a", "low-c"}, env.deleted(), "the victims free rails 0-3 of both nodes")

	for _, p := range podsNamed(running, "low-a", "low-c") {
		env.waitForLister(p, nil)
		env.forget(p)
		require.NoError(t, env.client.ResourceV1().ResourceClaims(testNS).Delete(env.ctx, p.Name, metav1.DeleteOptions{}))
	}
	require.Eventually(t, func() bool {
		_, status := env.schedule(job[0])
		return status != nil && strings.Contains(status.Message(), ErrReasonFenceNextCycle)
	}, 10*time.Second, 50*time.Millisecond, "the gang is planned again for its rails once the victims are gone")
	on := map[string][]int{}
	for _, p := range []*v1.Pod{job[1], job[0]} {
		node, rails := env.scheduleOnRails(p, layouts)
		on[node] = rails
	}
	require.Equal(t, map[string][]int{"node-0": {0, 1, 2, 3}, "node-1": {0, 1, 2, 3}}, on)
}

// Members that ask for nvidia.com/gpu, which a DeviceClass serves, get
// their devices from DynamicResources, first fit, in their own cycles. In
// the shipped profile RailFence leaves DynamicResources only the devices
// the plan chose on each member's node, so both members land on one rail
// set though the nodes' GPUs sit on their rails in opposite orders; the
// member whose cycle planned the gang reads the devices before the plan,
// and is turned away to its next cycle. gpu-6 and gpu-7 of each node are
// taken: rails 6-7 of node-0, 0-1 of node-1, so the one set both have
// free is 2-5. Without RailFence first fit takes gpu-0..3 on both nodes,
// rails 0-3 and 4-7, and the Event says they are not aligned.
func TestRailAlignedMappedGPUsTakeThePlansRails(t *testing.T) {
	straight := []int{0, 1, 2, 3, 4, 5, 6, 7}
	reversed := []int{7, 6, 5, 4, 3, 2, 1, 0} // gpu-7 is on rail 0
	layouts := [][]int{straight, reversed}
	for _, fenced := range []bool{true, false} {
		t.Run(fmt.Sprint("fenced=", fenced), func(t *testing.T) {
			nodes, objs := railFabric(layouts...)
			// Two GPUs of each node are taken: one member per node fits.
			objs = append(objs, allocatedClaim(testNS, "busy-0", "node-0", "gpu-6", "gpu-7"),
				allocatedClaim(testNS, "busy-1", "node-1", "gpu-6", "gpu-7"))
			job := members("mp", 2, "4")
			pg := gangtest.MakePodGroup("mp", testNS).MinMember(2).Annotation(scheduling.AnnotationRailAlignment, scheduling.RailAlignmentRequired).Obj()
			profile := withShippedProfile(t)
			if !fenced {
				profile = withShippedProfileWithout(t, RailFenceName)
			}
			env := newTestEnv(t, nodes, job, []*v1alpha1.PodGroup{pg}, profile, withObjects(objs...))
			if fenced {
				_, status := env.schedule(job[0])
				require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "status: %v", status)
				require.Contains(t, status.Message(), ErrReasonFenceNextCycle)
			}
			env.activator.Reset()
			n1, r1 := env.scheduleOnRails(job[1], layouts)
			if fenced {
				require.Contains(t, env.activator.Get(), testNS+"/"+job[0].Name, "the next cycle brings back the member turned away")
			}
			n0, r0 := env.scheduleOnRails(job[0], layouts)
			require.NotEqual(t, n0, n1, "one member per node")
			require.Len(t, r0, 4)
			require.Len(t, r1, 4)
			events := env.recorded()
			if fenced {
				require.Equal(t, []int{2, 3, 4, 5}, r0, "member on the one rail set free on both nodes (node %s)", n0)
				require.Equal(t, r0, r1, "both members on one rail set (nodes %s, %s)", n0, n1)
				require.True(t, hasEvent(events, ReasonGangScheduled, "rail-aligned on rails "), "events: %q", events)
				require.False(t, env.pl.fences.Fenced(job[0].UID) || env.pl.fences.Fenced(job[1].UID), "reserved members keep no fence")
				return
			}
			require.NotEqual(t, r0, r1, "first fit takes gpu-0..3 on both nodes: opposite rails")
			require.True(t, hasEvent(events, ReasonGangScheduled, "not rail-aligned: member team-a/mp-0 asks for nvidia.com/gpu"), "events: %q", events)
		})
	}
}

// The devices a plan chose for fenced members are promised until their
// cycles take them: a second gang planned in between gets the other rails
// of the same nodes, and every member of both lands on its own plan's
// devices. Gang a plans first (its first member turned away to its next
// cycle); gang b plans before any member of a has reserved.
func TestFencedDevicesArePromisedToTheirPlan(t *testing.T) {
	straight := []int{0, 1, 2, 3, 4, 5, 6, 7}
	layouts := [][]int{straight, straight}
	nodes, objs := railFabric(layouts...)
	a, b := members("a", 2, "4"), members("b", 2, "4")
	required := func(name string) *v1alpha1.PodGroup {
		return gangtest.MakePodGroup(name, testNS).MinMember(2).Annotation(scheduling.AnnotationRailAlignment, scheduling.RailAlignmentRequired).Obj()
	}
	env := newTestEnv(t, nodes, append(slices.Clone(a), b...), []*v1alpha1.PodGroup{required("a"), required("b")}, withShippedProfile(t), withObjects(objs...))
	for _, first := range []*v1.Pod{a[0], b[0]} {
		_, status := env.schedule(first)
		require.Contains(t, status.Message(), ErrReasonFenceNextCycle, "member %s", first.Name)
	}
	rails := map[string][]int{}
	for _, p := range []*v1.Pod{a[1], a[0], b[1], b[0]} {
		_, r := env.scheduleOnRails(p, layouts)
		require.Len(t, r, 4, "member %s takes 4 devices", p.Name)
		rails[p.Name] = r
	}
	require.Equal(t, rails["a-0"], rails["a-1"], "gang a on one rail set: %v", rails)
	require.Equal(t, rails["b-0"], rails["b-1"], "gang b on one rail set: %v", rails)
	require.NotEqual(t, rails["a-0"], rails["b-0"], "b takes the rails a left free: %v", rails)
}

// A profile that runs RailFence after DynamicResources (enabled in
// preFilter alone, so after the default plugins) cannot fence: it says so
// in the log once and stops fencing, so that its members are placed, first
// fit, with the Event's note, rather than turned away for a fence that
// never counts.
func TestRailFenceAfterDynamicResourcesStopsFencing(t *testing.T) {
	nodes, objs := railFabric([]int{0, 1, 2, 3, 4, 5, 6, 7}, []int{7, 6, 5, 4, 3, 2, 1, 0})
	objs = append(objs, allocatedClaim(testNS, "busy-0", "node-0", "gpu-6", "gpu-7"),
		allocatedClaim(testNS, "busy-1", "node-1", "gpu-6", "gpu-7"))
	job := members("mp", 2, "4")
	pg := gangtest.MakePodGroup("mp", testNS).MinMember(2).Annotation(scheduling.AnnotationRailAlignment, scheduling.RailAlignmentRequired).Obj()
	late := withShippedProfileEdited(t, func(p *schedconfig.KubeSchedulerProfile) {
		p.Plugins.MultiPoint.Enabled = slices.DeleteFunc(p.Plugins.MultiPoint.Enabled, func(pl schedconfig.Plugin) bool { return pl.Name == RailFenceName })
	})
	env := newTestEnv(t, nodes, job, []*v1alpha1.PodGroup{pg}, late, withObjects(objs...))
	for _, p := range job {
		node, status := env.schedule(p)
		require.NotEmpty(t, node, "member %s is placed: %v", p.Name, status)
	}
	events := env.recorded()
	require.True(t, hasEvent(events, ReasonGangScheduled, "not rail-aligned: member team-a/mp-0 asks for nvidia.com/gpu"), "events: %q", events)
	require.True(t, hasEvent(events, ReasonGangScheduled, "enable the RailFence plugin"), "events: %q", events)
}
