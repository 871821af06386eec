package preemption

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/placement/placementtest"
	"github.com/gpu-gang/gpu-gang/pkg/topology"
)

// fourLeaves is 2 spines x 2 leaves x 4 nodes of 8 GPUs, cliques of 2
// nodes, each leaf full with one 4-node gang:
//   - s0-l0: ns/young, priority 5, started a minute ago;
//   - s0-l1: ns/wide, priority 1, 8 GPUs a node, started an hour ago
//     (32 GPUs x 3600 s = 115,200 GPU-seconds);
//   - s1-l0: ns/narrow, priority 1, 4 GPUs a node next to 4 of a
//     priority-200 pod, started 90 minutes ago (16 x 5400 = 86,400);
//   - s1-l1: ns/old, priority 3, started ten hours ago.
//
// The longest running of the priority-1 gangs loses the fewest GPU-seconds.
func fourLeaves() *cluster {
	c := newCluster(placementtest.MakeFabric().Spines(2).LeavesPerSpine(2).NodesPerLeaf(4).CliqueSize(2).Obj())
	c.add(
		makeGang("ns/young").priority(5).startedAgo(time.Minute).on(8, leafNodes("s0-l0", 4)...),
		makeGang("ns/wide").priority(1).startedAgo(time.Hour).on(8, leafNodes("s0-l1", 4)...),
		makeGang("ns/narrow").priority(1).startedAgo(90*time.Minute).on(4, leafNodes("s1-l0", 4)...),
		makeGang("ns/old").priority(3).startedAgo(10*time.Hour).on(8, leafNodes("s1-l1", 4)...),
	)
	for _, n := range leafNodes("s1-l0", 4) {
		c.add(makePod("ns/hi-"+n).priority(200).on(4, n))
	}
	return c
}

// TestDecideClearingOrder pins the cost order after the counts: the
// lowest priority first, then what cannot be recovered (the work of
// victims that are not movable), then the GPU-seconds lost.
func TestDecideClearingOrder(t *testing.T) {
	tests := []struct {
		name        string
		cluster     func() *cluster
		preemptor   *preemptorWrapper
		wantVictims []string
		wantDomain  string
		wantCost    *Cost
	}{
		{
			name:        "equal priorities: least GPU-seconds lost, though it has run longest",
			cluster:     fourLeaves,
			preemptor:   makePreemptor("ns/urgent").workers(4, 4).policy(leafKey, true),
			wantVictims: []string{"whole gang ns/narrow[0 1 2 3]"},
			wantDomain:  "leaf s1-l0",
			wantCost: &Cost{Level: 2, Gangs: 1, MaxPriority: 1, SumPriority: 1,
				UnmovableGPUSeconds: 86400, WorkLostGPUSeconds: 86400, GPUs: 16},
		},
		{
			name: "the lowest priority first, however much work it loses",
			cluster: func() *cluster {
				c := fourLeaves()
				c.units[3].Priority = 0 // ns/old
				return c
			},
			preemptor:   makePreemptor("ns/urgent").workers(4, 4).policy(leafKey, true),
			wantVictims: []string{"whole gang ns/old[0 1 2 3]"},
			wantDomain:  "leaf s1-l1",
			wantCost: &Cost{Level: 2, Gangs: 1, MaxPriority: 0, SumPriority: 0,
				UnmovableGPUSeconds: 1152000, WorkLostGPUSeconds: 1152000, GPUs: 32},
		},
		{
			name: "a movable gang before an equal-priority one that is not, though it loses more",
			cluster: func() *cluster {
				c := fourLeaves()
				c.units[1].Movable = true // ns/wide
				return c
			},
			preemptor:   makePreemptor("ns/urgent").workers(4, 4).policy(leafKey, true),
			wantVictims: []string{"whole gang ns/wide[0 1 2 3]"},
			wantDomain:  "leaf s0-l1",
			wantCost: &Cost{Level: 2, Gangs: 1, MaxPriority: 1, SumPriority: 1,
				UnmovableGPUSeconds: 0, WorkLostGPUSeconds: 115200, GPUs: 32},
		},
		{
			name: "a movable gang of higher priority is spared",
			cluster: func() *cluster {
				c := fourLeaves()
				c.units[0].Movable = true // ns/young, priority 5
				c.units[3].Movable = true // ns/old, priority 3
				return c
			},
			preemptor:   makePreemptor("ns/urgent").workers(4, 4).policy(leafKey, true),
			wantVictims: []string{"whole gang ns/narrow[0 1 2 3]"},
			wantDomain:  "leaf s1-l0",
		},
		{
			name: "among movable gangs, least GPU-seconds lost",
			cluster: func() *cluster {
				c := fourLeaves()
				c.units[1].Movable = true // ns/wide
				c.units[2].Movable = true // ns/narrow
				return c
			},
			preemptor:   makePreemptor("ns/urgent").workers(4, 4).policy(leafKey, true),
			wantVictims: []string{"whole gang ns/narrow[0 1 2 3]"},
			wantDomain:  "leaf s1-l0",
			wantCost: &Cost{Level: 2, Gangs: 1, MaxPriority: 1, SumPriority: 1,
				UnmovableGPUSeconds: 0, WorkLostGPUSeconds: 86400, GPUs: 16},
		},
		{
			name: "a movable elastic member before an equal-priority one that is not",
			cluster: func() *cluster {
				return newCluster(placementtest.MakeFabric().NodesPerLeaf(4).CliqueSize(4).Obj()).add(
					makeGang("ns/rigid").surplus(1).startedAgo(time.Minute).on(8, "s0-l0-n0", "s0-l0-n1"),
					makeGang("ns/ckpt").surplus(1).movable().startedAgo(10*time.Hour).on(8, "s0-l0-n2", "s0-l0-n3"),
				)
			},
			preemptor:   makePreemptor("ns/urgent").workers(1, 8),
			wantVictims: []string{"elastic members ns/ckpt[0]"},
			wantDomain:  "node s0-l0-n2",
			wantCost:    &Cost{Elastic: 1, UnmovableGPUSeconds: 0, WorkLostGPUSeconds: 288000, GPUs: 8},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.preemptor.on(tc.cluster())
			d, err := newTestEngine(t).Decide(t.Context(), req)
			require.NoError(t, err)
			if diff := cmp.Diff(tc.wantVictims, describeVictims(d.Victims)); diff != "" {
				t.Errorf("victims (-want,+got):\n%s\nsummary: %s", diff, d.Summary)
			}
			require.Equal(t, tc.wantDomain, d.Domain.String(), d.Summary)
			require.True(t, d.Exact)
			if tc.wantCost != nil {
				require.Equal(t, *tc.wantCost, d.Cost)
			}
			requirePlanUsesFreedCapacity(t, req, d)
			planner, err := topology.NewPlanner(nvidiaLevels())
			require.NoError(t, err)
			require.Equal(t, exhaustive(t, planner, req).cost, d.Cost, "the exhaustive search agrees")
		})
	}
}

// spanning is 1 spine x 2 leaves x 4 nodes of 8 GPUs, cliques of 2 nodes.
// ns/span runs on the last two nodes of leaf s0-l0 and the first two of
// s0-l1; ns/low fills the rest of s0-l0 and priority-200 pods the rest of
// s0-l1. The only leaf that can be cleared is s0-l0, and only by evicting
// ns/span, two of whose pods run outside it.
func spanning() *cluster {
	return newCluster(placementtest.MakeFabric().LeavesPerSpine(2).NodesPerLeaf(4).CliqueSize(2).Obj()).add(
		makeGang("ns/span").on(8, "s0-l0-n2", "s0-l0-n3", "s0-l1-n0", "s0-l1-n1"),
		makeGang("ns/low").on(8, "s0-l0-n0", "s0-l0-n1"),
		makePod("ns/hi2").priority(200).on(8, "s0-l1-n2"),
		makePod("ns/hi3").priority(200).on(8, "s0-l1-n3"),
	)
}

// TestDecideSpanningGangGoesWhole checks that a gang running in two
// domains is evicted whole, its pods outside the cleared domain too, or
// not at all: never the part inside the domain.
func TestDecideSpanningGangGoesWhole(t *testing.T) {
	tests := []struct {
		name        string
		cluster     func() *cluster
		wantVictims []string
		wantDomain  string
	}{
		{
			name:        "the only clearable leaf: the spanning gang goes whole",
			cluster:     spanning,
			wantVictims: []string{"whole gang ns/low[0 1]", "whole gang ns/span[0 1 2 3]"},
			wantDomain:  "leaf s0-l0",
		},
		{
			name: "another leaf that one gang clears is chosen instead",
			cluster: func() *cluster {
				nodes := placementtest.MakeFabric().Spines(2).LeavesPerSpine(2).NodesPerLeaf(4).CliqueSize(2).Obj()
				return newCluster(nodes).add(
					makeGang("ns/span").on(8, "s0-l0-n2", "s0-l0-n3", "s0-l1-n0", "s0-l1-n1"),
					makeGang("ns/low").on(8, "s0-l0-n0", "s0-l0-n1"),
					makePod("ns/hi2").priority(200).on(8, "s0-l1-n2"),
					makePod("ns/hi3").priority(200).on(8, "s0-l1-n3"),
					// Older and larger: it loses more work, but it is one
					// gang where s0-l0 costs two.
					makeGang("ns/other").startedAgo(10*time.Hour).on(8, leafNodes("s1-l0", 4)...),
					makeGang("ns/busy").priority(200).on(8, leafNodes("s1-l1", 4)...),
				)
			},
			wantVictims: []string{"whole gang ns/other[0 1 2 3]"},
			wantDomain:  "leaf s1-l0",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := makePreemptor("ns/urgent").workers(4, 8).policy(leafKey, true).on(tc.cluster())
			d, err := newTestEngine(t).Decide(t.Context(), req)
			require.NoError(t, err)
			if diff := cmp.Diff(tc.wantVictims, describeVictims(d.Victims)); diff != "" {
				t.Errorf("victims (-want,+got):\n%s\nsummary: %s", diff, d.Summary)
			}
			require.Equal(t, tc.wantDomain, d.Domain.String(), d.Summary)
			for _, v := range d.Victims {
				if v.Kind == WholeGang {
					require.Len(t, v.Pods, len(req.Units[v.Unit].Pods), "%s goes whole", v.Name)
				} else {
					require.NotEqual(t, ElasticMembers, v.Kind, "%s has no surplus", v.Name)
				}
			}
			requirePlanUsesFreedCapacity(t, req, d)
		})
	}
}
