package gpufleet

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgfake "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/fake"
	pginformers "sigs.k8s.io/scheduler-plugins/pkg/generated/informers/externalversions"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

const (
	testNS        = "team-a"
	testScheduler = "gpu-gang"
	gpu           = v1.ResourceName(scheduling.ResourceGPU)
)

// testEnv is a real scheduling framework with GPUFleet registered at
// PreFilter and Filter, fed by fake informers and a snapshot of the test's
// nodes.
type testEnv struct {
	t         testing.TB
	ctx       context.Context
	fh        framework.Framework
	pl        *Plugin
	recorder  *events.FakeRecorder
	activator *fakeActivator
	snapshot  *internalcache.Snapshot
	// pgInformer is fed through its store: the generated fake clientset
	// cannot serve the watch-list stream client-go's reflector asks for.
	pgInformer cache.SharedIndexInformer
	// cs and informers are the cluster's own clientset and informers, on
	// which native PodGroups can be watched.
	cs        *fake.Clientset
	informers informers.SharedInformerFactory
}

func defaultArgs() *config.GPUFleetArgs {
	return &config.GPUFleetArgs{UnlabelledNodes: config.UnlabelledNodesSkip, CapacityTypeLabels: scheduling.DefaultCapacityTypeLabels()}
}

func newTestEnv(t testing.TB, nodes []*v1.Node, pods []*v1.Pod, pgs []*v1alpha1.PodGroup, args *config.GPUFleetArgs) *testEnv {
	t.Helper()
	if args == nil {
		args = defaultArgs()
	}
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)

	objs := make([]runtime.Object, 0, len(nodes)+len(pods))
	for _, n := range nodes {
		objs = append(objs, n)
	}
	for _, p := range pods {
		objs = append(objs, p)
	}
	cs := fake.NewClientset(objs...)
	informerFactory := informers.NewSharedInformerFactory(cs, 0)
	pgFactory := pginformers.NewSharedInformerFactory(pgfake.NewSimpleClientset(), 0)
	pgInformer := pgFactory.Scheduling().V1alpha1().PodGroups()
	for _, pg := range pgs {
		if err := pgInformer.Informer().GetStore().Add(pg); err != nil {
			t.Fatalf("adding PodGroup %s: %v", pg.Name, err)
		}
	}
	env := &testEnv{
		t:          t,
		ctx:        ctx,
		recorder:   events.NewFakeRecorder(1000),
		activator:  &fakeActivator{},
		snapshot:   internalcache.NewSnapshot(nil, nodes),
		pgInformer: pgInformer.Informer(),
		cs:         cs,
		informers:  informerFactory,
	}
	factory := func(ctx context.Context, _ runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
		pl, err := NewWithPodGroups(ctx, args, fh, pgInformer.Lister(), pgInformer.Informer())
		env.pl = pl
		return pl, err
	}
	fh, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterPluginAsExtensions(Name, factory, "PreFilter", "Filter"),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}, testScheduler,
		frameworkruntime.WithInformerFactory(informerFactory),
		frameworkruntime.WithSnapshotSharedLister(env.snapshot),
		frameworkruntime.WithPodActivator(env.activator),
		frameworkruntime.WithEventRecorder(env.recorder),
		frameworkruntime.WithClientSet(cs),
	)
	if err != nil {
		t.Fatalf("building framework: %v", err)
	}
	env.fh = fh
	informerFactory.Start(ctx.Done())
	informerFactory.WaitForCacheSync(ctx.Done())
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
	infos, err := env.snapshot.NodeInfos().List()
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

// events drains the recorded Events.
func (env *testEnv) events() []string {
	var out []string
	for {
		select {
		case e := <-env.recorder.Events:
			out = append(out, e)
		case <-time.After(50 * time.Millisecond):
			return out
		}
	}
}

type fakeActivator struct {
	mu        sync.Mutex
	activated []string
}

func (a *fakeActivator) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range pods {
		a.activated = append(a.activated, k)
	}
	sort.Strings(a.activated)
}

func (a *fakeActivator) get() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.activated...)
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
