package coscheduling

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/eligibility"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
	"github.com/gpu-gang/gpu-gang/pkg/gpufleet"
)

// withGPUFleet registers the GPUFleet plugin at PreFilter and Filter before
// the gang plugin, as the shipped profile does. It reads gangs from the
// same gang sources as the gang plugin, as in the scheduler, and node
// labels only.
func withGPUFleet(t testing.TB) envOption { return gpuFleet(false) }

// withGPUFleetDevices is withGPUFleet reading devices too, as the shipped
// scheduler builds it: pods whose GPUs come through DRA are GPU pods, and
// device attributes (CUDA version, product) are judged.
func withGPUFleetDevices(t testing.TB) envOption { return gpuFleet(true) }

func gpuFleet(devices bool) envOption {
	args := &config.GPUFleetArgs{UnlabelledNodes: config.UnlabelledNodesSkip, CapacityTypeLabels: scheduling.DefaultCapacityTypeLabels()}
	return func(c *envConfig) {
		c.filters = append(c.filters, func(sources *gang.Sources) tf.RegisterPluginFunc {
			return tf.RegisterPluginAsExtensions(gpufleet.Name, func(ctx context.Context, _ runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
				var opts []gpufleet.Option
				if devices {
					opts = append(opts, gpufleet.WithDevices(capacity.ForDRAManager(ctx, fh.SharedDRAManager())))
				}
				return gpufleet.New(ctx, args, fh, sources, opts...)
			}, "PreFilter", "Filter")
		})
	}
}

// gpuFabric is fabric() with GPU feature discovery labels: spine s0 is
// H100 with a CUDA 12.4 driver, spine s1 A100 with a CUDA 12.2 driver.
func gpuFabric() []*v1.Node {
	nodes := fabric()
	for _, n := range nodes {
		product, driver, cuda := "NVIDIA-H100-80GB-HBM3", "550.54.15", "12.4"
		if n.Labels[spineLabel] == "s1" {
			product, driver, cuda = "NVIDIA-A100-SXM4-80GB", "535.104.05", "12.2"
		}
		n.Labels[scheduling.LabelGPUProduct] = product
		n.Labels[scheduling.LabelCUDADriverVersionFull] = driver
		n.Labels[scheduling.LabelCUDARuntimeVersionFull] = cuda
	}
	return nodes
}

// The gang plugin plans with GPUFleet's rules: node rules through Filter,
// uniform groups through the Grouper GPUFleet leaves in CycleState.
func TestGangPlansFollowGPUFleet(t *testing.T) {
	spineOf := func(node string) string { return node[:2] }
	t.Run("a uniform gang never mixes products, though topology alone would", func(t *testing.T) {
		// Topology alone puts a gang of four in one spine, across two
		// products.
		nodes, productOf := leafProductFabric()
		pg := gangtest.MakePodGroup("train", testNS).MinMember(4).Obj()
		pods := members("train", 4, "8")
		env := newTestEnv(t, nodes, pods, []*v1alpha1.PodGroup{pg}, withTopology(t), withGPUFleet(t))
		planned := plannedNodes(t, env, pods)
		for _, n := range planned {
			require.Equal(t, productOf[planned[0]], productOf[n], "plan %v mixes products", planned)
		}
	})
	t.Run("a gang that needs CUDA 12.4 skips the 12.2 nodes", func(t *testing.T) {
		pg := gangtest.MakePodGroup("cuda", testNS).MinMember(2).Annotation(scheduling.AnnotationMinCUDA, "12.4").Obj()
		pods := members("cuda", 2, "8")
		// The A100 leaf s1-l1 is the tightest fit; CUDA rules it out.
		env := newTestEnv(t, gpuFabric(), append([]*v1.Pod{busy("s1-l0-n0")}, pods...), []*v1alpha1.PodGroup{pg}, withTopology(t), withGPUFleet(t))
		for _, n := range plannedNodes(t, env, pods) {
			require.Equal(t, "s0", spineOf(n), "member on %s", n)
		}
	})
	t.Run("no group holds the gang: it waits, and the Event names the groups", func(t *testing.T) {
		pg := gangtest.MakePodGroup("wide", testNS).MinMember(5).Obj()
		pods := members("wide", 5, "8")
		env := newTestEnv(t, gpuFabric(), pods, []*v1alpha1.PodGroup{pg}, withTopology(t), withGPUFleet(t))
		_, status, _ := env.fh.RunPreFilterPlugins(env.ctx, framework.NewCycleState(), pods[0])
		require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code(), "%v", status)
		require.Contains(t, status.Message(), "the gang's accelerated members must all run on nodes of one nvidia.com/gpu.product, driver major.minor and capacity type")
		require.True(t, hasEvent(env.recorded(), ReasonGangTooLarge,
			"none of the 2 such groups of nodes holds them: nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB, driver 535.104, on-demand capacity fits 4 of 5"), "events: %v", env.recorded())
	})
	t.Run("uniform none lets the gang span products", func(t *testing.T) {
		pg := gangtest.MakePodGroup("any", testNS).MinMember(5).Annotation(scheduling.AnnotationUniform, scheduling.UniformNone).Obj()
		pods := members("any", 5, "8")
		env := newTestEnv(t, gpuFabric(), pods, []*v1alpha1.PodGroup{pg}, withTopology(t), withGPUFleet(t))
		spines := map[string]bool{}
		for _, n := range plannedNodes(t, env, pods) {
			spines[spineOf(n)] = true
		}
		require.Len(t, spines, 2)
	})
	t.Run("the groups are those of the first member that asks for GPUs", func(t *testing.T) {
		// A launcher without GPUs comes first in rank order; GPUFleet
		// skips it, so its CycleState has no groups to give.
		nodes, productOf := leafProductFabric()
		pg := gangtest.MakePodGroup("mpi", testNS).MinMember(5).Obj()
		pods := append([]*v1.Pod{member("mpi", "mpi-launcher", "0")}, members("mpi", 4, "8")...)
		for i, p := range pods {
			p.Labels[scheduling.RankLabel] = fmt.Sprint(i)
		}
		env := newTestEnv(t, nodes, pods, []*v1alpha1.PodGroup{pg}, withTopology(t), withGPUFleet(t))
		planned := plannedNodes(t, env, pods)
		for _, n := range planned[1:] {
			require.Equal(t, productOf[planned[1]], productOf[n], "plan %v mixes products", planned)
		}
	})
}

// leafProductFabric is gpuFabric with one driver throughout and products
// alternating by leaf, so that each spine holds both.
func leafProductFabric() ([]*v1.Node, map[string]string) {
	nodes := gpuFabric()
	productOf := map[string]string{}
	for _, n := range nodes {
		n.Labels[scheduling.LabelGPUProduct] = map[bool]string{true: "NVIDIA-H100-80GB-HBM3", false: "NVIDIA-A100-SXM4-80GB"}[n.Name[4] == '0']
		n.Labels[scheduling.LabelCUDADriverVersionFull] = "550.54.15"
		n.Labels[scheduling.LabelCUDARuntimeVersionFull] = "12.4"
		productOf[n.Name] = n.Labels[scheduling.LabelGPUProduct]
	}
	return nodes, productOf
}

// Members whose GPU annotations differ are planned apart: they may not
// share one Filter pass. Members that differ only in rank do.
func TestFilterSignatureSeesGPUAnnotations(t *testing.T) {
	a := member("g", "a", "8")
	b := member("g", "b", "8")
	b.Labels["training.kubeflow.org/replica-index"] = "1"
	sig := func(p *v1.Pod) string { return eligibility.FilterSignature(p, capacity.PodAmounts(p)) }
	require.Equal(t, sig(a), sig(b))
	b.Annotations = map[string]string{scheduling.AnnotationMinCUDA: "12.4"}
	require.NotEqual(t, sig(a), sig(b))
	c := a.DeepCopy()
	c.Annotations = map[string]string{"batch.kubernetes.io/job-completion-index": "3"}
	require.Equal(t, sig(a), sig(c), "other annotations do not count")
}
