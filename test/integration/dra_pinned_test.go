package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A running gang's replacement whose members share a claim allocated on
// one node, and which also takes a claim of its own: the shared claim's
// devices are on that node, so the replacement may run only there. With
// that node full, it waits, without being planned onto the other node
// (where DynamicResources would turn it away), and its PodScheduled
// condition names the claim and the node; once room frees up there, it
// binds there.
func TestDRAReplacementStaysOnSharedClaimsNode(t *testing.T) {
	env := newDRAEnv(t, gpuClass(true))
	env.draNodes(h100DRA, "n0", "n1")
	env.createClaimTemplate("gpu-2", gpuClaimSpec(2))
	env.createClaimTemplate("gpu-4", gpuClaimSpec(4))
	env.createClaim("shared", gpuClaimSpec(1))

	// Both members share the claim, so they are planned on one node: 1 + 2
	// + 2 of its 8 GPUs.
	members := env.claimGang("job", 2, nil, func(int) []v1.PodResourceClaim {
		return []v1.PodResourceClaim{namedClaim("shared", "shared"), fromTemplate("gpus", "gpu-2")}
	})
	nodes := env.waitForBound(bindTimeout, members...)
	pinned := nodes[members[0].Name]
	if nodes[members[1].Name] != pinned {
		t.Fatalf("the members sharing a claim are on different nodes: %v", nodes)
	}
	// A member is lost, and another workload takes 4 of the 5 GPUs left
	// on that node: 1 is left, the replacement's own claim needs 2.
	env.deleteAndWait(members[1])
	busy := env.claimPod("busy", fromTemplate("gpus", "gpu-4"))
	busy.Spec.NodeSelector = map[string]string{v1.LabelHostname: pinned}
	env.createPods(busy)
	env.waitForBound(bindTimeout, busy)

	r := replacement(members[1])
	env.createPods(r)
	env.waitForClaimsCreated(r)
	env.expectStaysUnbound(staysUnboundWindow, r)
	env.expectNoDRARejections(r)
	want := fmt.Sprintf("may run only on node %s, which holds the devices of its allocated ResourceClaim %s/shared", pinned, env.ns)
	var msg string
	err := waitFor(t.Context(), eventTimeout, func(ctx context.Context) (bool, error) {
		got, err := kubeClient.CoreV1().Pods(env.ns).Get(ctx, r.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse {
				msg = c.Message
			}
		}
		return strings.Contains(msg, want), nil
	})
	if err != nil {
		t.Fatalf("waiting %s for the replacement's PodScheduled condition to name the claim and its node: %v (last message %q)", eventTimeout, err, msg)
	}
	t.Logf("the replacement waits: %s", msg)

	env.deleteAndWait(busy)
	nodes = env.waitForBound(retryBindTimeout, r)
	if nodes[r.Name] != pinned {
		t.Errorf("the replacement is on %s, away from its shared claim's node %s", nodes[r.Name], pinned)
	}
	env.expectNoDRARejections(r)
}
