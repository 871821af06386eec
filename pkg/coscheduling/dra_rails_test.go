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
