package integration

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// The labels of the default topology preset, as the shipped configuration
// reads them.
const (
	cliqueLabel = "nvidia.com/gpu.clique"
	leafLabel   = "network.topology.nvidia.com/leaf"
	spineLabel  = "network.topology.nvidia.com/spine"
)

// fabric is a labelled 3-tier GPU fabric: spines × leaves × nodes of 8
// GPUs, every cliqueSize consecutive nodes of a leaf in one NVLink clique.
type fabric struct {
	leafOf, spineOf, cliqueOf map[string]string
	leaves                    []string
	// nodes are the full node names, in creation order.
	nodes []string
}

// createFabric creates the nodes of a fabric. Node n of leaf l under spine s
// is named s<s>-l<l>-n<n> (with the namespace prefix of createNodes).
func (env *testEnv) createFabric(spines, leaves, nodes, cliqueSize int) *fabric {
	env.t.Helper()
	return env.createFabricOf(spines, leaves, nodes, cliqueSize, func(name string) *st.NodeWrapper { return gpuNode(name, 8) })
}

// createFabricOf is createFabric with nodes that newNode starts from their
// names (without the namespace prefix).
func (env *testEnv) createFabricOf(spines, leaves, nodes, cliqueSize int, newNode func(name string) *st.NodeWrapper) *fabric {
	env.t.Helper()
	f := &fabric{leafOf: map[string]string{}, spineOf: map[string]string{}, cliqueOf: map[string]string{}}
	var all []*v1.Node
	for s := 0; s < spines; s++ {
		for l := 0; l < leaves; l++ {
			leaf := fmt.Sprintf("s%d-l%d", s, l)
			f.leaves = append(f.leaves, leaf)
			for n := 0; n < nodes; n++ {
				name := fmt.Sprintf("%s-n%d", leaf, n)
				clique := fmt.Sprintf("%s-c%d", leaf, n/cliqueSize)
				all = append(all, newNode(name).Label(spineLabel, fmt.Sprintf("s%d", s)).
					Label(leafLabel, leaf).Label(cliqueLabel, clique).Obj())
				full := env.nodeName(name)
				f.nodes = append(f.nodes, full)
				f.leafOf[full], f.spineOf[full], f.cliqueOf[full] = leaf, fmt.Sprintf("s%d", s), clique
			}
		}
	}
	env.createNodes(all...)
	return f
}

// spans counts the distinct domains the bound pods landed in.
func spans(nodes map[string]string, domainOf map[string]string) int {
	domains := sets.New[string]()
	for _, node := range nodes {
		domains.Insert(domainOf[node])
	}
	return domains.Len()
}

// occupy binds a whole-node pod outside any gang to each named node.
func (env *testEnv) occupy(nodes ...string) []*v1.Pod {
	env.t.Helper()
	return env.occupyWith("", 8, nodes...)
}

// occupyWith binds a pod outside any gang, of priorityClassName class
// (none if empty) and asking for gpus GPUs, to each named node.
func (env *testEnv) occupyWith(class string, gpus int, nodes ...string) []*v1.Pod {
	env.t.Helper()
	var pods []*v1.Pod
	for _, n := range nodes {
		p := env.pod("busy-" + n).Res(gpuRequest(gpus)).NodeSelector(map[string]string{v1.LabelHostname: env.nodeName(n)}).Obj()
		p.Spec.PriorityClassName = class
		pods = append(pods, p)
	}
	env.createPods(pods...)
	env.waitForBound(bindTimeout, pods...)
	return pods
}

// A gang that fits in a leaf lands in one leaf, on the fewest NVLink
// cliques; two such gangs take a leaf each while free leaves remain.
func TestGangsLandInOneLeafEach(t *testing.T) {
	env := newTestEnv(t)
	f := env.createFabric(2, 2, 4, 2)
	watch := env.watchGangs(map[string]int{"a": 4, "b": 4})

	env.createPodGroup(gangtest.MakePodGroup("a", env.ns).MinMember(4).Obj())
	a := env.gangPods("a", 4, 8)
	env.createPods(a...)
	nodesA := env.waitForBound(bindTimeout, a...)

	env.createPodGroup(gangtest.MakePodGroup("b", env.ns).MinMember(4).Obj())
	b := env.gangPods("b", 4, 8)
	env.createPods(b...)
	nodesB := env.waitForBound(bindTimeout, b...)

	for name, nodes := range map[string]map[string]string{"a": nodesA, "b": nodesB} {
		if n := spans(nodes, f.leafOf); n != 1 {
			t.Errorf("gang %s spans %d leaves, want 1: %v", name, n, nodes)
		}
		if n := spans(nodes, f.cliqueOf); n != 2 {
			t.Errorf("gang %s spans %d NVLink cliques, want 2 (4 nodes, cliques of 2): %v", name, n, nodes)
		}
	}
	leafA, leafB := f.leafOf[mapValues(nodesA)[0]], f.leafOf[mapValues(nodesB)[0]]
	if leafA == leafB {
		t.Errorf("both gangs share leaf %s while other leaves are free", leafA)
	}
	ev := env.waitForEvent("PodGroup", "a", coscheduling.ReasonGangScheduled)
	t.Logf("placement Event: %s", ev.Note)
	watch.expectNeverPartial()
}

// Small jobs are packed into the leaf that fits them best, so whole leaves
// stay free; a large gang that arrives afterwards still gets a whole leaf.
func TestSmallJobsKeepLeavesWholeForLargeGangs(t *testing.T) {
	env := newTestEnv(t)
	f := env.createFabric(2, 2, 4, 2)
	// The last leaf in tree order is already fragmented by a job outside
	// any gang: best fit must pack the small jobs there, not into the first
	// whole leaf.
	env.occupy("s1-l1-n0")

	var small []*v1.Pod
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("small-%d", i)
		env.createPodGroup(gangtest.MakePodGroup(name, env.ns).MinMember(1).Obj())
		p := env.gangPods(name, 1, 8)
		env.createPods(p...)
		env.waitForBound(bindTimeout, p...)
		small = append(small, p...)
	}
	smallNodes := env.waitForBound(bindTimeout, small...)
	for pod, node := range smallNodes {
		if f.leafOf[node] != "s1-l1" {
			t.Errorf("single-node job %s landed in leaf %s, want the fragmented leaf s1-l1", pod, f.leafOf[node])
		}
	}

	// Three leaves are whole; a gang of 3 leaves of work arrives.
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("large-%d", i)
		env.createPodGroup(gangtest.MakePodGroup(name, env.ns).MinMember(4).Obj())
		pods := env.gangPods(name, 4, 8)
		env.createPods(pods...)
		nodes := env.waitForBound(bindTimeout, pods...)
		if n := spans(nodes, f.leafOf); n != 1 {
			t.Errorf("large gang %s spans %d leaves, want 1 (minimum): %v", name, n, nodes)
		}
	}
}

// A gang that requires one leaf waits, with an Event that says so, while
// every leaf is fragmented, and starts inside one leaf once one frees up.
func TestRequiredLevelWaitsForADomain(t *testing.T) {
	env := newTestEnv(t)
	f := env.createFabric(2, 2, 4, 2)
	blockers := env.occupy("s0-l0-n0", "s0-l1-n0", "s1-l0-n0", "s1-l1-n0")

	env.createPodGroup(gangtest.MakePodGroup("ring", env.ns).MinMember(4).
		Annotation(scheduling.AnnotationTopologyRequired, leafLabel).Obj())
	pods := env.gangPods("ring", 4, 8)
	env.createPods(pods...)
	env.expectStaysUnbound(staysUnboundWindow, pods...)
	ev := env.waitForEvent("PodGroup", "ring", coscheduling.ReasonTopologyUnsatisfied)
	t.Logf("Event: %s", ev.Note)

	env.deletePods(blockers[3])
	nodes := env.waitForBound(bindTimeout, pods...)
	if n := spans(nodes, f.leafOf); n != 1 {
		t.Errorf("the gang spans %d leaves despite requiring one: %v", n, nodes)
	}
}

// A gang that prefers one leaf but finds none with room falls back one level
// up: it stays under one spine.
func TestPreferredLevelFallsBackOneLevel(t *testing.T) {
	env := newTestEnv(t)
	f := env.createFabric(2, 2, 4, 2)
	env.occupy("s0-l0-n0", "s0-l1-n0", "s1-l0-n0", "s1-l1-n0")

	env.createPodGroup(gangtest.MakePodGroup("ring", env.ns).MinMember(4).
		Annotation(scheduling.AnnotationTopologyPreferred, leafLabel).Obj())
	pods := env.gangPods("ring", 4, 8)
	env.createPods(pods...)
	nodes := env.waitForBound(bindTimeout, pods...)
	if n := spans(nodes, f.spineOf); n != 1 {
		t.Errorf("the gang spans %d spines, want 1: %v", n, nodes)
	}
	if n := spans(nodes, f.leafOf); n != 2 {
		t.Errorf("the gang spans %d leaves, want 2 (no leaf has 4 free nodes): %v", n, nodes)
	}
}

// Nodes without topology labels are their own domains: they never merge
// into one, and they do not break placement on the labelled part.
func TestNodesMissingLabels(t *testing.T) {
	env := newTestEnv(t)
	f := env.createFabric(1, 1, 2, 2)
	env.createNodes(gpuNode("bare-0", 8).Obj(), gpuNode("bare-1", 8).Obj())

	env.createPodGroup(gangtest.MakePodGroup("pair", env.ns).MinMember(2).Obj())
	pair := env.gangPods("pair", 2, 8)
	env.createPods(pair...)
	nodes := env.waitForBound(bindTimeout, pair...)
	for pod, node := range nodes {
		if f.leafOf[node] == "" {
			t.Errorf("%s landed on unlabelled node %s although a labelled leaf holds the pair", pod, node)
		}
	}

	env.createPodGroup(gangtest.MakePodGroup("spill", env.ns).MinMember(2).Obj())
	spill := env.gangPods("spill", 2, 8)
	env.createPods(spill...)
	env.waitForBound(bindTimeout, spill...)
}

// A PyTorchJob's members are placed in rank order: master-0 and worker-0 on
// one leaf, worker-1 and worker-2 on the other, whatever their pod names.
func TestPyTorchJobRanksStayAdjacent(t *testing.T) {
	env := newTestEnv(t)
	f := env.createFabric(1, 2, 2, 2)
	type member struct{ name, role, index string }
	// Names sort against rank order on purpose.
	ranks := []member{{"z-master", "master", "0"}, {"y-worker", "worker", "0"}, {"x-worker", "worker", "1"}, {"w-worker", "worker", "2"}}
	env.createPodGroup(gangtest.MakePodGroup("ptj", env.ns).MinMember(4).Obj())
	var pods []*v1.Pod
	for _, m := range ranks {
		pods = append(pods, env.gangPod(m.name, "ptj").Res(gpuRequest(8)).
			Label("training.kubeflow.org/replica-type", m.role).Label("training.kubeflow.org/replica-index", m.index).Obj())
	}
	env.createPods(pods...)
	nodes := env.waitForBound(bindTimeout, pods...)
	leaf := func(i int) string { return f.leafOf[nodes[pods[i].Name]] }
	if leaf(0) != leaf(1) || leaf(2) != leaf(3) || leaf(1) == leaf(2) {
		t.Errorf("ranks are not adjacent: master-0 %s, worker-0 %s, worker-1 %s, worker-2 %s", leaf(0), leaf(1), leaf(2), leaf(3))
	}
}
