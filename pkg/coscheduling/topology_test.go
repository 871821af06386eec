package coscheduling

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
	"github.com/gpu-gang/gpu-gang/pkg/topology"
)

const (
	cliqueLabel = "nvidia.com/gpu.clique"
	leafLabel   = "network.topology.nvidia.com/leaf"
	spineLabel  = "network.topology.nvidia.com/spine"
)

func withTopology(t testing.TB) envOption {
	levels, err := scheduling.ResolveLevels(scheduling.DefaultPreset, nil)
	require.NoError(t, err)
	planner, err := topology.NewPlanner(levels)
	require.NoError(t, err)
	return func(c *envConfig) { c.planner = planner }
}

// fabric is 2 spines × 2 leaves × 2 nodes; each leaf is one NVLink clique.
// Nodes are named s<spine>-l<leaf>-n<node>.
func fabric() []*v1.Node {
	var nodes []*v1.Node
	for s := 0; s < 2; s++ {
		for l := 0; l < 2; l++ {
			leaf := fmt.Sprintf("s%d-l%d", s, l)
			for n := 0; n < 2; n++ {
				node := gpuNode(fmt.Sprintf("%s-n%d", leaf, n))
				node.Labels = map[string]string{spineLabel: fmt.Sprintf("s%d", s), leafLabel: leaf, cliqueLabel: "c-" + leaf}
				nodes = append(nodes, node)
			}
		}
	}
	return nodes
}

func busy(node string) *v1.Pod { return batchPod("busy-"+node, node, "8") }

// plannedNodes runs PreFilter for every member and returns the nodes each
// one is restricted to.
func plannedNodes(t *testing.T, env *testEnv, pods []*v1.Pod) []string {
	t.Helper()
	var out []string
	for _, p := range pods {
		res, status, _ := env.fh.RunPreFilterPlugins(env.ctx, framework.NewCycleState(), p)
		require.True(t, status.IsSuccess(), "%s: %v", p.Name, status)
		require.Len(t, res.NodeNames, 1, "%s must be pinned to its planned node", p.Name)
		out = append(out, res.NodeNames.UnsortedList()[0])
	}
	return out
}

func TestTopologyPlacement(t *testing.T) {
	t.Run("a gang that fits a leaf lands in the fullest leaf that holds it", func(t *testing.T) {
		// s0-l0 has one busy node, so it cannot hold two; s0-l1 can and is
		// the first whole leaf; a 1-pod gang takes the free half of s0-l0.
		pair := members("pair", 2, "8")
		single := members("single", 1, "8")
		env := newTestEnv(t, fabric(), append(append([]*v1.Pod{busy("s0-l0-n0")}, pair...), single...),
			[]*v1alpha1.PodGroup{
				gangtest.MakePodGroup("pair", testNS).MinMember(2).Obj(),
				gangtest.MakePodGroup("single", testNS).MinMember(1).Obj(),
			}, withTopology(t))
		require.ElementsMatch(t, []string{"s0-l1-n0", "s0-l1-n1"}, plannedNodes(t, env, pair))
		require.Equal(t, []string{"s0-l0-n1"}, plannedNodes(t, env, single))
	})

	t.Run("a required level no domain meets now waits with an Event", func(t *testing.T) {
		var existing []*v1.Pod
		for _, n := range []string{"s0-l0-n0", "s0-l1-n0", "s1-l0-n0", "s1-l1-n0"} {
			existing = append(existing, busy(n))
		}
		pair := members("pair", 2, "8")
		env := newTestEnv(t, fabric(), append(existing, pair...), []*v1alpha1.PodGroup{
			gangtest.MakePodGroup("pair", testNS).MinMember(2).Annotation(scheduling.AnnotationTopologyRequired, leafLabel).Obj(),
		}, withTopology(t))
		_, status, _ := env.fh.RunPreFilterPlugins(env.ctx, framework.NewCycleState(), pair[0])
		require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
		require.True(t, hasEvent(env.recorded(), ReasonTopologyUnsatisfied, "no single domain of level "+leafLabel))
	})

	t.Run("a preferred level falls back up to the spine", func(t *testing.T) {
		var existing []*v1.Pod
		for _, n := range []string{"s0-l0-n0", "s0-l1-n0", "s1-l0-n0", "s1-l1-n0"} {
			existing = append(existing, busy(n))
		}
		pair := members("pair", 2, "8")
		pair[0].Annotations = map[string]string{scheduling.KueuePreferredTopologyAnnotation: leafLabel}
		env := newTestEnv(t, fabric(), append(existing, pair...), []*v1alpha1.PodGroup{
			gangtest.MakePodGroup("pair", testNS).MinMember(2).Obj(),
		}, withTopology(t))
		got := plannedNodes(t, env, pair)
		require.Equal(t, got[0][:2], got[1][:2], "both members must share a spine: %v", got)
	})

	t.Run("a level the scheduler does not know is an invalid PodGroup", func(t *testing.T) {
		pair := members("pair", 2, "8")
		env := newTestEnv(t, fabric(), pair, []*v1alpha1.PodGroup{
			gangtest.MakePodGroup("pair", testNS).MinMember(2).Annotation(scheduling.AnnotationTopologyRequired, "example.com/rack").Obj(),
		}, withTopology(t))
		_, status, _ := env.fh.RunPreFilterPlugins(env.ctx, framework.NewCycleState(), pair[0])
		require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "%v", status)
		require.True(t, hasEvent(env.recorded(), ReasonInvalidPodGroup, `"example.com/rack"`))
	})

	t.Run("neighbouring ranks of a PyTorchJob share a leaf", func(t *testing.T) {
		// Four whole-node members fill one spine: ranks 0-1 must share one
		// leaf and ranks 2-3 the other, whatever order the pods came in.
		var job []*v1.Pod
		for i, role := range []string{"worker", "worker", "master", "worker"} {
			p := member("ptj", fmt.Sprintf("ptj-%s-%d", role, i), "8")
			p.Labels[scheduling.KubeflowReplicaTypeLabel] = role
			idx := i
			if role == "worker" && i == 3 {
				idx = 2
			}
			if role == "master" {
				idx = 0
			}
			p.Labels[scheduling.KubeflowReplicaIndexLabel] = fmt.Sprint(idx)
			job = append(job, p)
		}
		// Ranks: master-0, worker-0, worker-1, worker-2.
		byRank := []*v1.Pod{job[2], job[0], job[1], job[3]}
		env := newTestEnv(t, fabric(), job, []*v1alpha1.PodGroup{
			gangtest.MakePodGroup("ptj", testNS).MinMember(4).Obj(),
		}, withTopology(t))
		got := plannedNodes(t, env, byRank)
		leaf := func(node string) string { return node[:len("s0-l0")] }
		require.Equal(t, leaf(got[0]), leaf(got[1]), "ranks 0 and 1: %v", got)
		require.Equal(t, leaf(got[2]), leaf(got[3]), "ranks 2 and 3: %v", got)
		require.NotEqual(t, leaf(got[1]), leaf(got[2]), "a leaf holds two whole-node members: %v", got)
	})
}

func TestLostNodeReplansTheGang(t *testing.T) {
	// A pair is planned onto two nodes; one member reserves and waits, then
	// the other member's planned node disappears. The gang must not be
	// stranded: it gives back what it reserved and, after its backoff,
	// plans again on the nodes that are left.
	pair := members("pair", 2, "8")
	env := newTestEnv(t, gpuNodes(3), pair, []*v1alpha1.PodGroup{
		gangtest.MakePodGroup("pair", testNS).MinMember(2).Obj(),
	})
	n0, status := env.schedule(pair[0])
	require.Equal(t, fwk.Wait, status.Code(), "%v", status)
	w0 := env.waitAsync(pair[0], n0)
	planned, _ := env.ledger().Reservations.PlanSlots(gang.Key{Namespace: testNS, Name: "pair"}, pair[1].UID, capacity.PodAmounts(pair[1]))
	require.Len(t, planned, 1)

	// The planned node of the second member is lost.
	var kept []*v1.Node
	for _, n := range env.nodes {
		if n.Name != planned[0] {
			kept = append(kept, n)
		}
	}
	env.nodes = kept
	env.forget(&v1.Pod{}) // rebuild the snapshot without the node

	_, status = env.schedule(pair[1])
	require.False(t, status.IsSuccess(), "the member cannot follow a plan onto a lost node")
	require.False(t, (<-w0).IsSuccess(), "the waiting member must be released, not stranded")
	env.forget(pair[0])
	require.True(t, hasEvent(env.recorded(), ReasonGangRejected, "could not be placed"))

	env.clock.Step(2 * time.Second) // the backoff
	n0, status = env.schedule(pair[0])
	require.Equal(t, fwk.Wait, status.Code(), "replan: %v", status)
	w0 = env.waitAsync(pair[0], n0)
	n1, status := env.schedule(pair[1])
	require.True(t, status.IsSuccess(), "replan: %v", status)
	require.True(t, (<-w0).IsSuccess())
	require.NotEqual(t, planned[0], n1)
	require.NotEqual(t, planned[0], n0)
}
