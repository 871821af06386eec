package coscheduling

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
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

// BenchmarkCapacityPreCheck measures PreFilter of a gang's first member in
// the profile the scheduler ships (every in-tree Filter plugin, GPUFleet,
// DynamicResources), on fleets of 5,000, 20,000 and 50,000 nodes
// (benchFleet), half full: deciding eligibility, planning the whole gang node by node with the
// shipped topology planner, in each of GPUFleet's uniform groups, and
// holding the plan.
func BenchmarkCapacityPreCheck(b *testing.B) {
	for _, nodes := range []int{5000, 20000, 50000} {
		for _, size := range []int{8, 64, 512} {
			for _, scan := range []string{"roomy", "full"} {
				b.Run(fmt.Sprintf("nodes=%d/gang=%d/filter=%s", nodes, size, scan), func(b *testing.B) {
					benchPreCheck(b, nodes, size, scan == "full")
				})
			}
		}
	}
}

// benchPreCheck is one case of BenchmarkCapacityPreCheck; fullScan runs
// Filter on every node before planning, as plans did before eligibility.Runner.RoomyFirst.
func benchPreCheck(b *testing.B, nodes, size int, fullScan bool) {
	fleet, running := benchFleet(nodes)
	job := members("big", size, "8")
	pg := gangtest.MakePodGroup("big", testNS).MinMember(int32(size)).Obj()
	env := newTestEnv(b, fleet, append(running, job...), []*v1alpha1.PodGroup{pg}, withShippedProfile(b))
	env.pl.core.SetFullScan(fullScan)
	key := gang.Key{Namespace: testNS, Name: "big"}
	// The scheduler's own logger, at its verbosity: the test logger logs
	// every V(5) line, which a scheduler does not pay for.
	ctx := klog.NewContext(env.ctx, klog.Background())
	// The fleet's setup garbage is collected before the clock starts, so
	// that CPU per op is the plans' own.
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := startCPU(b)
	for b.Loop() {
		env.ledger().ForgetGang(key)
		_, status, _ := env.fh.RunPreFilterPlugins(ctx, framework.NewCycleState(), job[0])
		if !status.IsSuccess() {
			b.Fatalf("pre-check failed: %v", status)
		}
	}
	cpu.report(b)
}

// benchFleet is a fleet of n 8-GPU nodes (NVLink cliques of 8 nodes, leaves
// of 32, spines of 256) with GPU feature discovery labels: two products (by
// halves), two drivers (by quarters) and spot nodes at the end, so that a
// gang's members pass GPUFleet's Filter on every node and the planner plans
// in each of its uniform groups. Every other node runs an 8-GPU pod.
func benchFleet(n int) ([]*v1.Node, []*v1.Pod) {
	nodes := make([]*v1.Node, n)
	var running []*v1.Pod
	for i := range nodes {
		nodes[i] = gpuNode(fmt.Sprintf("node-%05d", i))
		nodes[i].Labels = map[string]string{
			cliqueLabel: fmt.Sprint("c", i/8), leafLabel: fmt.Sprint("l", i/32), spineLabel: fmt.Sprint("s", i/256),
			scheduling.LabelGPUProduct:             []string{"NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB"}[i/(n/2)],
			scheduling.LabelCUDADriverVersionFull:  []string{"550.54.15", "535.104.05"}[i/(n/4)%2],
			scheduling.LabelCUDARuntimeVersionFull: []string{"12.4", "12.2"}[i/(n/4)%2],
			scheduling.LabelKarpenterCapacityType:  []string{"on-demand", "spot"}[min(i/(n-n/40), 1)],
		}
		if i%2 == 0 {
			running = append(running, st.MakePod().Namespace("other").Name(fmt.Sprintf("busy-%05d", i)).
				UID(fmt.Sprintf("busy-%05d", i)).Node(nodes[i].Name).Req(map[v1.ResourceName]string{gpu: "8"}).Obj())
		}
	}
	return nodes, running
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
				req, status := env.pl.preempter.Request(env.ctx, p, s.held, statuses)
				if status != nil {
					b.Fatal(status)
				}
				if d, err = env.pl.preempter.Decider().Decide(env.ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(d.Cost.Gangs), "victim-gangs")
			b.Logf("%s", d.Summary)
		})
	}
}
