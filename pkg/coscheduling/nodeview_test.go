package coscheduling

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// TestNodeViewReadsWhatChanged checks the view's vectors against a fresh
// read of every node, plan after plan, while pods land on random nodes (the
// NodeInfo's generation moves), holds come and go, and the plan's
// dimensions change. The generations lent with the nodes must be the
// NodeInfos' own, also after a pod landed while the nodes were lent.
func TestNodeViewReadsWhatChanged(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 3))
	nodes, running := randomFleet(r, 48)
	env := newTestEnv(t, nodes, running, nil)
	list, err := env.snapshot.NodeInfos().List()
	require.NoError(t, err)
	dimsOf := [][]v1.ResourceName{{gpu}, {v1.ResourceCPU, gpu, v1.ResourcePods}}
	// land puts a pod on a random node: its generation moves.
	land := func(sorted []fwk.NodeInfo, tag string) {
		ni, ok := sorted[r.IntN(len(sorted))].(*framework.NodeInfo)
		require.True(t, ok)
		p := st.MakePod().Namespace("other").Name("land-" + tag).UID("land-" + tag).
			Node(ni.Node().Name).Req(map[v1.ResourceName]string{gpu: "1", v1.ResourceCPU: "1"}).Obj()
		pi, err := framework.NewPodInfo(p)
		require.NoError(t, err)
		ni.AddPodInfo(pi)
	}
	for round := range 20 {
		sorted := env.pl.core.Snapshot().Live(list, env.pl.core.NodeGeneration(), env.pl.core.LiveNodes)
		require.Same(t, &sorted[0], &env.pl.core.Snapshot().Live(list, env.pl.core.NodeGeneration(), env.pl.core.LiveNodes)[0], "an unchanged snapshot keeps its order")
		dims := dimsOf[(round/5)%2] // kept for five rounds, so that the view reuses them
		cols := make([]dra.Column, len(dims))
		for i, d := range dims {
			cols[i].Name = d
		}
		// A hold on a node the snapshot no longer has changes nothing.
		held := map[string]capacity.Amounts{"gone": {gpu: 1}}
		for range r.IntN(4) {
			held[sorted[r.IntN(len(sorted))].Node().Name] = capacity.Amounts{gpu: int64(1 + r.IntN(4)), v1.ResourceCPU: 500}
		}
		want := readFresh(env.ctx, sorted, cols, held)
		got, gens, _, release := env.pl.core.Snapshot().Nodes(env.ctx, sorted, dims, cols, held, true)
		require.Empty(t, cmp.Diff(want, got, ignoreLabelsVersions), "round %d (-fresh,+view)", round)
		require.Len(t, gens, len(sorted), "round %d: a lent list comes with its generations", round)
		for i, ni := range sorted {
			require.Equal(t, ni.GetGeneration(), gens[i], "round %d: node %s", round, ni.Node().Name)
		}
		// While the view's slice is lent, a second plan gets a copy, and
		// the lent slice does not change under the first.
		if round%3 == 0 {
			// A pod lands first: the copy reads its node again, which the
			// next lease must not miss.
			land(sorted, fmt.Sprint("lent-", round))
			other := map[string]capacity.Amounts{sorted[r.IntN(len(sorted))].Node().Name: {gpu: 2}}
			again, againGens, _, rel := env.pl.core.Snapshot().Nodes(env.ctx, sorted, dims, cols, other, true)
			require.NotSame(t, &got[0], &again[0], "round %d: a lent slice is not lent twice", round)
			require.Nil(t, againGens, "round %d: a copy comes without generations", round)
			require.Empty(t, cmp.Diff(readFresh(env.ctx, sorted, cols, other), again, ignoreLabelsVersions), "round %d: the copy (-fresh,+view)", round)
			rel()
			require.Empty(t, cmp.Diff(want, got, ignoreLabelsVersions), "round %d: the lent slice changed under its plan (-fresh,+view)", round)
		}
		release()
		land(sorted, fmt.Sprint(round))
	}
}

// ignoreLabelsVersions leaves out of a comparison the labels versions the view
// gives its nodes, which a fresh read (unversioned) does not.
var ignoreLabelsVersions = cmpopts.IgnoreFields(placement.Node{}, "LabelsVersion")

// TestNodeViewLabelsEpoch checks the labels epoch the view gives its nodes:
// kept while pods land (generations move, labels do not), new when a node's
// labels change, and zero for nodes that are not the view's.
func TestNodeViewLabelsEpoch(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 9))
	nodes, running := randomFleet(r, 16)
	env := newTestEnv(t, nodes, running, nil)
	list, err := env.snapshot.NodeInfos().List()
	require.NoError(t, err)
	dims := []v1.ResourceName{gpu}
	cols := []dra.Column{{Name: gpu}}
	sorted := env.pl.core.Snapshot().Live(list, env.pl.core.NodeGeneration(), env.pl.core.LiveNodes)
	epochNow := func() uint64 {
		_, _, epoch, release := env.pl.core.Snapshot().Nodes(env.ctx, sorted, dims, cols, nil, true)
		release()
		return epoch
	}
	first := epochNow()
	require.NotZero(t, first)
	require.Equal(t, first, epochNow(), "nothing changed")

	ni, ok := sorted[3].(*framework.NodeInfo)
	require.True(t, ok)
	pi, err := framework.NewPodInfo(st.MakePod().Namespace("other").Name("lands").UID("lands").Node(ni.Node().Name).Obj())
	require.NoError(t, err)
	ni.AddPodInfo(pi)
	require.Equal(t, first, epochNow(), "a pod landed: the labels did not change")

	relabelled := ni.Node().DeepCopy()
	relabelled.Labels["gpu-gang.x-k8s.io/test"] = "moved"
	ni.SetNode(relabelled)
	second := epochNow()
	require.NotEqual(t, first, second, "a node's labels changed")
	require.Equal(t, second, epochNow())

	_, _, epoch, release := env.pl.core.Snapshot().Nodes(env.ctx, sorted[1:], dims, cols, nil, true)
	release()
	require.Zero(t, epoch, "nodes other than the view's have no epoch")
}
