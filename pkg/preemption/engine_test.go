package preemption

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/placement/placementtest"
	"github.com/gpu-gang/gpu-gang/pkg/topology"
)

// headline is the case: 16 nodes x 8 GPUs (2 spines x 2 leaves x 4
// nodes, cliques of 2 nodes), each leaf full with one low-priority 4-node
// gang.
func headline() *cluster {
	return newCluster(placementtest.MakeFabric().Spines(2).LeavesPerSpine(2).NodesPerLeaf(4).CliqueSize(2).Obj()).add(
		makeGang("ns/a").priority(1).on(8, leafNodes("s0-l0", 4)...),
		makeGang("ns/b").priority(1).on(8, leafNodes("s0-l1", 4)...),
		makeGang("ns/c").priority(1).on(8, leafNodes("s1-l0", 4)...),
		makeGang("ns/d").priority(1).on(8, leafNodes("s1-l1", 4)...),
	)
}

// leafNodes names the first n nodes of a leaf.
func leafNodes(leaf string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-n%d", leaf, i)
	}
	return out
}

// describeVictims renders victims as "kind name[pods]" for comparison.
func describeVictims(vs []Victim) []string {
	var out []string
	for _, v := range vs {
		out = append(out, fmt.Sprintf("%s %s%v", v.Kind, v.Name, v.Pods))
	}
	return out
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name        string
		cluster     func() *cluster
		preemptor   *preemptorWrapper
		wantVictims []string
		wantDomain  string
		wantCost    *Cost
		wantReason  Reason
	}{
		{
			name:        "headline: an 8-node gang evicts two whole gangs inside one spine",
			cluster:     headline,
			preemptor:   makePreemptor("ns/big").workers(8, 8),
			wantVictims: []string{"whole gang ns/a[0 1 2 3]", "whole gang ns/b[0 1 2 3]"},
			wantDomain:  "spine s0",
			wantCost:    &Cost{Level: 3, Gangs: 2, MaxPriority: 1, SumPriority: 2, UnmovableGPUSeconds: 230400, WorkLostGPUSeconds: 230400, GPUs: 64},
		},
		{
			name: "headline: the spine whose gangs started last",
			cluster: func() *cluster {
				c := headline()
				c.units[2].Started = now.Add(-time.Minute)
				c.units[3].Started = now.Add(-time.Minute)
				return c
			},
			preemptor:   makePreemptor("ns/big").workers(8, 8),
			wantVictims: []string{"whole gang ns/c[0 1 2 3]", "whole gang ns/d[0 1 2 3]"},
			wantDomain:  "spine s1",
		},
		{
			name: "headline: a spine holding a higher-priority gang is left alone",
			cluster: func() *cluster {
				c := headline()
				c.units[1].Priority = 100
				return c
			},
			preemptor:   makePreemptor("ns/big").workers(8, 8),
			wantVictims: []string{"whole gang ns/c[0 1 2 3]", "whole gang ns/d[0 1 2 3]"},
			wantDomain:  "spine s1",
		},
		{
			name: "headline: equal sets go by name, not by domain order",
			cluster: func() *cluster {
				c := headline()
				for u, name := range []string{"ns/y", "ns/z", "ns/a", "ns/b"} {
					c.units[u].Name = name
				}
				return c
			},
			preemptor:   makePreemptor("ns/big").workers(8, 8),
			wantVictims: []string{"whole gang ns/a[0 1 2 3]", "whole gang ns/b[0 1 2 3]"},
			wantDomain:  "spine s1",
		},
		{
			name: "equal sets inside one domain go by name, whatever greedy found first",
			cluster: func() *cluster {
				return newCluster(placementtest.MakeFabric().NodesPerLeaf(4).CliqueSize(4).Obj()).add(
					makeGang("ns/d").on(8, "s0-l0-n0"),
					makeGang("ns/c").on(8, "s0-l0-n1"),
					makeGang("ns/b").on(8, "s0-l0-n2"),
					makeGang("ns/a").on(8, "s0-l0-n3"),
				)
			},
			preemptor:   makePreemptor("ns/two").workers(2, 8),
			wantVictims: []string{"whole gang ns/a[0]", "whole gang ns/b[0]"},
			wantDomain:  "NVLink domain s0-l0-c0",
		},
		{
			name:        "a 4-node gang takes one leaf, not half of two",
			cluster:     headline,
			preemptor:   makePreemptor("ns/mid").workers(4, 8),
			wantVictims: []string{"whole gang ns/a[0 1 2 3]"},
			wantDomain:  "leaf s0-l0",
		},
		{
			name: "lowest priority first",
			cluster: func() *cluster {
				c := headline()
				c.units[0].Priority = 5
				c.units[2].Priority = 0
				return c
			},
			preemptor:   makePreemptor("ns/mid").workers(4, 8),
			wantVictims: []string{"whole gang ns/c[0 1 2 3]"},
			wantDomain:  "leaf s1-l0",
		},
		{
			name: "a tighter domain beats fewer victims: one clique with two gangs over one leaf with one",
			cluster: func() *cluster {
				// Leaf s0-l1 frees two nodes by evicting ns/z alone, but
				// they sit in different cliques.
				return newCluster(placementtest.MakeFabric().LeavesPerSpine(2).NodesPerLeaf(4).CliqueSize(2).Obj()).add(
					makeGang("ns/x").on(8, "s0-l0-n0", "s0-l0-n2"),
					makeGang("ns/y").on(8, "s0-l0-n1", "s0-l0-n3"),
					makeGang("ns/z").on(8, "s0-l1-n1", "s0-l1-n2"),
					makePod("ns/hi0").priority(100).on(8, "s0-l1-n0"),
					makePod("ns/hi3").priority(100).on(8, "s0-l1-n3"),
				)
			},
			preemptor:   makePreemptor("ns/pair").workers(2, 8),
			wantVictims: []string{"whole gang ns/x[0 1]", "whole gang ns/y[0 1]"},
			wantDomain:  "NVLink domain s0-l0-c0",
		},
		{
			name: "required NVLink domain: victims only from one clique, never a cheaper scatter (KAI #1591)",
			cluster: func() *cluster {
				// Every clique holds one node of ns/wide and one of a
				// 1-node gang; evicting ns/wide alone frees one node per
				// clique, enough for 2 nodes only across cliques.
				return newCluster(placementtest.MakeFabric().LeavesPerSpine(1).NodesPerLeaf(4).CliqueSize(2).Obj()).add(
					makeGang("ns/wide").on(8, "s0-l0-n0", "s0-l0-n2"),
					makeGang("ns/p").startedAgo(time.Minute).on(8, "s0-l0-n1"),
					makeGang("ns/q").on(8, "s0-l0-n3"),
				)
			},
			preemptor:   makePreemptor("ns/pair").workers(2, 8).policy(cliqueKey, true),
			wantVictims: []string{"whole gang ns/p[0]", "whole gang ns/wide[0 1]"},
			wantDomain:  "NVLink domain s0-l0-c0",
			wantCost:    &Cost{Level: 1, Gangs: 2, SumPriority: 0, UnmovableGPUSeconds: 58080, WorkLostGPUSeconds: 58080, GPUs: 24},
		},
		{
			name: "preferred NVLink domain falls back to one leaf with fewer victims",
			cluster: func() *cluster {
				c := newCluster(placementtest.MakeFabric().LeavesPerSpine(1).NodesPerLeaf(4).CliqueSize(2).Obj()).add(
					makeGang("ns/wide").on(8, "s0-l0-n0", "s0-l0-n2"),
					makeGang("ns/p").priority(100).on(8, "s0-l0-n1"),
					makeGang("ns/q").priority(100).on(8, "s0-l0-n3"),
				)
				return c
			},
			preemptor:   makePreemptor("ns/pair").workers(2, 8).policy(cliqueKey, false),
			wantVictims: []string{"whole gang ns/wide[0 1]"},
			wantDomain:  "leaf s0-l0",
		},
		{
			name: "required leaf needs one whole leaf",
			cluster: func() *cluster {
				return newCluster(placementtest.MakeFabric().Spines(1).LeavesPerSpine(2).NodesPerLeaf(4).CliqueSize(2).Obj()).add(
					makeGang("ns/a").on(8, "s0-l0-n0", "s0-l0-n1"),
					makeGang("ns/b").on(8, "s0-l0-n2", "s0-l0-n3"),
					makeGang("ns/c").on(8, "s0-l1-n0", "s0-l1-n1"),
					makeGang("ns/d").priority(200).on(8, "s0-l1-n2", "s0-l1-n3"),
				)
			},
			preemptor:   makePreemptor("ns/leaf").workers(4, 8).policy(leafKey, true),
			wantVictims: []string{"whole gang ns/a[0 1]", "whole gang ns/b[0 1]"},
			wantDomain:  "leaf s0-l0",
		},
		{
			name: "required leaf where no leaf can be cleared: nothing, though the spine could",
			cluster: func() *cluster {
				return newCluster(placementtest.MakeFabric().Spines(1).LeavesPerSpine(2).NodesPerLeaf(4).CliqueSize(2).Obj()).add(
					makeGang("ns/a").on(8, "s0-l0-n0", "s0-l0-n1"),
					makeGang("ns/b").on(8, "s0-l1-n0", "s0-l1-n1"),
					makePod("ns/keep0").priority(200).on(8, "s0-l0-n3"),
					makePod("ns/keep1").priority(200).on(8, "s0-l1-n3"),
				)
			},
			preemptor:  makePreemptor("ns/leaf").workers(4, 8).policy(leafKey, true),
			wantReason: ReasonNoVictimSet,
		},
		{
			name: "a plain pod takes one elastic member and leaves the gang running",
			cluster: func() *cluster {
				return newCluster(placementtest.MakeFabric().NodesPerLeaf(4).CliqueSize(2).Obj()).add(
					makeGang("ns/elastic").surplus(2).on(8, leafNodes("s0-l0", 4)...),
				)
			},
			preemptor:   makePreemptor("ns/urgent").workers(1, 8),
			wantVictims: []string{"elastic members ns/elastic[0]"},
			wantDomain:  "node s0-l0-n0",
			wantCost:    &Cost{Elastic: 1, SumPriority: 0, UnmovableGPUSeconds: 28800, WorkLostGPUSeconds: 28800, GPUs: 8},
		},
		{
			name: "elastic members go before a cheaper whole gang",
			cluster: func() *cluster {
				return newCluster(placementtest.MakeFabric().NodesPerLeaf(4).CliqueSize(4).Obj()).add(
					makeGang("ns/elastic").priority(5).surplus(1).on(8, "s0-l0-n0", "s0-l0-n1"),
					makeGang("ns/rigid").priority(0).startedAgo(time.Minute).on(8, "s0-l0-n2", "s0-l0-n3"),
				)
			},
			preemptor:   makePreemptor("ns/urgent").workers(1, 8),
			wantVictims: []string{"elastic members ns/elastic[0]"},
			wantDomain:  "node s0-l0-n0",
		},
		{
			name: "more members than the surplus: the whole gang",
			cluster: func() *cluster {
				return newCluster(placementtest.MakeFabric().NodesPerLeaf(4).CliqueSize(4).Obj()).add(
					makeGang("ns/elastic").surplus(1).on(8, leafNodes("s0-l0", 4)...),
				)
			},
			preemptor:   makePreemptor("ns/two").workers(2, 8),
			wantVictims: []string{"whole gang ns/elastic[0 1 2 3]"},
			wantDomain:  "NVLink domain s0-l0-c0",
		},
		{
			name: "a kept member never goes alone",
			cluster: func() *cluster {
				return newCluster(placementtest.MakeFabric().NodesPerLeaf(2).CliqueSize(2).Obj()).add(
					makeGang("ns/mpi").surplus(1).on(8, "s0-l0-n0").keepLast().on(8, "s0-l0-n1"),
				)
			},
			preemptor:   makePreemptor("ns/urgent").workers(1, 8).policy(scheduling.HostnameKey, true),
			wantVictims: []string{"elastic members ns/mpi[1]"},
			wantDomain:  "node s0-l0-n1",
		},
		{
			name: "a replacement preempts next to its running gang, not where it is cheapest",
			cluster: func() *cluster {
				return newCluster(placementtest.MakeFabric().LeavesPerSpine(2).NodesPerLeaf(2).CliqueSize(2).Obj()).add(
					makeGang("ns/self").priority(100).on(8, "s0-l1-n0"),
					makeGang("ns/near").startedAgo(10*time.Hour).on(8, "s0-l1-n1"),
					makeGang("ns/far").startedAgo(time.Minute).on(8, "s0-l0-n0"),
					makeGang("ns/busy").priority(100).on(8, "s0-l0-n1"),
				)
			},
			preemptor:   makePreemptor("ns/self").workers(1, 8).anchoredAt("s0-l1-n0"),
			wantVictims: []string{"whole gang ns/near[0]"},
			wantDomain:  "NVLink domain s0-l1-c0",
			wantCost:    &Cost{Level: 1, Gangs: 1, SumPriority: 0, UnmovableGPUSeconds: 288000, WorkLostGPUSeconds: 288000, GPUs: 8},
		},
		{
			name: "members that exclude each other need a node each",
			cluster: func() *cluster {
				return newCluster(placementtest.MakeFabric().NodesPerLeaf(2).CliqueSize(2).Obj()).add(
					makeGang("ns/a").startedAgo(time.Minute).on(8, "s0-l0-n0"),
					makePod("ns/b1").startedAgo(2*time.Minute).on(4, "s0-l0-n1"),
					makePod("ns/b2").startedAgo(3*time.Minute).on(4, "s0-l0-n1"),
				)
			},
			preemptor:   makePreemptor("ns/spread").workers(2, 4).maxPerNode(1),
			wantVictims: []string{"plain pod ns/b1[0]", "whole gang ns/a[0]"},
			wantDomain:  "NVLink domain s0-l0-c0",
		},
		{
			name:       "equal priority preempts nothing",
			cluster:    headline,
			preemptor:  makePreemptor("ns/big").priority(1).workers(8, 8),
			wantReason: ReasonNoCandidates,
		},
		{
			name:       "preemptionPolicy Never preempts nothing",
			cluster:    headline,
			preemptor:  makePreemptor("ns/big").never().workers(8, 8),
			wantReason: ReasonPolicyNever,
		},
		{
			name: "fits without preemption",
			cluster: func() *cluster {
				return newCluster(placementtest.MakeFabric().NodesPerLeaf(4).CliqueSize(2).Obj()).add(
					makeGang("ns/a").on(8, "s0-l0-n0"),
				)
			},
			preemptor:  makePreemptor("ns/small").workers(2, 8),
			wantReason: ReasonFits,
		},
		{
			name: "a set that violates no PDB beats one with fewer gangs that does",
			cluster: func() *cluster {
				c := newCluster(placementtest.MakeFabric().LeavesPerSpine(2).NodesPerLeaf(2).CliqueSize(2).Obj())
				b := c.pdb("ns/protect-a", 0)
				return c.add(
					makeGang("ns/a").on(8, "s0-l0-n0", "s0-l0-n1").underPDB(b),
					makeGang("ns/b").on(8, "s0-l1-n0"),
					makeGang("ns/c").on(8, "s0-l1-n1"),
				)
			},
			preemptor:   makePreemptor("ns/two").workers(2, 8),
			wantVictims: []string{"whole gang ns/b[0]", "whole gang ns/c[0]"},
			wantDomain:  "NVLink domain s0-l1-c0",
		},
		{
			name: "a PDB is violated when no other set exists, as few times as can be",
			cluster: func() *cluster {
				c := newCluster(placementtest.MakeFabric().LeavesPerSpine(2).NodesPerLeaf(2).CliqueSize(2).Obj())
				b := c.pdb("ns/protect", 1)
				return c.add(
					makeGang("ns/a").on(8, "s0-l0-n0", "s0-l0-n1").underPDB(b),
					makeGang("ns/b").on(8, "s0-l1-n0", "s0-l1-n1", "").underPDB(b),
				)
			},
			preemptor:   makePreemptor("ns/two").workers(2, 8),
			wantVictims: []string{"whole gang ns/a[0 1]"},
			wantDomain:  "NVLink domain s0-l0-c0",
			wantCost:    &Cost{Violations: 1, Level: 1, Gangs: 1, SumPriority: 0, UnmovableGPUSeconds: 57600, WorkLostGPUSeconds: 57600, GPUs: 16},
		},
		{
			name: "fewest GPUs breaks a tie when no work is lost",
			cluster: func() *cluster {
				return newCluster(placementtest.MakeFabric().LeavesPerSpine(2).NodesPerLeaf(1).Obj()).add(
					makeGang("ns/big").notStarted().on(8, "s0-l0-n0").on(8, ""),
					makeGang("ns/small").notStarted().on(4, "s0-l1-n0").on(4, "s0-l1-n0"),
				)
			},
			preemptor:   makePreemptor("ns/one").workers(1, 8),
			wantVictims: []string{"whole gang ns/small[0 1]"},
			wantDomain:  "node s0-l1-n0",
		},
		{
			name: "a victim gang that straddles the domain goes whole",
			cluster: func() *cluster {
				return newCluster(placementtest.MakeFabric().LeavesPerSpine(2).NodesPerLeaf(2).CliqueSize(2).Obj()).add(
					makeGang("ns/across").on(8, "s0-l0-n1", "s0-l1-n0"),
					makeGang("ns/in").priority(50).on(8, "s0-l0-n0"),
					makeGang("ns/other").priority(50).on(8, "s0-l1-n1"),
				)
			},
			preemptor:   makePreemptor("ns/one").workers(1, 8),
			wantVictims: []string{"whole gang ns/across[0 1]"},
			wantDomain:  "node s0-l0-n1",
		},
		{
			// Pods without GPUs lose no GPU-seconds: the name decides.
			name: "a plain CPU pod evicts one lower-priority pod, anywhere",
			cluster: func() *cluster {
				c := newCluster(placementtest.MakeFabric().LeavesPerSpine(2).NodesPerLeaf(1).Obj())
				for i := range c.nodes {
					c.nodes[i].Free[0] = 2000
				}
				return c.add(
					makePod("ns/old").startedAgo(2*time.Hour).on(0, "s0-l0-n0"),
					makePod("ns/new").startedAgo(time.Minute).on(0, "s0-l1-n0"),
				)
			},
			preemptor:   makePreemptor("ns/cpu").launcher(2000),
			wantVictims: []string{"plain pod ns/new[0]"},
			wantDomain:  "node s0-l1-n0",
			wantCost:    &Cost{Level: 4, Gangs: 1, SumPriority: 0, GPUs: 0},
		},
		{
			name: "CPU pods spread over the cluster when that evicts cheaper pods",
			cluster: func() *cluster {
				c := newCluster(placementtest.MakeFabric().LeavesPerSpine(3).NodesPerLeaf(1).Obj())
				c.nodes[0].Free[0] = 24000
				c.nodes[1].Free[0], c.nodes[2].Free[0] = 12000, 12000
				return c.add(
					makePod("ns/p1").priority(1).cpuOn(12000, "s0-l0-n0"),
					makePod("ns/p2").priority(1).cpuOn(12000, "s0-l0-n0"),
					makePod("ns/p3").cpuOn(12000, "s0-l1-n0"),
					makePod("ns/p4").cpuOn(12000, "s0-l2-n0"),
				)
			},
			preemptor:   makePreemptor("ns/cpu").launcher(12000).launcher(12000),
			wantVictims: []string{"plain pod ns/p3[0]", "plain pod ns/p4[0]"},
			wantDomain:  "spine s0",
		},
		{
			name: "a launcher that needs room of its own costs one more victim",
			cluster: func() *cluster {
				c := newCluster(placementtest.MakeFabric().NodesPerLeaf(4).CliqueSize(4).Obj())
				for i := range c.nodes {
					c.nodes[i].Free[0] = 1000
				}
				return c.add(
					makeGang("ns/a").on(8, "s0-l0-n0"),
					makeGang("ns/b").on(8, "s0-l0-n1"),
					makeGang("ns/c").on(8, "s0-l0-n2"),
					makeGang("ns/d").priority(200).on(8, "s0-l0-n3"),
				)
			},
			preemptor:   makePreemptor("ns/mpi").workers(2, 8).launcher(500),
			wantVictims: []string{"whole gang ns/a[0]", "whole gang ns/b[0]", "whole gang ns/c[0]"},
			wantDomain:  "NVLink domain s0-l0-c0",
		},
		{
			name: "a gang with a launcher is planned before it is kept",
			cluster: func() *cluster {
				return headline()
			},
			preemptor:   makePreemptor("ns/mpi").workers(4, 8).launcher(1000),
			wantVictims: []string{"whole gang ns/a[0 1 2 3]"},
			wantDomain:  "leaf s0-l0",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cluster()
			req := tc.preemptor.on(c)
			d, err := newTestEngine(t).Decide(t.Context(), req)
			if tc.wantReason != "" {
				var np *NoPreemptionError
				require.ErrorAs(t, err, &np)
				require.Equal(t, tc.wantReason, np.Reason, np.Message)
				return
			}
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
		})
	}
}

// requirePlanUsesFreedCapacity checks that the plan places every member
// within what is free once the victims are gone, and inside the domain.
func requirePlanUsesFreedCapacity(t *testing.T, req *Request, d *Decision) {
	t.Helper()
	free := make([]placement.Vector, len(req.Nodes))
	for i := range req.Nodes {
		free[i] = req.Nodes[i].Free.Clone()
	}
	for _, v := range d.Victims {
		for _, i := range v.Pods {
			pd := req.Units[v.Unit].Pods[i]
			if pd.Node >= 0 {
				free[pd.Node].Add(pd.Request)
			}
		}
	}
	require.Len(t, d.Plan.NodeOf, len(req.Members))
	for i, n := range d.Plan.NodeOf {
		free[n].Sub(req.Members[i].Request)
	}
	for i, f := range free {
		for dim, q := range f {
			require.GreaterOrEqual(t, q, int64(0), "node %s overcommitted in %s", req.Nodes[i].Name, resources[dim])
		}
	}
}

func TestDecideHeadlinePlan(t *testing.T) {
	req := makePreemptor("ns/big").workers(8, 8).on(headline())
	d, err := newTestEngine(t).Decide(t.Context(), req)
	require.NoError(t, err)
	var nodes []string
	for _, n := range d.Plan.NodeOf {
		nodes = append(nodes, req.Nodes[n].Name)
	}
	want := append(leafNodes("s0-l0", 4), leafNodes("s0-l1", 4)...)
	require.Equal(t, want, nodes, "neighbouring ranks on neighbouring nodes of spine s0")
	require.Equal(t, Domain{
		Level: spineKey, LevelName: "spine", Name: "s0",
		Path: []topology.PathElem{{Key: spineKey, Value: "s0"}},
	}, d.Domain)
	require.Equal(t, "evicting 2 gangs (ns/a, ns/b): 8 pods, 64 GPUs, priority at most 1, to place ns/big in spine s0", d.Summary)
}
