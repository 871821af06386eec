package coscheduling

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// scores runs the profile's PreFilter, Filter, PreScore and Score for pod,
// as a scheduling cycle does, and returns the gang plugin's score of every
// node that passed Filter; ok is false when the plugin skipped scoring.
func scores(t *testing.T, env *testEnv, pod *v1.Pod) (map[string]int64, bool) {
	t.Helper()
	state := framework.NewCycleState()
	_, status, _ := env.fh.RunPreFilterPlugins(env.ctx, state, pod)
	require.True(t, status.IsSuccess(), "PreFilter: %v", status)
	infos, err := env.snapshot.NodeInfos().List()
	require.NoError(t, err)
	sort.Slice(infos, func(i, j int) bool { return infos[i].Node().Name < infos[j].Node().Name })
	var feasible []fwk.NodeInfo
	for _, ni := range infos {
		if env.fh.RunFilterPlugins(env.ctx, state, pod, ni).IsSuccess() {
			feasible = append(feasible, ni)
		}
	}
	require.True(t, env.fh.RunPreScorePlugins(env.ctx, state, pod, feasible).IsSuccess())
	all, status := env.fh.RunScorePlugins(env.ctx, state, pod, feasible)
	require.True(t, status.IsSuccess(), "Score: %v", status)
	out := map[string]int64{}
	ok := false
	for _, ns := range all {
		for _, s := range ns.Scores {
			if s.Name == Name {
				out[ns.Name], ok = s.Score, true
			}
		}
	}
	return out, ok
}

// A plain GPU pod is scored by the planner's best fit: the used node with
// the least room first, then the rest of its clique, then the other
// domains by how full they are; whole domains last.
func TestPlainGPUPodPacksIntoUsedDomains(t *testing.T) {
	// fabric: 2 spines x 2 leaves x 2 nodes, each leaf one clique. The
	// last leaf in name order is in use.
	env := newTestEnv(t, fabric(), []*v1.Pod{batchPod("notebook", "s1-l1-n0", "3")}, nil, withTopology(t))
	pod := st.MakePod().Namespace("other").Name("p").UID("other/p").Req(map[v1.ResourceName]string{gpu: "1"}).Obj()
	got, ok := scores(t, env, pod)
	require.True(t, ok, "a plain GPU pod is scored")
	require.Len(t, got, 8)
	require.EqualValues(t, fwk.MaxNodeScore, got["s1-l1-n0"], "the used node first: %v", got)
	for node, s := range got {
		if node != "s1-l1-n0" {
			require.LessOrEqual(t, s, fwk.MaxNodeScore/2, "%s: %v", node, got)
		}
	}
	require.Greater(t, got["s1-l1-n1"], got["s1-l0-n0"], "the rest of the used clique before another: %v", got)
	require.Greater(t, got["s1-l0-n0"], got["s0-l0-n0"], "then the used spine before the whole one: %v", got)

	// The scores follow what is bound: once the used node is full, its
	// clique's other node comes first.
	env.assume(batchPod("more", "s1-l1-n0", "5"))
	got, _ = scores(t, env, pod)
	require.NotContains(t, got, "s1-l1-n0", "a full node does not pass Filter")
	require.EqualValues(t, fwk.MaxNodeScore, got["s1-l1-n1"], "%v", got)
}

// Pods that take no accelerators are the stock scheduler's to spread, and
// gang members follow their plan: the plugin does not score them.
func TestScoreSkipsCPUPodsAndMembers(t *testing.T) {
	env := newTestEnv(t, fabric(), nil, nil, withTopology(t))
	cpu := st.MakePod().Namespace("other").Name("cpu").UID("other/cpu").Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj()
	_, ok := scores(t, env, cpu)
	require.False(t, ok, "a CPU-only pod is not scored")

	state := framework.NewCycleState()
	m := member("g", "g-0", "8")
	require.True(t, env.pl.PreScore(env.ctx, state, m, nil).IsSkip(), "a gang member's PreScore is skipped")
}
