package integration

// GPUs through Dynamic Resource Allocation: gangs
// whose GPUs NVIDIA's DRA driver publishes as ResourceSlices, scheduled by
// gpu-gang with the shipped configuration. These are the acceptance tests
// of the scheduler's DRA capacity model; the harness is in
// dra_harness_test.go and the driver's objects in dra_objects_test.go.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling"
)

// wholeH100Node is the claim template of a whole HGX H100 node's GPUs.
const wholeH100Node = "gpu-8"

// wholeNode is what a member holds that takes a whole H100 node's GPUs.
var wholeNode = map[string]int{gpuDriver: 8}

// The harness works with the stock machinery, before any gang is involved:
// pods outside gangs, scheduled by gpu-gang's profile, get their claims
// (from a template, named, and the claim kube-scheduler makes for
// nvidia.com/gpu through the DeviceClass's mapping) allocated by
// DynamicResources on their node; a pod finds no device left while the
// others run and holds none while it waits; and when a pod goes, the claim
// controller frees its devices for the pod that waits.
func TestDRAHarness(t *testing.T) {
	env := newDRAEnv(t, gpuClass(true))
	env.draNodes(h100DRA, "n0", "n1", "n2")
	env.createClaimTemplate(wholeH100Node, gpuClaimSpec(8))
	env.createClaim("named", gpuClaimSpec(8))

	fromTmpl := env.claimPod("template", fromTemplate("gpus", wholeH100Node))
	named := env.claimPod("named", namedClaim("gpus", "named"))
	mapped := env.pod("mapped").Res(gpuRequest(8)).Obj()
	env.createPods(fromTmpl, named, mapped)
	nodes := env.waitForBound(bindTimeout, fromTmpl, named, mapped)
	if used := sets.New(mapValues(nodes)...); used.Len() != 3 {
		t.Errorf("three whole-node pods share nodes: %v", nodes)
	}
	env.expectDevicesOnNodes(nodes, wholeNode, fromTmpl, named, mapped)
	if got := env.getPod("mapped"); got.Status.ExtendedResourceClaimStatus == nil {
		t.Errorf("the pod asking for %s has no extended resource claim: its GPUs did not come through DRA", gpu)
	}

	waiting := env.claimPod("waiting", fromTemplate("gpus", wholeH100Node))
	env.createPods(waiting)
	env.waitForClaimsCreated(waiting)
	env.expectNothingHeld(draWindow, waiting)

	env.deletePods(fromTmpl)
	nodes = env.waitForBound(bindTimeout, waiting)
	env.expectDevicesOnNodes(nodes, wholeNode, waiting)
}

// Per-member claims: a gang of four whole-node members, each with a claim
// of its own for 8 GPUs, on 16 DRA nodes that advertise no nvidia.com/gpu
// (2 spines x 2 leaves x 4 nodes), starts together in one leaf about a
// second after submission. A second gang, whose members name claims made
// for them, fits the room that is left: it is planned on free devices, not
// on the first gang's, and starts as fast in another leaf.
func TestDRAPerMemberClaims(t *testing.T) {
	env := newDRAEnv(t, gpuClass(true))
	f := env.createDRAFabric(2, 2, 4, 2, h100DRA)
	env.createClaimTemplate(wholeH100Node, gpuClaimSpec(8))
	ledger := env.ledgerGangs(partialBindGrace, map[string]int{"a": 4, "b": 4})

	start := time.Now()
	a := env.templateGang("a", 4, wholeH100Node, nil)
	nodesA := env.expectBoundWithin(start, draBindBound, a...)
	env.expectDevicesOnNodes(nodesA, wholeNode, a...)
	if n := spans(nodesA, f.leafOf); n != 1 {
		t.Errorf("gang a spans %d leaves, want 1: %v", n, nodesA)
	}
	ev := env.waitForEvent("PodGroup", "a", coscheduling.ReasonGangScheduled)
	t.Logf("placement Event: %s", ev.Note)

	for i := range 4 {
		env.createClaim(fmt.Sprintf("b-%d-gpus", i), gpuClaimSpec(8))
	}
	start = time.Now()
	b := env.claimGang("b", 4, nil, func(i int) []v1.PodResourceClaim {
		return []v1.PodResourceClaim{namedClaim("gpus", fmt.Sprintf("b-%d-gpus", i))}
	})
	nodesB := env.expectBoundWithin(start, draBindBound, b...)
	env.expectDevicesOnNodes(nodesB, wholeNode, b...)
	if n := spans(nodesB, f.leafOf); n != 1 {
		t.Errorf("gang b spans %d leaves, want 1: %v", n, nodesB)
	}
	if f.leafOf[mapValues(nodesA)[0]] == f.leafOf[mapValues(nodesB)[0]] {
		t.Errorf("both gangs are in leaf %s", f.leafOf[mapValues(nodesA)[0]])
	}
	env.expectNoDRARejections(append(a, b...)...)
	env.waitForEvent("PodGroup", "b", coscheduling.ReasonGangScheduled)
	ledger.expectNoHalfBound()
}

// The extended-resource mapping: unchanged training pods that ask for
// nvidia.com/gpu: 8, on nodes that advertise no nvidia.com/gpu, are served
// from DRA devices through the DeviceClass's extendedResourceName. A gang
// of them starts together in one leaf, each member's GPUs allocated on its
// node. (Before the DRA work such a gang got GangTooLarge: "only 0 of its
// members would fit".)
func TestDRAExtendedResourceMapping(t *testing.T) {
	env := newDRAEnv(t, gpuClass(true))
	f := env.createDRAFabric(2, 2, 4, 2, h100DRA)
	ledger := env.ledgerGangs(partialBindGrace, map[string]int{"mapped": 4})

	start := time.Now()
	pods := env.gang("mapped", 4, nil)
	nodes := env.expectBoundWithin(start, draBindBound, pods...)
	if n := spans(nodes, f.leafOf); n != 1 {
		t.Errorf("the gang spans %d leaves, want 1: %v", n, nodes)
	}
	env.expectDevicesOnNodes(nodes, wholeNode, pods...)
	env.expectNoDRARejections(pods...)
	env.waitForEvent("PodGroup", "mapped", coscheduling.ReasonGangScheduled)
	ledger.expectNoHalfBound()
}

// One claim shared by all members. The shape: pods of one job that share
// the GPUs of one node, as the actor, learner and reward-model pods of an
// RL job time-share a node's 8 GPUs, or as NVIDIA's gpu-test3 has two pods
// share a GPU through one named ResourceClaim. A claim shared by several
// pods is allocated once, on the devices of the node(s) its allocation
// reaches; GPUs are node-local, so every member must land on the one node
// whose devices the claim gets, and the gang's demand is the claim's 8
// GPUs, not 8 per member. Two nodes that come first have GPUs taken, so
// only the third can hold the claim.
func TestDRASharedClaim(t *testing.T) {
	env := newDRAEnv(t, gpuClass(true))
	env.draNodes(h100DRA, "n0", "n1", "n2")
	env.createClaimTemplate("gpu-2", gpuClaimSpec(2))
	env.occupyDevices("gpu-2", "n0", "n1")
	env.createClaim("node-gpus", gpuClaimSpec(8))
	ledger := env.ledgerGangs(partialBindGrace, map[string]int{"rl": 4})

	start := time.Now()
	pods := env.claimGang("rl", 4, nil, func(int) []v1.PodResourceClaim {
		return []v1.PodResourceClaim{namedClaim("gpus", "node-gpus")}
	})
	nodes := env.expectBoundWithin(start, draBindBound, pods...)
	env.expectShareClaimOn(nodes, "n2", "node-gpus", pods...)
	env.expectNoDRARejections(pods...)
	ledger.expectNoHalfBound()
}

// A fleet policy read from device attributes: on DRA nodes without GPU
// feature discovery's labels, a gang that needs CUDA 12.4 lands only on
// nodes whose devices' cudaDriverVersion is 12.4 or newer, though older
// ones come first; versions compare as versions (12.10 is above 12.9);
// and a pod that no node can run waits, naming the attribute it read.
func TestDRAFleetPolicyFromDeviceAttributes(t *testing.T) {
	env := newDRAEnv(t, gpuClass(true))
	old := h100DRA.withDriver("535.104.05", "12.2")
	env.draNodes(old, "a-old-0", "a-old-1")
	env.draNodes(h100DRA, "b-new-0", "b-new-1")
	env.draNodes(h100DRA.withDriver("575.57.08", "12.9"), "c-129")
	env.draNodes(h100DRA.withDriver("580.65.06", "12.10"), "d-1210")
	env.createClaimTemplate(wholeH100Node, gpuClaimSpec(8))
	ledger := env.ledgerGangs(partialBindGrace, map[string]int{"cuda": 2})

	cuda := env.templateGang("cuda", 2, wholeH100Node, map[string]string{scheduling.AnnotationMinCUDA: "12.4"})
	nodes := env.waitForBound(bindTimeout, cuda...)
	env.expectOn(nodes, "b-new-0", "b-new-1")
	env.expectDevicesOnNodes(nodes, wholeNode, cuda...)
	ledger.expectNoHalfBound()

	newest := env.claimPod("newest", fromTemplate("gpus", wholeH100Node))
	newest.Annotations = map[string]string{scheduling.AnnotationMinCUDA: "12.10"}
	env.createPods(newest)
	env.expectOn(env.waitForBound(bindTimeout, newest), "d-1210")

	future := env.claimPod("future", fromTemplate("gpus", wholeH100Node))
	future.Annotations = map[string]string{scheduling.AnnotationMinCUDA: "13.0"}
	env.createPods(future)
	msg := env.waitForUnschedulable(future, "cudaDriverVersion")
	t.Logf("unschedulable: %s", msg)
}

// A gang that does not fit holds no allocation: five whole-node members on
// four DRA nodes are too many, so while the gang waits none of its claims
// is allocated or reserved, and none is in flight in the scheduler (a
// member reserved and waiting in Permit), as four pods that need every
// device of the cluster show by binding at once. Once they are gone and a
// fifth node publishes its GPUs, the gang starts together.
func TestDRAGangThatDoesNotFitHoldsNoAllocation(t *testing.T) {
	env := newDRAEnv(t, gpuClass(true))
	env.draNodes(h100DRA, "n0", "n1", "n2", "n3")
	env.createClaimTemplate(wholeH100Node, gpuClaimSpec(8))
	ledger := env.ledgerGangs(partialBindGrace, map[string]int{"big": 5})

	big := env.templateGang("big", 5, wholeH100Node, nil)
	env.waitForClaimsCreated(big...)
	env.expectNothingHeld(draWindow, big...)

	probes := make([]*v1.Pod, 4)
	for i := range probes {
		probes[i] = env.claimPod(fmt.Sprintf("probe-%d", i), fromTemplate("gpus", wholeH100Node))
	}
	env.createPods(probes...)
	nodes := env.waitForBound(bindTimeout, probes...)
	env.expectDevicesOnNodes(nodes, wholeNode, probes...)
	env.expectNothingHeld(0, big...)
	ev := env.waitForEvent("PodGroup", "big", coscheduling.ReasonGangTooLarge)
	t.Logf("Event: %s", ev.Note)

	env.deleteAndWait(probes...)
	env.draNodes(h100DRA, "n4")
	nodes = env.waitForBound(retryBindTimeout, big...)
	env.expectDevicesOnNodes(nodes, wholeNode, big...)
	ledger.expectNoHalfBound()
}

// A gang hears devices freed by claims, not only by pods: when a claim
// is deallocated after its pod is gone (as the resource claim controller
// does a moment after the pod's deletion, or a workload's own controller
// whenever it likes), the gang that waited for those devices starts. Here
// the devices of all four nodes are held by claims that a controller
// outside the scheduler allocated and reserved, so no pod event happens
// while the gang waits; the gang is turned away, then the claims are
// deallocated. Without the claim event nothing brings the gang back until
// the queue's periodic flush of unschedulable pods, minutes later.
func TestDRAGangStartsWhenClaimsReleaseDevices(t *testing.T) {
	env := newDRAEnv(t, gpuClass(true))
	nodes := []string{"n0", "n1", "n2", "n3"}
	env.draNodes(h100DRA, nodes...)
	env.createClaimTemplate(wholeH100Node, gpuClaimSpec(8))
	var held []string
	for _, n := range nodes {
		held = append(held, env.allocateOutsideScheduler("held-"+n, n, 8))
	}
	ledger := env.ledgerGangs(partialBindGrace, map[string]int{"big": 4})

	attempts := unschedulableAttempts(t)
	big := env.templateGang("big", 4, wholeH100Node, nil)
	env.waitForClaimsCreated(big...)
	if err := waitFor(t.Context(), bindTimeout, func(context.Context) (bool, error) {
		return unschedulableAttempts(t) > attempts, nil
	}); err != nil {
		t.Fatalf("the gang was never turned away while every device was held: %v", err)
	}
	env.expectNothingHeld(draWindow, big...)

	start := time.Now()
	for _, name := range held {
		env.deallocate(name)
	}
	bound := env.waitForBound(claimReleaseBound, big...)
	t.Logf("bound %s after the claims released their devices", time.Since(start).Round(time.Millisecond))
	env.expectDevicesOnNodes(bound, wholeNode, big...)
	ledger.expectNoHalfBound()
}

// claimReleaseBound is how long a gang may take to start once the claims
// that held its devices let them go: its members' backoff (at most 10 s),
// then a plan and the bindings. The queue's flush of unschedulable pods,
// the only other way back, comes after 5 minutes.
const claimReleaseBound = 30 * time.Second

// A mixed fabric: device-plugin nodes (nvidia.com/gpu allocatable) beside
// DRA nodes, with the chart's mapping, as while a fleet moves to the DRA
// driver. Leaf l0 of each spine runs the device plugin, leaf l1 the DRA
// driver. Two gangs with per-member claims take the two DRA leaves; then
// two gangs asking for nvidia.com/gpu, which either kind of node could
// serve, find the DRA devices taken and take the device-plugin leaves.
// Every gang starts at once, together, in one leaf.
func TestDRAMixedFabric(t *testing.T) {
	env := newDRAEnv(t, gpuClass(true))
	isDRA := func(name string) bool { return strings.Contains(name, "-l1-") }
	f := env.createFabricOf(2, 2, 4, 2, func(name string) *st.NodeWrapper {
		if isDRA(name) {
			return draNode(name)
		}
		return gpuNode(name, 8)
	})
	for _, n := range f.nodes {
		if isDRA(n) {
			env.publish(nodeSlice(n, gpuDriver, gpuDevices(n, h100DRA)))
		}
	}
	env.createClaimTemplate(wholeH100Node, gpuClaimSpec(8))
	gangs := map[string]int{"claims-a": 4, "claims-b": 4, "plugin-a": 4, "plugin-b": 4}
	ledger := env.ledgerGangs(partialBindGrace, gangs)

	leaves := sets.New[string]()
	for _, name := range []string{"claims-a", "claims-b", "plugin-a", "plugin-b"} {
		start := time.Now()
		var pods []*v1.Pod
		if strings.HasPrefix(name, "claims") {
			pods = env.templateGang(name, 4, wholeH100Node, nil)
		} else {
			pods = env.gang(name, 4, nil)
		}
		nodes := env.expectBoundWithin(start, draBindBound, pods...)
		if n := spans(nodes, f.leafOf); n != 1 {
			t.Errorf("gang %s spans %d leaves, want 1: %v", name, n, nodes)
		}
		leaf := f.leafOf[mapValues(nodes)[0]]
		leaves.Insert(leaf)
		wantDRA := strings.HasPrefix(name, "claims")
		if isDRA(mapValues(nodes)[0]) != wantDRA {
			t.Errorf("gang %s landed in leaf %s; DRA leaf wanted: %t", name, leaf, wantDRA)
		}
		if wantDRA {
			env.expectDevicesOnNodes(nodes, wholeNode, pods...)
		}
		env.expectNoDRARejections(pods...)
	}
	if leaves.Len() != 4 {
		t.Errorf("four gangs of a leaf each share leaves: %v", sets.List(leaves))
	}
	ledger.expectNoHalfBound()
}
