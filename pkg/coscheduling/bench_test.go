package coscheduling

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
	"github.com/gpu-gang/gpu-gang/pkg/preemption"
)

// BenchmarkLess measures QueueSort's comparison of members of two gangs of
// equal priority, the common case in a queue of training jobs.
func BenchmarkLess(b *testing.B) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	env := newTestEnv(b, nil, nil, []*v1alpha1.PodGroup{
		gangtest.MakePodGroup("a", testNS).Created(t0).Obj(),
		gangtest.MakePodGroup("b", testNS).Created(t0).Obj(),
	})
	queued := func(p *v1.Pod) fwk.QueuedEntityInfo {
		pi, err := framework.NewPodInfo(p)
		if err != nil {
			b.Fatal(err)
		}
		return &framework.QueuedPodInfo{PodInfo: pi, QueueingParams: framework.QueueingParams{Timestamp: t0}}
	}
	x, y := queued(member("a", "a-0", "8")), queued(member("b", "b-0", "8"))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if !env.pl.Less(x, y) {
			b.Fatal("a must sort before b")
		}
	}
}

// BenchmarkCapacityPreCheck measures PreFilter of a gang's first member on
// a 5,000-node cluster (NVLink cliques of 8 nodes, leaves of 32, spines of
// 256), half full: listing and sorting the snapshot, deciding eligibility,
// planning the whole gang node by node and holding the plan, with the
// topology-blind greedy planner and with the topology planner.
func BenchmarkCapacityPreCheck(b *testing.B) {
	for _, bc := range []struct {
		planner string
		size    int
	}{{"greedy", 8}, {"greedy", 64}, {"greedy", 512}, {"topology", 8}, {"topology", 64}, {"topology", 512}} {
		b.Run(fmt.Sprintf("planner=%s/nodes=5000/gang=%d", bc.planner, bc.size), func(b *testing.B) {
			size := bc.size
			nodes := make([]*v1.Node, 5000)
			var running []*v1.Pod
			for i := range nodes {
				nodes[i] = gpuNode(fmt.Sprintf("node-%04d", i))
				nodes[i].Labels = map[string]string{
					cliqueLabel: fmt.Sprint("c", i/8), leafLabel: fmt.Sprint("l", i/32), spineLabel: fmt.Sprint("s", i/256),
				}
				if i%2 == 0 {
					running = append(running, st.MakePod().Namespace("other").Name(fmt.Sprintf("busy-%04d", i)).
						UID(fmt.Sprintf("busy-%04d", i)).Node(nodes[i].Name).Req(map[v1.ResourceName]string{gpu: "8"}).Obj())
				}
			}
			job := members("big", size, "8")
			var opts []envOption
			if bc.planner == "topology" {
				opts = append(opts, withTopology(b))
			}
			env := newTestEnv(b, nodes, append(running, job...),
				[]*v1alpha1.PodGroup{gangtest.MakePodGroup("big", testNS).MinMember(int32(size)).Obj()}, opts...)
			key := gang.Key{Namespace: testNS, Name: "big"}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				env.pl.ledger.ForgetGang(key)
				_, status, _ := env.fh.RunPreFilterPlugins(env.ctx, framework.NewCycleState(), job[0])
				if !status.IsSuccess() {
					b.Fatalf("pre-check failed: %v", status)
				}
			}
		})
	}
}

// BenchmarkPreemptionPostFilter measures what PostFilter spends to decide a
// preemption on a 5,120-node cluster (NVLink cliques of 8 nodes, leaves of
// 32, spines of 256) full of low-priority 4- and 8-node gangs: building the
// engine's request from the snapshot (eligibility through the profile's
// Filter plugins, free room, units by PodGroup, budgets) and deciding. The
// evictions themselves are API calls and not measured.
func BenchmarkPreemptionPostFilter(b *testing.B) {
	for _, size := range []int{8, 64} {
		b.Run(fmt.Sprintf("nodes=5120/preemptor=%d", size), func(b *testing.B) {
			nodes := make([]*v1.Node, 5120)
			for i := range nodes {
				nodes[i] = gpuNode(fmt.Sprintf("node-%04d", i))
				nodes[i].Labels = map[string]string{
					cliqueLabel: fmt.Sprint("c", i/8), leafLabel: fmt.Sprint("l", i/32), spineLabel: fmt.Sprint("s", i/256),
				}
			}
			var pods []*v1.Pod
			var pgs []*v1alpha1.PodGroup
			for next, g := 0, 0; next < len(nodes); g++ {
				n := min(4+4*(g%2), len(nodes)-next)
				names := make([]string, n)
				for i := range names {
					names[i] = nodes[next+i].Name
				}
				next += n
				name := fmt.Sprintf("low-%04d", g)
				pods = append(pods, runningGang(name, int32(g%4), t0.Add(time.Duration(g)*time.Second), names...)...)
				pgs = append(pgs, gangtest.MakePodGroup(name, testNS).MinMember(int32(n)).Created(t0).Obj())
			}
			job := urgent("urgent", size, 100)
			pgs = append(pgs, gangtest.MakePodGroup("urgent", testNS).MinMember(int32(size)).Created(t0.Add(time.Hour)).Obj())
			env := newTestEnv(b, nodes, append(pods, job...), pgs, withTopology(b))
			state := framework.NewCycleState()
			if _, status, _ := env.fh.RunPreFilterPlugins(env.ctx, state, job[0]); status.Code() != fwk.Unschedulable {
				b.Fatalf("the urgent gang must not fit a full cluster: %v", status)
			}
			s, err := readState(state)
			if err != nil {
				b.Fatal(err)
			}
			p, ok := env.pl.preemptorOf(s, job[0])
			if !ok {
				b.Fatal("the urgent gang cannot preempt")
			}
			statuses := framework.NewDefaultNodeToStatus()
			var d *preemption.Decision
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				req, _, _, status := env.pl.preemptionRequest(env.ctx, p, s.held, statuses)
				if status != nil {
					b.Fatal(status)
				}
				if d, err = env.pl.decider.Decide(env.ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(d.Cost.Gangs), "victim-gangs")
			b.Logf("%s", d.Summary)
		})
	}
}
