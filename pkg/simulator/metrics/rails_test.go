package metrics

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/workload"
)

// railsLayout is two rail-optimized nodes of 8 GPUs whose NICs' names and
// slice order are shuffled.
func railsLayout(t *testing.T) *fabric.Layout {
	t.Helper()
	l, err := fabric.NewLayout(scenario.Fabric{
		Spines: 1, LeavesPerSpine: 1, NodesPerLeaf: 2, GPUsPerNode: 8, Preset: "nvidia",
		GPUSource: scenario.GPUSourceDRA, Rails: &scenario.Rails{NICOrder: scenario.NICOrderShuffled, Seed: ptr.To[int64](4)},
	})
	require.NoError(t, err)
	return l
}

// gpu and nic are allocation results: GPU minor of node, and the NIC of
// rail on node, for request req.
func gpu(node, minor int, req string) resourceapi.DeviceRequestAllocationResult {
	return resourceapi.DeviceRequestAllocationResult{Request: req, Driver: scheduling.DRADriverGPU,
		Pool: nodeName(node), Device: scheduling.DeviceNameGPUPrefix + string(rune('0'+minor))}
}

func nic(l *fabric.Layout, node, rail int, req string) resourceapi.DeviceRequestAllocationResult {
	for _, n := range l.Nodes[node].NICs {
		if n.Rail == rail {
			return resourceapi.DeviceRequestAllocationResult{Request: req, Driver: fabric.DRADriverNIC, Pool: nodeName(node), Device: n.Name()}
		}
	}
	panic("no such rail")
}

func nodeName(i int) string { return []string{"s0-l0-n0", "s0-l0-n1"}[i] }

// The rails the metric reads from the slices are the fabric's: GPU k is on
// rail k whatever the NICs are called or where the slice lists them.
func TestRailMapReadsTheFabric(t *testing.T) {
	l := railsLayout(t)
	require.Equal(t, nodeName(1), l.Nodes[1].Name)
	rm := NewRailMap(l.ResourceSlices())
	for node := range l.Nodes {
		for _, n := range l.Nodes[node].NICs {
			d := rm.devices[deviceKey{fabric.DRADriverNIC, nodeName(node), n.Name()}]
			require.Equal(t, n.Rail, d.rail, "NIC %s of %s", n.Name(), nodeName(node))
			require.True(t, d.nic)
		}
		for minor := range 8 {
			g := gpu(node, minor, "")
			d := rm.devices[deviceKey{g.Driver, g.Pool, g.Device}]
			require.Equal(t, minor, d.rail, "GPU %d", minor)
			require.Equal(t, minor, d.index)
		}
	}
}

func TestCountRails(t *testing.T) {
	l := railsLayout(t)
	rm := NewRailMap(l.ResourceSlices())
	bound := ptr.To(3.0)
	gangs := []Gang{
		{Name: "aligned", Pods: 2, AllBound: bound},
		{Name: "misaligned", Pods: 2, AllBound: bound},
		{Name: "three", Pods: 3, AllBound: bound},
		{Name: "nics", Pods: 2, AllBound: bound},
		{Name: "unbound", Pods: 2},
		{Name: "single", Pods: 1, AllBound: bound},
	}
	gpus := func(node int, minors ...int) []resourceapi.DeviceRequestAllocationResult {
		var out []resourceapi.DeviceRequestAllocationResult
		for _, m := range minors {
			out = append(out, gpu(node, m, workload.GPUClaim))
		}
		return out
	}
	pair := func(node, k, gpuMinor, nicRail int) []resourceapi.DeviceRequestAllocationResult {
		return []resourceapi.DeviceRequestAllocationResult{
			gpu(node, gpuMinor, workload.GPURequestName(k)), nic(l, node, nicRail, workload.NICRequestName(k)),
		}
	}
	allocs := []PodAllocation{
		// The same rails on two nodes, listed in another order: aligned.
		{Job: "aligned", Pod: "aligned-0", Results: gpus(0, 2, 3)},
		{Job: "aligned", Pod: "aligned-1", Results: gpus(1, 3, 2)},
		// Rails 0,1 against 4,5: one misaligned pair.
		{Job: "misaligned", Pod: "misaligned-0", Results: gpus(0, 0, 1)},
		{Job: "misaligned", Pod: "misaligned-1", Results: gpus(1, 4, 5)},
		// Two alike and one apart: two misaligned pairs of three.
		{Job: "three", Pod: "three-0", Results: gpus(0, 4, 5, 6, 7)},
		{Job: "three", Pod: "three-1", Results: gpus(1, 4, 5, 6, 7)},
		{Job: "three", Pod: "three-2", Results: gpus(1, 0, 1, 2, 3)},
		// GPUs aligned; member 1's second GPU got a NIC on another root.
		{Job: "nics", Pod: "nics-0", Results: append(pair(0, 0, 6, 6), pair(0, 1, 7, 7)...)},
		{Job: "nics", Pod: "nics-1", Results: append(pair(1, 0, 6, 6), pair(1, 1, 7, 2)...)},
		// Not judged: never bound whole, or alone.
		{Job: "unbound", Pod: "unbound-0", Results: gpus(0, 0, 1)},
		{Job: "unbound", Pod: "unbound-1", Results: gpus(1, 2, 3)},
		{Job: "single", Pod: "single-0", Results: gpus(0, 0, 1)},
	}
	want := &RailSummary{
		Gangs: 4, MisalignedGangs: 2, MemberPairs: 1 + 1 + 3 + 1, MisalignedPairs: 1 + 2,
		MembersWithNICs: 2, GPUNICPairs: 4, CrossRootPairs: 1, NICRailMismatches: 1,
	}
	if diff := cmp.Diff(want, CountRails(rm, allocs, gangs, oneLeaf)); diff != "" {
		t.Errorf("CountRails (-want,+got):\n%s", diff)
	}
	require.Equal(t, []string{"2,3", "2,3"}, gangs[0].Rails, "GPU index order, whatever the order allocated")
	require.False(t, gangs[0].RailMisaligned)
	require.Equal(t, []string{"0,1", "4,5"}, gangs[1].Rails)
	require.True(t, gangs[1].RailMisaligned)
	require.Nil(t, gangs[4].Rails, "a gang not judged gets no rails")
}

// Pairs follow the requests' names (gpu-k with nic-k), not the devices'
// order: a member whose gpu-0 took the higher GPU still pairs it with
// nic-0's NIC.
func TestCountRailsPairsByRequest(t *testing.T) {
	l := railsLayout(t)
	rm := NewRailMap(l.ResourceSlices())
	member := func(pod string) PodAllocation {
		return PodAllocation{Job: "g", Pod: pod, Results: []resourceapi.DeviceRequestAllocationResult{
			gpu(0, 5, "gpu-0"), nic(l, 0, 5, "nic-0"), gpu(0, 1, "gpu-1"), nic(l, 0, 1, "nic-1"),
		}}
	}
	got := CountRails(rm, []PodAllocation{member("g-0"), member("g-1")}, []Gang{{Name: "g", Pods: 2, AllBound: ptr.To(1.0)}}, oneLeaf)
	require.Equal(t, &RailSummary{Gangs: 1, MemberPairs: 1, MembersWithNICs: 2, GPUNICPairs: 4}, got)
}

// oneLeaf puts every node in one leaf.
func oneLeaf(string) string { return "s0-l0" }

// Members in different leaves are not misaligned by their rails: their
// pairs are counted apart, with those whose rail numbers differ.
func TestCountRailsJudgesPairsWithinALeaf(t *testing.T) {
	l := railsLayout(t)
	rm := NewRailMap(l.ResourceSlices())
	ownLeaf := func(node string) string { return node } // each node its own leaf
	allocs := []PodAllocation{
		{Job: "g", Pod: "g-0", Results: []resourceapi.DeviceRequestAllocationResult{gpu(0, 0, "gpus"), gpu(0, 1, "gpus")}},
		{Job: "g", Pod: "g-1", Results: []resourceapi.DeviceRequestAllocationResult{gpu(1, 4, "gpus"), gpu(1, 5, "gpus")}},
	}
	got := CountRails(rm, allocs, []Gang{{Name: "g", Pods: 2, AllBound: ptr.To(1.0)}}, ownLeaf)
	require.Equal(t, &RailSummary{Gangs: 1, CrossUnitPairs: 1, CrossUnitRailsDiffer: 1}, got)
	got = CountRails(rm, allocs, []Gang{{Name: "g", Pods: 2, AllBound: ptr.To(1.0)}}, oneLeaf)
	require.Equal(t, &RailSummary{Gangs: 1, MisalignedGangs: 1, MemberPairs: 1, MisalignedPairs: 1}, got)
}

// The claim counter keeps each pod's devices after they are freed, and
// knows the pod from the claim's owner.
func TestClaimCounterAllocations(t *testing.T) {
	c := NewClaimCounter()
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{
		UID: types.UID("u1"), Name: "g-1-gpus-x",
		Labels:          map[string]string{workload.JobLabel: "g", workload.RoleLabel: workload.RoleWorkload},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "g-1", Controller: ptr.To(true)}},
	}}
	c.Observe(claim.DeepCopy())
	allocated := claim.DeepCopy()
	results := []resourceapi.DeviceRequestAllocationResult{gpu(0, 3, workload.GPUClaim)}
	allocated.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}}
	c.Observe(allocated)
	c.Observe(claim.DeepCopy()) // freed when the pod was done
	c.ObserveDelete(claim.DeepCopy())
	other := claim.DeepCopy()
	other.UID, other.Labels = "u2", map[string]string{workload.RoleLabel: workload.RolePrefill}
	other.Status.Allocation = allocated.Status.Allocation
	c.Observe(other)
	require.Equal(t, []PodAllocation{{Job: "g", Pod: "g-1", Results: results}}, c.Allocations(func(string) string { return "" }))

	// The claim kube-scheduler makes for a pod's extended resources
	// carries no job: the pod's is looked up.
	extended := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{
		UID: types.UID("u3"), Name: "h-0-extended-resources-x",
		Annotations:     map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "h-0", Controller: ptr.To(true)}},
	}}
	extended.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}}
	c.Observe(extended)
	jobOf := map[string]string{"h-0": "h"}
	require.Equal(t, []PodAllocation{{Job: "g", Pod: "g-1", Results: results}, {Job: "h", Pod: "h-0", Results: results}},
		c.Allocations(func(pod string) string { return jobOf[pod] }))
}
