package gpufleet

import (
	"context"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/plugintest"
)

const (
	testNS        = "team-a"
	testScheduler = plugintest.SchedulerName
	gpu           = v1.ResourceName(scheduling.ResourceGPU)
)

// testEnv is the shared plugin test environment (plugintest.Env) with
// GPUFleet registered at PreFilter and Filter, and a snapshot of the test's
// nodes.
type testEnv struct {
	*plugintest.Env
	t   testing.TB
	ctx context.Context
	fh  framework.Framework
	pl  *Plugin
	// devices hands the plugin its device inventories.
	devices capacity.SharedInventories
}

func defaultArgs() *config.GPUFleetArgs {
	return &config.GPUFleetArgs{UnlabelledNodes: config.UnlabelledNodesSkip, CapacityTypeLabels: scheduling.DefaultCapacityTypeLabels()}
}

// envOption changes what an environment starts with.
type envOption func(*plugintest.Config)

// withNativePodGroups has the gang sources watch native PodGroups, as where
// the scheduler schedules them.
func withNativePodGroups() envOption { return func(c *plugintest.Config) { c.WatchNative = true } }

// withDRA gives the framework a DRA manager, as kube-scheduler's with
// DynamicResourceAllocation on, and the cluster objs: ResourceSlices,
// DeviceClasses, ResourceClaims.
func withDRA(objs ...runtime.Object) envOption {
	return func(c *plugintest.Config) {
		c.DRA = true
		c.Objects = append(c.Objects, objs...)
	}
}

func newTestEnv(t testing.TB, nodes []*v1.Node, pods []*v1.Pod, pgs []*v1alpha1.PodGroup, args *config.GPUFleetArgs, opts ...envOption) *testEnv {
	t.Helper()
	if args == nil {
		args = defaultArgs()
	}
	env := &testEnv{t: t}
	cfg := plugintest.Config{
		Nodes: nodes, Pods: pods, PodGroups: pgs,
		Plugins: func(sources *gang.Sources) []tf.RegisterPluginFunc {
			factory := func(ctx context.Context, _ runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
				// As pkg/scheduler does: devices shared by the scheduler's
				// plugins, nil without a DRA manager.
				pl, err := newPlugin(ctx, args, fh, sources, WithDevices(env.devices.ForDRAManager(ctx, fh.SharedDRAManager())))
				env.pl = pl
				return pl, err
			}
			return []tf.RegisterPluginFunc{
				tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
				tf.RegisterPluginAsExtensions(Name, factory, "PreFilter", "Filter"),
				tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
			}
		},
	}
	for _, o := range opts {
		o(&cfg)
	}
	env.Env = plugintest.New(t, cfg)
	env.ctx, env.fh = env.Ctx, env.Framework
	return env
}

// preFilter runs the profile's PreFilter plugins for pod.
func (env *testEnv) preFilter(pod *v1.Pod) (fwk.CycleState, *fwk.Status) {
	env.t.Helper()
	state := framework.NewCycleState()
	_, status, _ := env.fh.RunPreFilterPlugins(env.ctx, state, pod)
	return state, status
}

// feasible runs PreFilter and then Filter on every node, and returns the
// nodes that pass with the messages of those that do not.
func (env *testEnv) feasible(pod *v1.Pod) ([]string, map[string]string, *fwk.Status) {
	env.t.Helper()
	state, status := env.preFilter(pod)
	if !status.IsSuccess() {
		return nil, nil, status
	}
	infos, err := env.Snapshot.NodeInfos().List()
	if err != nil {
		env.t.Fatal(err)
	}
	var ok []string
	why := map[string]string{}
	for _, ni := range infos {
		s := env.fh.RunFilterPlugins(env.ctx, state, pod, ni)
		if s.IsSuccess() {
			ok = append(ok, ni.Node().Name)
			continue
		}
		if s.Code() != fwk.UnschedulableAndUnresolvable {
			env.t.Errorf("node %s: code %v, want UnschedulableAndUnresolvable (evictions cannot change labels)", ni.Node().Name, s.Code())
		}
		why[ni.Node().Name] = strings.Join(s.Reasons(), "; ")
	}
	sort.Strings(ok)
	return ok, why, nil
}

// node builds a GPU node with 8 GPUs and the given labels.
func node(name string, labels ...map[string]string) *v1.Node {
	w := st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{
		v1.ResourceCPU: "64", v1.ResourceMemory: "512Gi", v1.ResourcePods: "110", gpu: "8",
	})
	for _, l := range labels {
		for k, v := range l {
			w.Label(k, v)
		}
	}
	return w.Obj()
}

// gfd is what GPU feature discovery labels a node with: the product, the
// driver and the CUDA version it supports (current keys), the compute
// capability.
func gfd(product, driver, cuda, compute string) map[string]string {
	l := map[string]string{
		scheduling.LabelGPUPresent:             "true",
		scheduling.LabelGPUProduct:             product,
		scheduling.LabelCUDADriverVersionFull:  driver,
		scheduling.LabelCUDARuntimeVersionFull: cuda,
	}
	if major, minor, ok := strings.Cut(compute, "."); ok {
		l[scheduling.LabelGPUComputeMajor], l[scheduling.LabelGPUComputeMinor] = major, minor
	}
	return l
}

func label(kv ...string) map[string]string {
	l := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	return l
}

// pod builds a pod outside any gang asking for the given resources.
func pod(name string, req map[v1.ResourceName]string) *st.PodWrapper {
	return st.MakePod().Namespace(testNS).Name(name).UID(testNS + "/" + name).SchedulerName(testScheduler).Req(req)
}

func gpus(n string) map[v1.ResourceName]string {
	return map[v1.ResourceName]string{v1.ResourceCPU: "1", gpu: n}
}
