package gpufleet

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/fleet"
)

// benchFleet is 5,000 GPU nodes as GPU feature discovery labels them: two
// products, two drivers, one node in 16 time-sliced, a quarter spot, plus
// the labels any cloud node carries.
func benchFleet() []*v1.Node {
	nodes := make([]*v1.Node, 5000)
	for i := range nodes {
		product, driver, cuda := h100, "550.54.15", "12.4"
		if i%3 == 0 {
			product = a100
		}
		if i%5 == 0 {
			driver, cuda = "535.104.05", "12.2"
		}
		ls := []map[string]string{gfd(product, driver, cuda, "9.0"), label(
			"kubernetes.io/arch", "amd64", "kubernetes.io/os", "linux", "topology.kubernetes.io/zone", fmt.Sprint("zone-", i%3),
			"node.kubernetes.io/instance-type", "p5.48xlarge", "nvidia.com/gpu.count", "8", "nvidia.com/gpu.memory", "81559",
			"nvidia.com/gpu.family", "hopper", "nvidia.com/gpu.machine", "p5.48xlarge", "nvidia.com/gpu.clique", fmt.Sprint("c", i/8),
		)}
		if i%16 == 0 {
			ls = append(ls, label(scheduling.LabelGPUSharingStrategy, scheduling.SharingStrategyTimeSlicing, scheduling.LabelGPUReplicas, "4"))
		}
		if i%4 == 0 {
			ls = append(ls, label(scheduling.LabelKarpenterCapacityType, "spot"))
		}
		nodes[i] = node(fmt.Sprintf("node-%04d", i), ls...)
	}
	return nodes
}

// BenchmarkFilter measures GPUFleet's Filter over a 5,000-node fleet for a
// pod that asks for CUDA 12.4: what the scheduler runs for every pod, and
// the gang plugin for every member template it plans. The node cache is
// warm after the first pass, as in a running scheduler.
func BenchmarkFilter(b *testing.B) {
	nodes := benchFleet()
	env := newTestEnv(b, nodes, nil, nil, nil)
	p := pod("p", gpus("8")).Annotation(scheduling.AnnotationMinCUDA, "12.4").Obj()
	state, status := env.preFilter(p)
	if !status.IsSuccess() {
		b.Fatal(status)
	}
	infos, err := env.Snapshot.NodeInfos().List()
	if err != nil {
		b.Fatal(err)
	}
	admitted := 0
	for _, ni := range infos {
		if env.pl.Filter(env.ctx, state, p, ni).IsSuccess() {
			admitted++
		}
	}
	if admitted == 0 || admitted == len(infos) {
		b.Fatalf("%d of %d nodes admitted: the fleet does not exercise the rules", admitted, len(infos))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, ni := range infos {
			env.pl.Filter(env.ctx, state, p, ni)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(infos)), "ns/node")
}

// BenchmarkReadNode is what each Filter call would cost without the node
// cache.
func BenchmarkReadNode(b *testing.B) {
	nodes := benchFleet()
	opts := fleet.DefaultOptions()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, n := range nodes {
			fleet.ReadNode(n.Labels, &opts)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(nodes)), "ns/node")
}

// BenchmarkPreFilter measures PreFilter of a pod that some node admits.
func BenchmarkPreFilter(b *testing.B) {
	env := newTestEnv(b, benchFleet(), nil, nil, nil)
	p := pod("p", gpus("8")).Annotation(scheduling.AnnotationMinCUDA, "12.4").Obj()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, status := env.preFilter(p); !status.IsSuccess() {
			b.Fatal(status)
		}
	}
}

// BenchmarkNodeGroups measures the uniform groups of a gang over 5,000
// nodes, which the gang plugin asks for each time it plans a gang.
func BenchmarkNodeGroups(b *testing.B) {
	nodes := benchFleet()
	env := newTestEnv(b, nodes, nil, nil, nil)
	state := framework.NewCycleState()
	if _, status, _ := env.fh.RunPreFilterPlugins(env.ctx, state, pod("p", gpus("8")).Obj()); !status.IsSuccess() {
		b.Fatal(status)
	}
	s, err := readState(state)
	if err != nil {
		b.Fatal(err)
	}
	pn := placementNodes(nodes)
	if g := s.NodeGroups(pn, 0); g == nil || len(g.Names) != 8 {
		b.Fatalf("want 8 groups (2 products × 2 drivers × 2 capacity types), got %+v", g)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.NodeGroups(pn, 0)
	}
}
