package coscheduling

import (
	"context"
	"fmt"
	goruntime "runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/contract"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// The sources of a node's GPUs BenchmarkCapacityPreCheckDRA compares.
const (
	// gpusExtended: the device plugin's nvidia.com/gpu allocatable.
	gpusExtended = "extended"
	// gpusClaims: a ResourceSlice of 8 GPUs per node; each member has a
	// claim for 8 of them, made from the job's template.
	gpusClaims = "claims"
	// gpusMapped: the same slices; members ask for nvidia.com/gpu, which
	// NVIDIA's DeviceClass maps to its devices.
	gpusMapped = "mapped"
)

// BenchmarkCapacityPreCheckDRA measures PreFilter of a gang's first member
// on BenchmarkCapacityPreCheck's cluster (5,000 nodes of 8 GPUs, NVLink
// cliques of 8 nodes, leaves of 32, spines of 256, every other node full)
// with the topology planner, for each source of GPUs. It is fair by
// construction: every source gets the same fabric, the same busy nodes and
// the same gang, and every run has the scheduler's DRA manager and
// DynamicResources, as the default profile of a 1.37 cluster does; only
// where the GPUs come from differs. The target is DRA within
// 1.5× of the extended resource: each DRA source reports x-extended, its
// CPU per op over the extended resource's at the same gang size. The gang
// sizes are BenchmarkCapacityPreCheck's.
//
// Part of that CPU is not gpu-gang's: kube-scheduler's own PreFilter
// plugins run for the pod in every scheduler, gpu-gang or not, and for a
// pod with claims DynamicResources builds its allocator over every slice
// there. The measured loop meters them where they run, between gpu-gang's
// plans (stock-cpu-ns/op, threadMeter: their thread's CPU and their share of
// the collector's), and each DRA source reports x-extended-beyond-stock:
// its CPU per op less its stock CPU, over the extended resource's less its
// own. That is what planning with devices costs against planning with the
// extended resource; x-extended stays the whole-PreFilter comparison.
//
// That subtraction takes the process's CPU, every thread's, less a stock
// part up to ten times gpu-gang's, so a small error in either moves it far.
// The loop therefore also meters each cycle on its own thread, as the stock
// plugins are metered (cycle-cpu-ns/op: the thread's CPU and the cycle's
// share of the collector's by the bytes it allocated). The cycle less the
// stock plugins, both read on one thread, is gpu-gang's own CPU
// (own-cpu-ns/op), and x-extended-own compares it with the extended
// resource's: what the 1.5× target is read from. After
// the loop each run also measures the stock plugins alone, back to back,
// as many times (stock-apart-cpu-ns/op, stockPreFilterCPU), as earlier
// rounds subtracted them: on caches no plan has used, and with whatever
// collections that shorter loop meets, which varies it from run to run.
func BenchmarkCapacityPreCheckDRA(b *testing.B) {
	for _, size := range []int{8, 64, 512} {
		// extendedCPU is the extended resource's CPU per op at this size,
		// extendedStock its stock CPU per op, extendedOwn gpu-gang's.
		var extendedCPU, extendedStock, extendedOwn float64
		for _, source := range []string{gpusExtended, gpusClaims, gpusMapped} {
			b.Run(fmt.Sprintf("planner=topology/nodes=5000/gang=%d/gpus=%s", size, source), func(b *testing.B) {
				nodes, running, objects := benchDRAFabric(5000, source)
				job := benchDRAJob("big", size, source)
				for _, m := range job {
					objects = append(objects, m.claims...)
				}
				pods := running
				for _, m := range job {
					pods = append(pods, m.pod)
				}
				stock := &threadMeter{tb: b, perIter: meteredPlugins, metric: "stock-cpu-ns/op"}
				cycle := &threadMeter{tb: b, perIter: 1, metric: "cycle-cpu-ns/op"}
				env := newTestEnv(b, nodes, pods,
					[]*v1alpha1.PodGroup{gangtest.MakePodGroup("big", testNS).MinMember(int32(size)).Obj()},
					withTopology(b), withDRA(), withObjects(objects...), withStockMeter(stock))
				// The stock plugins run on this goroutine; stock reads its
				// thread's CPU.
				goruntime.LockOSThread()
				defer goruntime.UnlockOSThread()
				key := gang.Key{Namespace: testNS, Name: "big"}
				// The scheduler's own logger, at its verbosity, as
				// BenchmarkCapacityPreCheck has it: the test logger logs
				// every V(5) line, which a scheduler does not pay for.
				ctx := klog.NewContext(env.ctx, klog.Background())
				preCheck := func() {
					env.ledger().ForgetGang(key)
					_, status, _ := env.fh.RunPreFilterPlugins(ctx, framework.NewCycleState(), job[0].pod)
					if !status.IsSuccess() {
						b.Fatalf("pre-check failed: %v", status)
					}
				}
				// The steady state is measured: the first pass reads
				// the slices' devices once for every pass after it, until
				// a slice changes, as the scheduler's first cycle would.
				preCheck()
				// As stockPreFilterCPU: the measured loop starts on a
				// collected heap, so that the garbage of building the
				// cluster (every slice and claim copied through the fake
				// API server) and of the first pass is not collected on
				// its CPU, more so for the DRA sources, whose cluster
				// holds more objects, and the fewer the passes.
				goruntime.GC()
				b.ReportAllocs()
				b.ResetTimer()
				stock.reset()
				cycle.reset()
				cpu := startCPU(b)
				for b.Loop() {
					cycle.metered(ctx, preCheck)
				}
				perOp := cpu.report(b)
				stockPerOp := stock.report(b)
				own := cycle.report(b) - stockPerOp
				b.ReportMetric(own, "own-cpu-ns/op")
				stockPreFilterCPU(b, ctx, env, job[0].pod)
				switch {
				case source == gpusExtended:
					extendedCPU, extendedStock, extendedOwn = perOp, stockPerOp, own
				case extendedCPU > 0:
					b.ReportMetric(perOp/extendedCPU, "x-extended")
					if extendedCPU > extendedStock {
						b.ReportMetric((perOp-stockPerOp)/(extendedCPU-extendedStock), "x-extended-beyond-stock")
					}
					if extendedOwn > 0 {
						b.ReportMetric(own/extendedOwn, "x-extended-own")
					}
				}
			})
		}
	}
}

// stockPreFilterCPU runs the profile's PreFilter plugins for pod b.N times
// back to back, with Coscheduling staying out (simulating), as a scheduler
// without gpu-gang would run them, and reports their CPU per run.
func stockPreFilterCPU(b *testing.B, ctx context.Context, env *testEnv, pod *v1.Pod) {
	b.Helper()
	if b.N == 0 {
		return
	}
	// The measured loop's garbage is its own.
	goruntime.GC()
	sim := contract.WithSimulation(ctx)
	start := processCPU(b)
	for range b.N {
		if _, status, _ := env.fh.RunPreFilterPlugins(sim, framework.NewCycleState(), pod); !status.IsSuccess() && !status.IsSkip() {
			b.Fatalf("stock PreFilter failed: %v", status)
		}
	}
	b.ReportMetric(float64(processCPU(b)-start)/float64(b.N), "stock-apart-cpu-ns/op")
}

// benchDRAFabric is n nodes of 8 GPUs from source, labelled as
// BenchmarkCapacityPreCheck's, and every other node's GPUs taken: by a pod
// that asks for nvidia.com/gpu, or by a pod whose claim holds all 8
// devices. objects are the DeviceClass, the slices and the busy claims.
func benchDRAFabric(n int, source string) (nodes []*v1.Node, running []*v1.Pod, objects []runtime.Object) {
	nodes = make([]*v1.Node, n)
	if source != gpusExtended {
		objects = append(objects, nvidiaClass())
	}
	all := make([]string, 8)
	for d := range all {
		all[d] = fmt.Sprint(scheduling.DeviceNameGPUPrefix, d)
	}
	for i := range nodes {
		name := fmt.Sprintf("node-%04d", i)
		if source == gpusExtended {
			nodes[i] = gpuNode(name)
		} else {
			nodes[i] = draNode(name)
			objects = append(objects, gpuSlice(name, "H100", "H100", "H100", "H100", "H100", "H100", "H100", "H100"))
		}
		nodes[i].Labels = map[string]string{
			cliqueLabel: fmt.Sprint("c", i/8), leafLabel: fmt.Sprint("l", i/32), spineLabel: fmt.Sprint("s", i/256),
		}
		if i%2 != 0 {
			continue
		}
		busy := fmt.Sprintf("busy-%04d", i)
		if source == gpusExtended {
			running = append(running, st.MakePod().Namespace("other").Name(busy).UID(busy).Node(name).
				Req(map[v1.ResourceName]string{gpu: "8"}).Obj())
			continue
		}
		claim := allocatedClaim("other", busy, name, all...)
		pod := st.MakePod().Namespace("other").Name(claim.Status.ReservedFor[0].Name).UID(string(claim.Status.ReservedFor[0].UID)).Node(name).Obj()
		pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To(busy)}}
		running = append(running, pod)
		objects = append(objects, claim)
	}
	return nodes, running, objects
}

// benchMember is a member of a benchmark's gang and the claims it uses.
type benchMember struct {
	pod    *v1.Pod
	claims []runtime.Object
}

// benchDRAJob is a gang of size members of 8 GPUs each, from source.
func benchDRAJob(group string, size int, source string) []benchMember {
	tmpl := claimTemplate(testNS, "gpus", gpuClaimSpec(scheduling.DeviceClassGPU, 8, ""))
	job := make([]benchMember, size)
	for i := range job {
		name := fmt.Sprintf("%s-%d", group, i)
		switch source {
		case gpusClaims:
			job[i].pod = member(group, name, "")
			job[i].claims = []runtime.Object{claimFromTemplate(job[i].pod, "gpus", tmpl)}
			if i == 0 {
				job[i].claims = append(job[i].claims, tmpl)
			}
		default:
			job[i].pod = member(group, name, "8")
		}
	}
	return job
}
