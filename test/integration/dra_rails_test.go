package integration

// Rail-aligned gangs (docs/dra.md#rail-aligned-gangs). In a rail-optimized
// fabric NIC k of every node plugs into leaf switch k, rail k, and GPU k sits
// on the PCIe root of NIC k. The nodes here publish what NVIDIA's GPU driver
// and dranet publish: 8 GPUs and 8 RDMA NICs, one of each on each of 8
// PCIe roots. On some nodes the devices' names do not follow their rails
// (gpu-0..3 and nic-0..3 sit on the roots of rails 4..7), so that devices
// chosen first fit by name, as kube-scheduler's allocator chooses them, do
// not line up by accident. Each member of the tests' gangs takes half a
// node through one claim of its own: 4 GPUs and 4 NICs, each GPU with the
// NIC on its root (a matchAttribute constraint on
// resource.kubernetes.io/pcieRoot inside the claim).
//
// The tests work out the rails from the published slices themselves, by
// the rule of the docs (rail k is the k-th RDMA NIC in PCI address order; a
// GPU takes the rail of the NIC on its root), not with gpu-gang's code.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
)

// dranet: its driver name, which is also the name of the tests'
// DeviceClass for NICs, and the attributes it publishes for an RDMA NIC.
const (
	nicDriver                                   = "dra.net"
	nicClassName                                = "dra.net"
	attrNICRDMA       resourceapi.QualifiedName = "dra.net/rdma"
	attrNICPCIAddress resourceapi.QualifiedName = "dra.net/pciAddress"
)

// railsPerMember is how many GPUs, and NICs, each member of the tests'
// gangs takes: half of a node's 8 rails.
const railsPerMember = 4

// The two halves of a node's rails.
var (
	lowRails  = []int{0, 1, 2, 3}
	highRails = []int{4, 5, 6, 7}
)

func nicClass() *resourceapi.DeviceClass {
	return deviceClass(nicClassName, `device.driver == 'dra.net'`)
}

// railLayout says which rail each device name is on: gpu-i and nic-i sit on
// the PCIe root of rail layout[i].
type railLayout []int

var (
	// straightRails: gpu-k is on rail k.
	straightRails = railLayout{0, 1, 2, 3, 4, 5, 6, 7}
	// swappedRails: gpu-0..3 are on rails 4..7, gpu-4..7 on rails 0..3.
	swappedRails = railLayout{4, 5, 6, 7, 0, 1, 2, 3}
)

// deviceOn is the index of the device (gpu-i, nic-i) on rail.
func (l railLayout) deviceOn(rail int) int { return slices.Index(l, rail) }

// railBus is the PCI bus of the GPU on rail r; the NIC on rail r is on the
// next bus, under the same root. Rails follow the NICs' PCI order, so the
// buses grow with the rail.
func railBus(r int) int { return hgxBusIDs[r] }

func railRoot(r int) string { return fmt.Sprintf("pci0000:%02x", railBus(r)&0xf0) }

// railGPUs are the GPU driver's devices for node (gpuDevices), gpu-i moved
// onto the PCIe root of rail layout[i].
func railGPUs(node string, l railLayout) []resourceapi.Device {
	devices := gpuDevices(node, h100DRA)
	for i := range devices {
		r := l[i]
		devices[i].Attributes[attrPCIBusID] = resourceapi.DeviceAttribute{StringValue: ptr.To(fmt.Sprintf("0000:%02x:00.0", railBus(r)))}
		devices[i].Attributes[attrPCIeRoot] = resourceapi.DeviceAttribute{StringValue: ptr.To(railRoot(r))}
	}
	return devices
}

// railNICs are dranet's devices for a node: nic-i, an RDMA NIC on the root
// of rail layout[i], in name order.
func railNICs(l railLayout) []resourceapi.Device {
	devices := make([]resourceapi.Device, len(l))
	for i, r := range l {
		devices[i] = resourceapi.Device{
			Name: fmt.Sprintf("nic-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"dra.net/ifName":  {StringValue: ptr.To(fmt.Sprintf("ens%d", 100+i))},
				attrNICRDMA:       {BoolValue: ptr.To(true)},
				attrNICPCIAddress: {StringValue: ptr.To(fmt.Sprintf("0000:%02x:00.0", railBus(r)+1))},
				attrPCIeRoot:      {StringValue: ptr.To(railRoot(r))},
			},
		}
	}
	return devices
}

// railNode is a node of a rail test: its name, as given to createNodes, and
// which rail each device name is on.
type railNode struct {
	name   string
	layout railLayout
}

// railNodes creates the DRA nodes and publishes each one's GPUs and NICs,
// one pool per driver named after the node.
func (env *draEnv) railNodes(nodes ...railNode) {
	env.t.Helper()
	objs := make([]*v1.Node, len(nodes))
	for i, n := range nodes {
		objs[i] = draNode(n.name).Obj()
	}
	env.createNodes(objs...)
	for _, n := range nodes {
		full := env.nodeName(n.name)
		env.publish(nodeSlice(full, gpuDriver, railGPUs(full, n.layout)), nodeSlice(full, nicDriver, railNICs(n.layout)))
	}
}

// alternating are count nodes n0, n1, ... whose device names alternate
// between swappedRails (n0, n2, ...) and straightRails (n1, n3, ...).
func alternating(count int) []railNode {
	nodes := make([]railNode, count)
	for i := range nodes {
		nodes[i] = railNode{name: fmt.Sprintf("n%d", i), layout: straightRails}
		if i%2 == 0 {
			nodes[i].layout = swappedRails
		}
	}
	return nodes
}

func railGPURequest(k int) string { return fmt.Sprintf("gpu-%d", k) }
func railNICRequest(k int) string { return fmt.Sprintf("nic-%d", k) }

// railClaimSpec asks for n GPUs and n RDMA NICs, request gpu-k and request
// nic-k on one PCIe root, as a job that wants each GPU with its NIC writes
// its claim.
func railClaimSpec(n int) resourceapi.ResourceClaimSpec {
	var spec resourceapi.ResourceClaimSpec
	for k := range n {
		spec.Devices.Requests = append(spec.Devices.Requests,
			resourceapi.DeviceRequest{Name: railGPURequest(k), Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: gpuClassName, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
			}},
			resourceapi.DeviceRequest{Name: railNICRequest(k), Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: nicClassName, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
				Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["dra.net"].rdma == true`}}},
			}})
		spec.Devices.Constraints = append(spec.Devices.Constraints, resourceapi.DeviceConstraint{
			Requests: []string{railGPURequest(k), railNICRequest(k)}, MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(attrPCIeRoot)),
		})
	}
	return spec
}

// occupyRails creates claim name and allocates it the GPU and the NIC of
// each of rails on node, reserved for a consumer that is no pod (a workload
// with its own allocator), so that the rest of the node is what is free.
// The claim's devices go when the test ends, or with deallocate.
func (env *draEnv) occupyRails(name string, node railNode, rails []int) string {
	env.t.Helper()
	ctx := env.t.Context()
	claims := kubeClient.ResourceV1().ResourceClaims(env.ns)
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{resourceapi.Finalizer}},
		Spec:       railClaimSpec(len(rails)),
	}
	created, err := claims.Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		env.t.Fatalf("creating ResourceClaim %s: %v", name, err)
	}
	pool := env.nodeName(node.name)
	alloc := &resourceapi.AllocationResult{NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{pool}}},
	}}}}
	for k, r := range rails {
		i := node.layout.deviceOn(r)
		alloc.Devices.Results = append(alloc.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: railGPURequest(k), Driver: gpuDriver, Pool: pool, Device: fmt.Sprintf("gpu-%d", i)},
			resourceapi.DeviceRequestAllocationResult{Request: railNICRequest(k), Driver: nicDriver, Pool: pool, Device: fmt.Sprintf("nic-%d", i)})
	}
	created.Status.Allocation = alloc
	created.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{APIGroup: "example.com", Resource: "trainers", Name: name, UID: types.UID("trainer-" + name)}}
	if _, err := claims.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		env.t.Fatalf("allocating ResourceClaim %s: %v", name, err)
	}
	// The claim controller lets a claim reserved for another consumer
	// keep its devices and its finalizer: give them back before the DRA
	// objects go (cleanups run last-registered first).
	env.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			c, err := claims.Get(ctx, name, metav1.GetOptions{})
			if err != nil || c.Status.Allocation == nil {
				return err
			}
			c.Status.ReservedFor, c.Status.Allocation = nil, nil
			_, err = claims.UpdateStatus(ctx, c, metav1.UpdateOptions{})
			return err
		})
		if err != nil && !apierrors.IsNotFound(err) {
			env.t.Errorf("giving back the devices of claim %s: %v", name, err)
		}
	})
	return name
}

// freeHalves occupies, on each node, the rails that free does not name, so
// that the node's free half is exactly free. It returns the busy claims by
// node name.
func (env *draEnv) freeHalves(free map[string][]int, nodes ...railNode) map[string]string {
	env.t.Helper()
	busy := map[string]string{}
	for _, n := range nodes {
		var rails []int
		for r := range len(n.layout) {
			if !slices.Contains(free[n.name], r) {
				rails = append(rails, r)
			}
		}
		busy[n.name] = env.occupyRails("busy-"+n.name, n, rails)
	}
	return busy
}

// railClaimName is the name of the claim of member pod.
func railClaimName(pod string) string { return pod + "-devices" }

// railMembers creates, for count members <name>-0, <name>-1, ..., a claim
// for railsPerMember GPUs and NICs each, and returns the members, not yet
// created, each using its claim.
func (env *draEnv) railMembers(name string, count int) []*v1.Pod {
	env.t.Helper()
	pods := make([]*v1.Pod, count)
	for i := range pods {
		pod := fmt.Sprintf("%s-%d", name, i)
		env.createClaim(railClaimName(pod), railClaimSpec(railsPerMember))
		pods[i] = withClaims(env.gangPod(pod, name).Res(cpuOnly()).Obj(), namedClaim("devices", railClaimName(pod)))
	}
	return pods
}

// railGang creates PodGroup name, with minMember count and annotations, and
// its count members, each with a claim of its own (railMembers).
func (env *draEnv) railGang(name string, count int, annotations map[string]string) []*v1.Pod {
	env.t.Helper()
	env.createGangPodGroup(name, count, annotations)
	pods := env.railMembers(name, count)
	env.createPods(pods...)
	return pods
}

// publishedRails reads the rail of every device the test's ResourceSlices
// publish, by the rule of docs/dra.md: a node's RDMA NICs in PCI address
// order are rails 0, 1, ...; a device on a PCIe root takes the rail of the
// NIC on that root. It also returns each device's PCIe root.
func (env *draEnv) publishedRails(ctx context.Context) (rail map[deviceRef]int, root map[deviceRef]string, err error) {
	list, err := kubeClient.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{LabelSelector: testNodeLabel + "=" + env.ns})
	if err != nil {
		return nil, nil, err
	}
	type nic struct {
		ref       deviceRef
		pci, root string
	}
	nics := map[string][]nic{} // by node
	rail, root = map[deviceRef]int{}, map[deviceRef]string{}
	for _, s := range list.Items {
		node := ptr.Deref(s.Spec.NodeName, "")
		for _, d := range s.Spec.Devices {
			ref := deviceRef{driver: s.Spec.Driver, pool: s.Spec.Pool.Name, device: d.Name}
			if a := d.Attributes[attrPCIeRoot]; a.StringValue != nil {
				root[ref] = *a.StringValue
			}
			if a := d.Attributes[attrNICRDMA]; a.BoolValue != nil && *a.BoolValue {
				nics[node] = append(nics[node], nic{ref: ref, pci: ptr.Deref(d.Attributes[attrNICPCIAddress].StringValue, ""), root: root[ref]})
			}
		}
	}
	railOfRoot := map[string]map[string]int{} // node, root
	for node, l := range nics {
		// The addresses are written alike ("0000:19:00.0"), so their
		// order as strings is their PCI order.
		sort.Slice(l, func(i, j int) bool { return l[i].pci < l[j].pci })
		railOfRoot[node] = map[string]int{}
		for k, n := range l {
			rail[n.ref] = k
			railOfRoot[node][n.root] = k
		}
	}
	for _, s := range list.Items {
		node := ptr.Deref(s.Spec.NodeName, "")
		for _, d := range s.Spec.Devices {
			ref := deviceRef{driver: s.Spec.Driver, pool: s.Spec.Pool.Name, device: d.Name}
			if _, isNIC := rail[ref]; isNIC {
				continue
			}
			if k, ok := railOfRoot[node][root[ref]]; ok && root[ref] != "" {
				rail[ref] = k
			}
		}
	}
	return rail, root, nil
}

// memberRails is what one member's claim holds: its GPUs' rails and its
// NICs' rails, each sorted.
type memberRails struct {
	gpus, nics []int
}

func (m memberRails) String() string {
	return fmt.Sprintf("GPUs on rails %v, NICs on rails %v", m.gpus, m.nics)
}

// aligned reports whether the member's GPUs and NICs are on the same
// railsPerMember distinct rails.
func (m memberRails) aligned() bool {
	return len(m.gpus) == railsPerMember && slices.Equal(m.gpus, m.nics) && len(slices.Compact(slices.Clone(m.gpus))) == railsPerMember
}

// railsOfMembers waits for the claims of the bound members to be allocated
// and reserved, checks each member's devices (railsPerMember GPUs and NICs
// of its own node, gpu-k and nic-k of its claim on one PCIe root, no device
// allocated twice) and returns each member's rails.
func (env *draEnv) railsOfMembers(nodes map[string]string, pods ...*v1.Pod) map[string]memberRails {
	env.t.Helper()
	claims := env.waitForAllocated(1, pods...)
	rail, root, err := env.publishedRails(env.t.Context())
	if err != nil {
		env.t.Fatalf("reading the published rails: %v", err)
	}
	out := map[string]memberRails{}
	for _, p := range pods {
		var m memberRails
		rootOf := map[string]string{} // request, root
		for _, c := range claims[p.Name] {
			for _, r := range c.Status.Allocation.Devices.Results {
				d := deviceRef{driver: r.Driver, pool: r.Pool, device: r.Device}
				if d.pool != nodes[p.Name] {
					env.t.Errorf("member %s on %s holds device %s of another node (claim %s)", p.Name, nodes[p.Name], d, c.Name)
				}
				k, ok := rail[d]
				if !ok {
					env.t.Errorf("member %s holds device %s, which is on no rail", p.Name, d)
				}
				switch d.driver {
				case gpuDriver:
					m.gpus = append(m.gpus, k)
				case nicDriver:
					m.nics = append(m.nics, k)
				}
				rootOf[r.Request] = root[d]
			}
		}
		for k := range railsPerMember {
			if g, n := rootOf[railGPURequest(k)], rootOf[railNICRequest(k)]; g == "" || g != n {
				env.t.Errorf("member %s: request %s got a GPU on root %q, request %s a NIC on root %q; want one root",
					p.Name, railGPURequest(k), g, railNICRequest(k), n)
			}
		}
		slices.Sort(m.gpus)
		slices.Sort(m.nics)
		if len(m.gpus) != railsPerMember || len(m.nics) != railsPerMember {
			env.t.Errorf("member %s holds %d GPUs and %d NICs, want %d of each", p.Name, len(m.gpus), len(m.nics), railsPerMember)
		}
		out[p.Name] = m
	}
	env.expectNoDeviceTwice()
	return out
}

// expectRailAligned checks that every member's GPUs and NICs are on the same
// set of rails as every other member's, and on want if want is given.
func (env *draEnv) expectRailAligned(members map[string]memberRails, nodes map[string]string, want []int) {
	env.t.Helper()
	names := sortedKeys(members)
	first := members[names[0]]
	for _, n := range names {
		m := members[n]
		if !m.aligned() || !slices.Equal(m.gpus, first.gpus) {
			env.t.Errorf("the gang is not rail-aligned: %s", describeRails(members, nodes))
			return
		}
	}
	if want != nil && !slices.Equal(first.gpus, want) {
		env.t.Errorf("the gang is aligned on rails %v, want %v (the only set free on enough nodes): %s", first.gpus, want, describeRails(members, nodes))
	}
	env.t.Logf("rail-aligned: %s", describeRails(members, nodes))
}

// expectOnePerNode checks that the members are on distinct nodes among
// allowed (names as given to createNodes).
func (env *draEnv) expectOnePerNode(nodes map[string]string, allowed ...string) {
	env.t.Helper()
	env.expectOn(nodes, allowed...)
	seen := map[string]string{}
	for _, pod := range sortedKeys(nodes) {
		if other, ok := seen[nodes[pod]]; ok {
			env.t.Errorf("members %s and %s are both on %s; a node's free half holds one member", other, pod, nodes[pod])
		}
		seen[nodes[pod]] = pod
	}
}

func describeRails(members map[string]memberRails, nodes map[string]string) string {
	var parts []string
	for _, n := range sortedKeys(members) {
		if nodes[n] == "" {
			parts = append(parts, fmt.Sprintf("%s: %s", n, members[n]))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s on %s: %s", n, nodes[n], members[n]))
	}
	return strings.Join(parts, "; ")
}

// expectMarked checks that gpu-gang wrote the claim of each member: it
// carries the mark of gang.
func (env *draEnv) expectMarked(gang string, pods ...*v1.Pod) {
	env.t.Helper()
	for _, p := range pods {
		c, err := kubeClient.ResourceV1().ResourceClaims(env.ns).Get(env.t.Context(), railClaimName(p.Name), metav1.GetOptions{})
		if err != nil {
			env.t.Fatal(err)
		}
		m, ok, err := dra.MarkOf(c)
		if !ok || err != nil || m.Gang.Name != gang {
			env.t.Errorf("claim %s of member %s: mark %+v (present %v, %v); want gpu-gang's mark for gang %s (annotations %v)",
				c.Name, p.Name, m, ok, err, gang, c.Annotations)
		}
	}
}

// railBindBound is how soon after its creation a rail-aligned gang on free
// rails must be bound: as draBindBound, plus the write of the members'
// allocations, which runs off the scheduling cycle and activates the gang
// again when it lands.
const railBindBound = 10 * time.Second

// A gang whose members take half a node each lands on one set of rails, each
// GPU with the NIC on its root. Every node has one half free: the first two
// in name order rails 4-7, the other four rails 0-3, so the only aligned
// placement is one member on each of n2..n5, on rails 0-3; on n2 and n4 those
// are devices gpu-4..7, which first fit by name would not pick. gpu-gang
// writes the members' allocations, with its mark.
//
// The baseline, with rail-alignment none, runs on four whole free nodes of
// which n0 and n2 have their names swapped (gpu-0..3 on rails 4-7) and n1
// and n3 do not. Every placement must misalign there: members on one node
// take disjoint halves, so two on a node are on different rails; one member
// on each of the four nodes gets gpu-0..3 on each (kube-scheduler's
// allocator takes the first free devices in the slice's order, and the
// GPUs come first in name order, each NIC then forced by its root), rails
// 4-7 on n0 and n2 and rails 0-3 on n1 and n3. The same nodes with the
// default annotation give an aligned gang: one member per node (two on one
// node cannot share rails), and gpu-gang picks gpu-4..7 where the names are
// swapped.
func TestDRARailAlignedGang(t *testing.T) {
	t.Run("preferred on free halves", func(t *testing.T) {
		env := newDRAEnv(t, gpuClass(true), nicClass())
		nodes := alternating(6)
		env.railNodes(nodes...)
		env.freeHalves(map[string][]int{
			"n0": highRails, "n1": highRails,
			"n2": lowRails, "n3": lowRails, "n4": lowRails, "n5": lowRails,
		}, nodes...)
		ledger := env.ledgerGangs(bindGrace, map[string]int{"job": 4})

		start := time.Now()
		pods := env.railGang("job", 4, nil)
		bound := env.expectBoundWithin(start, railBindBound, pods...)
		env.expectOnePerNode(bound, "n2", "n3", "n4", "n5")
		env.expectRailAligned(env.railsOfMembers(bound, pods...), bound, lowRails)
		env.expectMarked("job", pods...)
		env.expectNoDRARejections(pods...)
		ledger.expectNoHalfBound()
	})

	t.Run("none on whole nodes misaligns", func(t *testing.T) {
		env := newDRAEnv(t, gpuClass(true), nicClass())
		env.railNodes(alternating(4)...)

		pods := env.railGang("job", 4, map[string]string{scheduling.AnnotationRailAlignment: scheduling.RailAlignmentNone})
		bound := env.waitForBound(bindTimeout, pods...)
		members := env.railsOfMembers(bound, pods...)
		t.Logf("rail-alignment none: %s", describeRails(members, bound))
		aligned := true
		for _, n := range sortedKeys(members) {
			aligned = aligned && members[n].aligned() && slices.Equal(members[n].gpus, members[pods[0].Name].gpus)
		}
		if aligned {
			t.Errorf("with rail-alignment none the members are aligned, which first fit by name cannot give on these nodes: %s", describeRails(members, bound))
		}
		for _, p := range pods {
			c, err := kubeClient.ResourceV1().ResourceClaims(env.ns).Get(t.Context(), railClaimName(p.Name), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, marked, _ := dra.MarkOf(c); marked {
				t.Errorf("claim %s carries gpu-gang's mark; with rail-alignment none DynamicResources allocates it (annotations %v)", c.Name, c.Annotations)
			}
		}
	})

	t.Run("preferred on whole nodes", func(t *testing.T) {
		env := newDRAEnv(t, gpuClass(true), nicClass())
		env.railNodes(alternating(4)...)

		start := time.Now()
		pods := env.railGang("job", 4, nil)
		bound := env.expectBoundWithin(start, railBindBound, pods...)
		env.expectOnePerNode(bound, "n0", "n1", "n2", "n3")
		env.expectRailAligned(env.railsOfMembers(bound, pods...), bound, nil)
		env.expectMarked("job", pods...)
		env.expectNoDRARejections(pods...)
	})
}

// A gang that requires rail alignment waits rather than misaligns. Two
// nodes have rails 4-7 free and two rails 0-3: room for all four members,
// but on no one set of rails. The gang stays unbound, holds and marks no
// claim, and gets a RailsNotFree Warning naming the nodes and their free
// rails. Then the workloads of the first two nodes move from rails 0-3 to
// rails 4-7 (the new ones start before the old ones end), so that rails
// 0-3 are free on all four nodes and nothing else is: the gang binds there,
// aligned, one member per node. (Whole free nodes are
// TestDRARailAlignedGang's "preferred on whole nodes".)
func TestDRARailAlignmentRequiredWaits(t *testing.T) {
	env := newDRAEnv(t, gpuClass(true), nicClass())
	nodes := alternating(4)
	env.railNodes(nodes...)
	busy := env.freeHalves(map[string][]int{"n0": highRails, "n1": highRails, "n2": lowRails, "n3": lowRails}, nodes...)
	ledger := env.ledgerGangs(bindGrace, map[string]int{"job": 4})

	start := time.Now()
	pods := env.railGang("job", 4, map[string]string{scheduling.AnnotationRailAlignment: scheduling.RailAlignmentRequired})
	ev := env.waitForEvent("PodGroup", "job", scheduling.ReasonRailsNotFree)
	t.Logf("RailsNotFree %s after the gang was created: %s", time.Since(start).Round(time.Millisecond), ev.Note)
	if ev.Type != v1.EventTypeWarning {
		t.Errorf("the RailsNotFree Event is of type %q, want %s", ev.Type, v1.EventTypeWarning)
	}
	expectNote(t, ev.Reason, ev.Note,
		env.nodeName("n0")+" (rails 4-7)", env.nodeName("n1")+" (rails 4-7)",
		env.nodeName("n2")+" (rails 0-3)", env.nodeName("n3")+" (rails 0-3)")
	env.expectNothingWritten(staysUnboundWindow, pods...)

	for _, n := range nodes[:2] {
		env.occupyRails("moved-"+n.name, n, highRails)
	}
	env.expectNothingWritten(draWindow, pods...)
	start = time.Now()
	env.deallocate(busy["n0"])
	env.deallocate(busy["n1"])
	bound := env.waitForBound(claimReleaseBound, pods...)
	t.Logf("bound %s after rails 0-3 of n0 and n1 were freed", time.Since(start).Round(time.Millisecond))
	env.expectOnePerNode(bound, "n0", "n1", "n2", "n3")
	env.expectRailAligned(env.railsOfMembers(bound, pods...), bound, lowRails)
	env.expectMarked("job", pods...)
	env.expectNoDRARejections(pods...)
	ledger.expectNoHalfBound()
}

// Rails are shared within a scalable unit, by default a leaf: members in
// different leaves meet at the spine whatever their rails. n0 and n1, in
// one leaf, have rails 4-7 free; n2 and n3, in another, rails 0-3: no set is
// free on all four, yet a gang that requires alignment binds at once, each
// leaf's members on that leaf's free rails, one member per node.
func TestDRARailAlignmentPerLeaf(t *testing.T) {
	env := newDRAEnv(t, gpuClass(true), nicClass())
	nodes := alternating(4)
	env.railNodes(nodes...)
	leafOf := map[string]string{"n0": "leaf-a", "n1": "leaf-a", "n2": "leaf-b", "n3": "leaf-b"}
	for _, n := range nodes {
		env.relabel(n.name, map[string]string{scheduling.LabelLeaf: env.nodeName(leafOf[n.name]), scheduling.LabelSpine: env.nodeName("spine")})
	}
	env.freeHalves(map[string][]int{"n0": highRails, "n1": highRails, "n2": lowRails, "n3": lowRails}, nodes...)
	ledger := env.ledgerGangs(bindGrace, map[string]int{"job": 4})

	start := time.Now()
	pods := env.railGang("job", 4, map[string]string{scheduling.AnnotationRailAlignment: scheduling.RailAlignmentRequired})
	bound := env.expectBoundWithin(start, railBindBound, pods...)
	env.expectOnePerNode(bound, "n0", "n1", "n2", "n3")
	members := env.railsOfMembers(bound, pods...)
	for _, p := range pods {
		want := lowRails
		if leafOf["n0"] == leafOf[strings.TrimPrefix(bound[p.Name], env.ns+"-")] {
			want = highRails
		}
		if m := members[p.Name]; !m.aligned() || !slices.Equal(m.gpus, want) {
			t.Errorf("member %s on %s: %s, want GPUs and NICs on rails %v, its leaf's free set: %s", p.Name, bound[p.Name], m, want, describeRails(members, bound))
		}
	}
	env.expectMarked("job", pods...)
	env.expectNoDRARejections(pods...)
	ledger.expectNoHalfBound()
}

// expectNothingWritten checks for all of window that no member is bound and
// that no member's claim is allocated, reserved or marked by gpu-gang.
func (env *draEnv) expectNothingWritten(window time.Duration, pods ...*v1.Pod) {
	env.t.Helper()
	err := staysTrue(env.t.Context(), window, func(ctx context.Context) error {
		for _, p := range pods {
			got, claims, err := env.podAndClaims(ctx, p.Name)
			if err != nil {
				return err
			}
			if got.Spec.NodeName != "" {
				return fmt.Errorf("member %s is bound to %s", p.Name, got.Spec.NodeName)
			}
			for _, c := range claims {
				_, marked, _ := dra.MarkOf(c)
				if c.Status.Allocation != nil || len(c.Status.ReservedFor) > 0 || marked {
					return fmt.Errorf("claim %s of member %s, which should wait, holds devices %v, reserved for %v, annotations %v",
						c.Name, p.Name, allocatedDevices(c), consumers(c), c.Annotations)
				}
			}
		}
		return nil
	})
	if err != nil {
		env.t.Fatalf("within %s: %v", window, err)
	}
}

// An attempt that fails after gpu-gang wrote its members' allocations gives
// them back. Five members, minMember 5, on five nodes with rails 0-3 free
// (on n0, n2 and n4 those are gpu-4..7 and nic-4..7); the fifth
// is held back (HoldForTest), so the other four reserve their nodes and wait
// in Permit with their claims allocated by gpu-gang, on one set of rails.
// One of them is deleted, which fails the attempt: every claim gpu-gang
// allocated for it loses its allocation, mark and finalizer, the deleted
// member's too (its claim outlives it), and no claim is left marked without
// a pod reserving it. Then the member comes back and the fifth is let go:
// the gang's next attempt allocates again and binds aligned.
func TestDRARailAttemptFailureReleases(t *testing.T) {
	withHoldPlugin(t)
	env := newDRAEnv(t, gpuClass(true), nicClass())
	nodes := alternating(5)
	env.railNodes(nodes...)
	free := map[string][]int{}
	for _, n := range nodes {
		free[n.name] = lowRails
	}
	env.freeHalves(free, nodes...)

	env.createGangPodGroup("job", 5, nil)
	pods := env.railMembers("job", 5)
	pods[4].Labels[holdLabel] = "true"
	env.createPods(pods...)
	waitForGauge(t, "gpu_gang_members_waiting_in_permit", 4)

	// The waiting members' claims are written before they are let into
	// the cycle that reserves their nodes.
	waiting := pods[:4]
	var written map[string]memberRails
	rail, _, err := env.publishedRails(t.Context())
	if err != nil {
		t.Fatalf("reading the published rails: %v", err)
	}
	var why string
	err = waitFor(t.Context(), claimTimeout, func(ctx context.Context) (bool, error) {
		written = map[string]memberRails{}
		for _, p := range waiting {
			c, err := kubeClient.ResourceV1().ResourceClaims(env.ns).Get(ctx, railClaimName(p.Name), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			m, ok, err := dra.MarkOf(c)
			if c.Status.Allocation == nil || !ok || err != nil || m.Gang.Name != "job" {
				why = fmt.Sprintf("claim %s: allocated %v, mark %+v (%v, %v)", c.Name, c.Status.Allocation != nil, m, ok, err)
				return false, nil
			}
			var mr memberRails
			for _, d := range allocatedDevices(c) {
				if d.driver == gpuDriver {
					mr.gpus = append(mr.gpus, rail[d])
				} else {
					mr.nics = append(mr.nics, rail[d])
				}
			}
			slices.Sort(mr.gpus)
			slices.Sort(mr.nics)
			written[p.Name] = mr
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the claims of the members waiting in Permit are not allocated and marked by gpu-gang: %v; %s", err, why)
	}
	t.Logf("written while the members wait in Permit: %s", describeRails(written, nil))
	for _, n := range sortedKeys(written) {
		if !written[n].aligned() || !slices.Equal(written[n].gpus, written[waiting[0].Name].gpus) {
			t.Errorf("the allocations gpu-gang wrote for the waiting members are not on one rail set: %s", describeRails(written, nil))
			break
		}
	}

	start := time.Now()
	env.deleteAndWait(pods[0])
	ev := env.waitForEvent("PodGroup", "job", coscheduling.ReasonMemberDeleted)
	t.Logf("%s: %s", ev.Reason, ev.Note)
	for _, p := range pods {
		env.waitForClaimReleased(claimReleaseTimeout, railClaimName(p.Name))
	}
	t.Logf("every member's claim given back %s after the deletion", time.Since(start).Round(time.Millisecond))
	env.expectNoMarkWithoutPod(draWindow)

	env.createPods(replacement(pods[0]))
	env.release(pods[4].Name)
	bound := env.waitForBound(retryBindTimeout, pods...)
	env.expectOnePerNode(bound, "n0", "n1", "n2", "n3", "n4")
	env.expectRailAligned(env.railsOfMembers(bound, pods...), bound, lowRails)
	env.expectMarked("job", pods...)
	env.expectNoMarkWithoutPod(0)
}

// expectNoMarkWithoutPod checks for all of window that every claim of the
// namespace that carries gpu-gang's mark is reserved for a pod: an
// allocation gpu-gang wrote is either in use or being given back.
func (env *draEnv) expectNoMarkWithoutPod(window time.Duration) {
	env.t.Helper()
	err := staysTrue(env.t.Context(), window, func(ctx context.Context) error {
		list, err := kubeClient.ResourceV1().ResourceClaims(env.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range list.Items {
			c := &list.Items[i]
			_, marked, _ := dra.MarkOf(c)
			if !marked {
				continue
			}
			reserved := false
			for _, r := range c.Status.ReservedFor {
				reserved = reserved || (r.APIGroup == "" && r.Resource == "pods")
			}
			if !reserved {
				return fmt.Errorf("claim %s carries gpu-gang's mark (%v) and no pod reserves it: allocated %v, reserved for %v",
					c.Name, c.Annotations, allocatedDevices(c), consumers(c))
			}
		}
		return nil
	})
	if err != nil {
		env.t.Fatalf("within %s: %v", window, err)
	}
}

// Members that ask for nvidia.com/gpu: 4, which the GPU DeviceClass serves,
// have no claim for gpu-gang to write: DynamicResources makes one in each
// member's cycle and picks its devices first fit. n0's names are swapped
// (gpu-0..3 on rails 4-7), n1's are not; rails 6-7 of n0 and 0-1 of n1 are
// taken, so each node holds one member and the one set both have free is
// rails 2-5. First fit by name takes gpu-0, gpu-1, gpu-4, gpu-5 on n0 (rails
// 4, 5, 0, 1) and gpu-2..5 on n1 (rails 2-5): with rail-alignment none the
// members are misaligned. With required, RailFence leaves DynamicResources
// only the devices the plan chose, and both members get rails 2-5.
func TestDRARailAlignedMappedGPUs(t *testing.T) {
	for _, tt := range []struct {
		mode    string
		aligned bool
	}{{scheduling.RailAlignmentRequired, true}, {scheduling.RailAlignmentNone, false}} {
		t.Run(tt.mode, func(t *testing.T) {
			env := newDRAEnv(t, gpuClass(true), nicClass())
			nodes := alternating(2)
			env.railNodes(nodes...)
			env.freeHalves(map[string][]int{"n0": {0, 1, 2, 3, 4, 5}, "n1": {2, 3, 4, 5, 6, 7}}, nodes...)
			ledger := env.ledgerGangs(bindGrace, map[string]int{"job": 2})

			start := time.Now()
			env.createGangPodGroup("job", 2, map[string]string{scheduling.AnnotationRailAlignment: tt.mode})
			pods := env.gangPods("job", 2, railsPerMember)
			env.createPods(pods...)
			bound := env.expectBoundWithin(start, railBindBound, pods...)
			env.expectOnePerNode(bound, "n0", "n1")
			rails := env.gpuRails(bound, pods...)
			t.Logf("rail-alignment %s: %v on %v", tt.mode, rails, bound)
			same := slices.Equal(rails[pods[0].Name], rails[pods[1].Name])
			switch {
			case tt.aligned && (!same || !slices.Equal(rails[pods[0].Name], []int{2, 3, 4, 5})):
				t.Errorf("the members' GPUs are on rails %v, want rails 2-5 for both (nodes %v)", rails, bound)
			case !tt.aligned && same:
				t.Errorf("with rail-alignment none the members' GPUs are on one rail set, %v, which first fit by name cannot give here (nodes %v)", rails, bound)
			}
			env.expectNoDeviceTwice()
			ledger.expectNoHalfBound()
		})
	}
}

// gpuRails waits for the claims of the bound members (one each) to be
// allocated and returns, by member, the sorted rails of its GPUs, each
// checked to be on the member's node.
func (env *draEnv) gpuRails(nodes map[string]string, pods ...*v1.Pod) map[string][]int {
	env.t.Helper()
	claims := env.waitForAllocated(1, pods...)
	rail, _, err := env.publishedRails(env.t.Context())
	if err != nil {
		env.t.Fatalf("reading the published rails: %v", err)
	}
	out := map[string][]int{}
	for _, p := range pods {
		for _, c := range claims[p.Name] {
			for _, d := range allocatedDevices(c) {
				if d.pool != nodes[p.Name] || d.driver != gpuDriver {
					env.t.Errorf("member %s on %s holds device %s (claim %s); want GPUs of its node", p.Name, nodes[p.Name], d, c.Name)
				}
				out[p.Name] = append(out[p.Name], rail[d])
			}
		}
		slices.Sort(out[p.Name])
	}
	return out
}
