package integration

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Plain one-GPU pods go where they leave the most whole domains: into the
// NVLink clique already in use, even when it comes last in name order and
// whole cliques are free, and only into another clique once it is full.
func TestPlainGPUPodsPackIntoTheUsedClique(t *testing.T) {
	env := newTestEnv(t)
	// 2 leaves x 4 nodes of 8 GPUs, cliques of 2 nodes: four cliques. A
	// notebook already runs on the last node of the last clique.
	f := env.createFabric(1, 2, 4, 2)
	used := env.nodeName("s0-l1-n3")
	busy := env.pod("notebook-0").Res(gpuRequest(2)).NodeSelector(map[string]string{v1.LabelHostname: used}).Obj()
	env.createPods(busy)
	env.waitForBound(bindTimeout, busy)

	// 14 more GPUs fill that clique (6 on its used node, 8 on the other);
	// two more go to the next clique of the same leaf.
	var pods []*v1.Pod
	for i := range 16 {
		pods = append(pods, env.pod(fmt.Sprintf("p-%d", i)).Res(gpuRequest(1)).Obj())
	}
	for _, p := range pods[:14] {
		env.createPods(p)
		env.waitForBound(bindTimeout, p)
	}
	nodes := env.waitForBound(bindTimeout, pods[:14]...)
	perNode := map[string]int{}
	for pod, node := range nodes {
		if f.cliqueOf[node] != "s0-l1-c1" {
			t.Errorf("pod %s landed on %s in clique %s, want the used clique s0-l1-c1", pod, node, f.cliqueOf[node])
		}
		perNode[node]++
	}
	if perNode[used] != 6 {
		t.Errorf("the used node %s took %d pods, want 6 (its free GPUs) before the clique's other node: %v", used, perNode[used], perNode)
	}
	env.createPods(pods[14:]...)
	for pod, node := range env.waitForBound(bindTimeout, pods[14:]...) {
		if f.leafOf[node] != "s0-l1" {
			t.Errorf("pod %s landed in leaf %s once its clique was full, want the used leaf s0-l1", pod, f.leafOf[node])
		}
	}
	// Leaf s0-l0 stays whole for a gang that needs it.
	for _, n := range f.nodes {
		if f.leafOf[n] == "s0-l0" {
			env.expectNodeEmpty(n)
		}
	}
}

// expectNodeEmpty fails if any pod of env is bound to node.
func (env *testEnv) expectNodeEmpty(node string) {
	env.t.Helper()
	pods, err := kubeClient.CoreV1().Pods(env.ns).List(env.t.Context(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		env.t.Fatalf("listing pods on %s: %v", node, err)
	}
	if len(pods.Items) > 0 {
		env.t.Errorf("node %s holds %d pods, want it whole", node, len(pods.Items))
	}
}
