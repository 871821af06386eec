package metrics

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/workload"
)

// newDomainTracker tracks jobs on smallLayout (1 spine x 2 leaves x 4 nodes
// of 8 GPUs, cliques of 2: n0,n1 | n2,n3 | n4,n5 | n6,n7), each submitted at
// its At.
func newDomainTracker(t *testing.T, jobs ...scenario.Job) *DomainTracker {
	t.Helper()
	dt := NewDomainTracker(smallLayout(t), jobs, nil)
	dt.Start(t0)
	for _, j := range jobs {
		dt.Submitted(j.Name, at(j.At.Seconds()))
	}
	return dt
}

// smallNode names smallLayout's i-th node.
func smallNode(t *testing.T, i int) string { return smallLayout(t).Nodes[i].Name }

func evicted(dt *DomainTracker, p *v1.Pod, node string, second float64) {
	dt.ObserveDelete(bound(p, node), at(second))
}

func TestWholeFreeDomains(t *testing.T) {
	dt := newDomainTracker(t, scenario.Job{Name: "a", Pods: 1, GPUsPerPod: 1}, scenario.Job{Name: "b", Pods: 1, GPUsPerPod: 8})
	a, b := member("a", 0, 1), member("b", 0, 8)
	dt.Sample(at(0)) // everything free: 4 cliques, 2 leaves
	dt.Observe(bound(a, smallNode(t, 0)), at(2))
	dt.Sample(at(2)) // clique 0 and leaf 0 taken by one GPU
	// A member waiting in Permit on n4 takes clique 2 and leaf 1 too.
	waiting := bound(b, smallNode(t, 4))
	dt.ObserveWaiting([]*v1.Pod{waiting}, at(4))
	dt.Sample(at(4))
	// It binds there; the next reading no longer lists it: counted once.
	dt.Observe(waiting, at(5))
	dt.ObserveWaiting(nil, at(5))
	dt.Sample(at(6))
	dt.Observe(finished(a, smallNode(t, 0)), at(8))
	dt.Sample(at(8))
	s := dt.Summary(at(10))
	require.Len(t, s.Samples, 5)
	want := [][]int{{4, 2}, {3, 1}, {2, 0}, {2, 0}, {3, 1}}
	for i, w := range want {
		require.Equal(t, w, s.Samples[i].WholeFree, "sample %d", i)
	}
	require.Equal(t, []WholeFreeLevel{
		// (4*2 + 3*2 + 2*4 + 3*2) / 10
		{Level: scenario.TierClique, Domains: 4, Mean: 2.8, Min: 2},
		// (2*2 + 1*2 + 0*4 + 1*2) / 10
		{Level: scenario.TierLeaf, Domains: 2, Mean: 0.8, Min: 0},
	}, roundMeans(s.WholeFree))
}

func roundMeans(levels []WholeFreeLevel) []WholeFreeLevel {
	for i := range levels {
		levels[i].Mean = float64(int(levels[i].Mean*1e6+0.5)) / 1e6
	}
	return levels
}

func TestFragmentationCost(t *testing.T) {
	// A big gang of 2 x 8 GPUs requires one clique (2 nodes); it waits from
	// 10 s to 30 s.
	big := scenario.Job{Name: "big", Gang: true, Pods: 2, GPUsPerPod: 8, At: 10 * time.Second, Big: true,
		Topology: &scenario.Topology{Level: scenario.TierClique, Required: true}}
	var jobs []scenario.Job
	for i := range 4 {
		jobs = append(jobs, scenario.Job{Name: "p" + string(rune('0'+i)), Pods: 1, GPUsPerPod: 4})
	}
	dt := newDomainTracker(t, append(jobs, big)...)
	// One 4-GPU pod in every clique (n0, n2, n4, n6): 48 of 64 GPUs free,
	// none of them in a clique that holds 2 x 8 GPUs.
	pods := make([]*v1.Pod, 4)
	for i := range pods {
		pods[i] = member(jobs[i].Name, 0, 4)
		dt.Observe(bound(pods[i], smallNode(t, 2*i)), at(0))
	}
	// From 20 s, clique 0 is free again (p0 finished): 52 free, 16 of
	// them usable: cost 36.
	dt.Observe(finished(pods[0], smallNode(t, 0)), at(20))
	// At 30 s the gang binds in clique 0.
	dt.Observe(bound(member("big", 0, 8), smallNode(t, 0)), at(29))
	dt.Observe(bound(member("big", 1, 8), smallNode(t, 1)), at(30))
	s := dt.Summary(at(40))
	// 48 GPUs stranded from 10 s to 20 s, 36 from 20 s to 29 s. From 29 s
	// one member is left to bind, and every clique has an 8-GPU node free
	// for it: nothing is stranded.
	require.InDelta(t, (48*10+36*9)/3600.0, s.FragmentationGPUHours, 1e-9)
	require.InDelta(t, 20, s.RequiredWaitSeconds, 1e-9)
	require.Equal(t, 1, s.BigGangs)
	require.Equal(t, 1, s.BigGangsBound)
	require.InDelta(t, 20, s.BigWaitP50, 1e-9)
}

// The cost at an instant is the least over the waiting gangs: GPUs that
// one gang can use are not stranded, whatever the others need.
func TestFragmentationTakesTheLeastOverWaitingGangs(t *testing.T) {
	l := smallLayout(t)
	levels := domainLevels(l)
	taken := []int{4, 0, 4, 0, 4, 0, 4, 0} // 12 free GPUs in every clique, 24 in each leaf
	clique := &scenario.Job{Name: "c", Gang: true, Pods: 2, GPUsPerPod: 8, Topology: &scenario.Topology{Level: scenario.TierClique, Required: true}}
	leaf := &scenario.Job{Name: "l", Gang: true, Pods: 2, GPUsPerPod: 8, Topology: &scenario.Topology{Level: scenario.TierLeaf, Required: true}}
	cost, n := fragmentation(l, levels, taken, []waitingGang{{job: clique, members: 2}})
	require.Equal(t, 48, cost, "no clique holds 2 x 8 GPUs: every free GPU is stranded")
	require.Equal(t, 1, n)
	cost, _ = fragmentation(l, levels, taken, []waitingGang{{job: clique, members: 2}, {job: leaf, members: 2}})
	require.Equal(t, 0, cost, "each leaf holds two 8-GPU members: nothing is stranded for the leaf gang")
	cost, _ = fragmentation(l, levels, taken, []waitingGang{{job: clique, members: 1}})
	require.Equal(t, 0, cost, "one member left: every clique holds it")
	cost, n = fragmentation(l, levels, taken, nil)
	require.Zero(t, cost)
	require.Zero(t, n)
}

func TestEvictionsBrokenGangsAndMoves(t *testing.T) {
	jobs := []scenario.Job{
		// whole is evicted whole; part loses one member of two; done had
		// one member finish before the other was evicted; moved is movable.
		{Name: "whole", Gang: true, Pods: 2, GPUsPerPod: 8},
		{Name: "part", Gang: true, Pods: 2, GPUsPerPod: 8},
		{Name: "done", Gang: true, Pods: 2, GPUsPerPod: 8},
		{Name: "moved", Gang: true, Pods: 2, GPUsPerPod: 4, Movable: true},
		{Name: "big", Gang: true, Pods: 4, GPUsPerPod: 8, Big: true, At: 10 * time.Second,
			Topology: &scenario.Topology{Level: scenario.TierClique, Required: true}},
	}
	dt := newDomainTracker(t, jobs...)
	place := map[string][2]int{"whole": {0, 1}, "part": {4, 5}, "done": {6, 7}, "moved": {2, 3}}
	for _, name := range []string{"done", "moved", "part", "whole"} {
		for i, n := range place[name] {
			p := member(name, i, jobs[0].GPUsPerPod)
			if name == "moved" {
				p = member(name, i, 4)
			}
			dt.Observe(bound(p, smallNode(t, n)), at(0))
			running := bound(p, smallNode(t, n))
			running.Status.Phase = v1.PodRunning
			dt.Observe(running, at(1))
		}
	}
	dt.Observe(finished(member("done", 0, 8), smallNode(t, 6)), at(5))
	evicted(dt, member("done", 1, 8), smallNode(t, 7), 6) // before big arrives
	evicted(dt, member("whole", 0, 8), smallNode(t, 0), 11)
	evicted(dt, member("whole", 1, 8), smallNode(t, 1), 11)
	evicted(dt, member("moved", 0, 4), smallNode(t, 2), 11)
	evicted(dt, member("moved", 1, 4), smallNode(t, 3), 11)
	evicted(dt, member("part", 0, 8), smallNode(t, 4), 12)
	for i := range 4 {
		dt.Observe(bound(member("big", i, 8), smallNode(t, i)), at(13))
	}
	s := dt.Summary(at(20))
	require.Equal(t, 6, s.Evictions)
	require.Equal(t, 5, s.EvictionsWhileBigWaited)
	require.InDelta(t, 5.0, s.EvictionsPerBigGang, 1e-9)
	require.Equal(t, 1, s.BrokenGangs, "part ran on with one member; done's other member had finished")
	require.Equal(t, 1, s.Moves)
	require.Equal(t, 2, s.MovedPods)
	require.InDelta(t, 2*4*10/3600.0, s.GPUHoursLostToMoves, 1e-9)
	// whole: 2 x 8 GPUs x 10 s; part: 8 x 11 s; done: 8 x 5 s.
	require.InDelta(t, (2*8*10+8*11+8*5)/3600.0, s.GPUHoursLostToEvictions, 1e-9)
	// big bound on n0..n3 after the evictions there: cliques 0 and 1; the
	// eviction on n4 (clique 2) went to no big gang.
	require.InDelta(t, 2.0, s.VictimDomainsPerBigGang, 1e-9)
	require.Equal(t, 2, s.MaxVictimDomains)
	require.InDelta(t, 3, s.BigWaitP99, 1e-9)
}

func TestWantsDomains(t *testing.T) {
	require.False(t, WantsDomains([]scenario.Job{{Name: "g", Gang: true, Pods: 2}}))
	require.True(t, WantsDomains([]scenario.Job{{Name: "g", Gang: true, Pods: 2, Big: true}}))
	require.True(t, WantsDomains([]scenario.Job{{Name: "g", Gang: true, Pods: 2, Movable: true}}))
}

// Pre-fill pods take their GPUs like any other.
func TestDomainTrackerCountsPrefill(t *testing.T) {
	dt := newDomainTracker(t)
	p := member("prefill", 0, 2)
	p.Labels[workload.RoleLabel] = workload.RolePrefill
	dt.Observe(bound(p, smallNode(t, 7)), at(0))
	dt.Sample(at(0))
	s := dt.Summary(at(1))
	require.Equal(t, []int{3, 1}, s.Samples[0].WholeFree)
}
