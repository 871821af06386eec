package coscheduling

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeports"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	testingclock "k8s.io/utils/clock/testing"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgfake "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/fake"
	pginformers "sigs.k8s.io/scheduler-plugins/pkg/generated/informers/externalversions"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

const (
	testNS        = "team-a"
	testScheduler = "gpu-gang"
	gpu           = v1.ResourceName("nvidia.com/gpu")
)

// testEnv is a real scheduling framework with the plugin registered, fed by
// fake informers and a snapshot the test updates the way the scheduler's
// cache would.
type testEnv struct {
	t         testing.TB
	ctx       context.Context
	fh        framework.Framework
	pl        *Plugin
	clock     *testingclock.FakeClock
	recorder  *events.FakeRecorder
	activator *fakeActivator
	nominator *fakeNominator
	snapshot  *internalcache.Snapshot
	client    *fake.Clientset
	probes    int
	// pgInformer is fed through its store; see newTestEnv.
	pgInformer cache.SharedIndexInformer
	pods       []*v1.Pod
	nodes      []*v1.Node
}

type envOption func(*envConfig)

type envConfig struct {
	args    *config.CoschedulingArgs
	planner placement.Planner
	// filters are more plugins to register at PreFilter and Filter, as a
	// profile would have them.
	filters []tf.RegisterPluginFunc
	// objects are more API objects for the fake clientset.
	objects []runtime.Object
	// setup runs on the plugin once it is built, before any informer
	// starts, as New's own wiring does (see withNativePodGroups).
	setup []func(*Plugin, fwk.Handle) error
}

// withFilters registers the named in-tree Filter plugins (with their
// PreFilter) before the gang plugin, as the default profile orders them.
func withFilters(t testing.TB, names ...string) envOption {
	return func(c *envConfig) {
		for _, name := range names {
			switch name {
			case interpodaffinity.Name:
				c.filters = append(c.filters, tf.RegisterPluginAsExtensions(name, func(ctx context.Context, _ runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
					return interpodaffinity.New(ctx, &schedconfig.InterPodAffinityArgs{}, fh, feature.Features{})
				}, "PreFilter", "Filter"))
			case nodeports.Name:
				c.filters = append(c.filters, tf.RegisterPluginAsExtensions(name, func(ctx context.Context, _ runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
					return nodeports.New(ctx, nil, fh, feature.Features{})
				}, "PreFilter", "Filter"))
			default:
				t.Fatalf("withFilters: no constructor for %q", name)
			}
		}
	}
}

// withFilterPlugin registers a test's own Filter plugin.
func withFilterPlugin(name string, pl fwk.Plugin) envOption {
	return func(c *envConfig) {
		c.filters = append(c.filters, tf.RegisterFilterPlugin(name, func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
			return pl, nil
		}))
	}
}

func withArgs(a config.CoschedulingArgs) envOption { return func(c *envConfig) { c.args = &a } }

func defaultTestArgs() config.CoschedulingArgs {
	return config.CoschedulingArgs{PermitWaitingTimeSeconds: 60, PodGroupBackoffSeconds: 2, PodGroupMaxBackoffSeconds: 60, TopologyPreset: "nvidia"}
}

func newTestEnv(t testing.TB, nodes []*v1.Node, pods []*v1.Pod, pgs []*v1alpha1.PodGroup, opts ...envOption) *testEnv {
	t.Helper()
	cfg := envConfig{planner: placement.Greedy{}}
	args := defaultTestArgs()
	cfg.args = &args
	for _, o := range opts {
		o(&cfg)
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
	objs = append(objs, cfg.objects...)
	cs := fake.NewClientset(objs...)
	informerFactory := informers.NewSharedInformerFactory(cs, 0)
	// The PodGroup informer is fed through its store rather than started:
	// the generated fake clientset cannot serve the watch-list stream that
	// client-go's reflector asks for.
	pgFactory := pginformers.NewSharedInformerFactory(pgfake.NewSimpleClientset(), 0)
	pgInformer := pgFactory.Scheduling().V1alpha1().PodGroups()
	for _, pg := range pgs {
		if err := pgInformer.Informer().GetStore().Add(pg); err != nil {
			t.Fatalf("adding PodGroup %s: %v", pg.Name, err)
		}
	}

	env := &testEnv{
		t:         t,
		ctx:       ctx,
		clock:     testingclock.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)),
		recorder:  events.NewFakeRecorder(1000),
		activator: &fakeActivator{},
		nominator: &fakeNominator{},
		client:    cs,
		nodes:     nodes,
	}
	var assigned []*v1.Pod
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			assigned = append(assigned, p)
		}
	}
	env.snapshot = internalcache.NewSnapshot(assigned, nodes)
	env.pods = assigned

	factory := func(ctx context.Context, _ runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
		pl, err := newPlugin(ctx, cfg.args, fh, pgInformer.Lister(), pgInformer.Informer(), env.clock, cfg.planner)
		for _, setup := range cfg.setup {
			if err == nil {
				err = setup(pl, fh)
			}
		}
		env.pl = pl
		return pl, err
	}
	// NodeResourcesFit runs too, so that pods do not land on full nodes.
	fit := func(ctx context.Context, _ runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
		return noderesources.NewFit(ctx, &schedconfig.NodeResourcesFitArgs{ScoringStrategy: &schedconfig.ScoringStrategy{
			Type:      schedconfig.LeastAllocated,
			Resources: []schedconfig.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}},
		}}, fh, feature.Features{})
	}
	registrations := []tf.RegisterPluginFunc{tf.RegisterPluginAsExtensions(noderesources.Name, fit, "PreFilter", "Filter")}
	registrations = append(registrations, cfg.filters...)
	registrations = append(registrations,
		tf.RegisterPluginAsExtensions(Name, factory, "QueueSort", "PreEnqueue", "PreFilter", "Filter", "PostFilter", "Reserve", "Permit"),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New))
	fh, err := tf.NewFramework(ctx, registrations, testScheduler,
		frameworkruntime.WithInformerFactory(informerFactory),
		frameworkruntime.WithSnapshotSharedLister(env.snapshot),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
		frameworkruntime.WithPodActivator(env.activator),
		frameworkruntime.WithPodNominator(env.nominator),
		frameworkruntime.WithEventRecorder(env.recorder),
		frameworkruntime.WithClientSet(cs),
	)
	if err != nil {
		t.Fatalf("building framework: %v", err)
	}
	env.fh = fh
	env.pgInformer = pgInformer.Informer()
	informerFactory.Start(ctx.Done())
	informerFactory.WaitForCacheSync(ctx.Done())
	return env
}

// schedule runs one scheduling cycle for pod up to Permit, as the scheduler
// would: PreFilter, Filter on the candidate nodes (in name order), then
// assume on the first feasible node, Reserve and Permit. It returns the node
// (empty if none) and the status of the step that ended the cycle.
func (e *testEnv) schedule(pod *v1.Pod) (string, *fwk.Status) {
	e.t.Helper()
	state := framework.NewCycleState()
	res, status, _ := e.fh.RunPreFilterPlugins(e.ctx, state, pod)
	if !status.IsSuccess() {
		e.fh.RunPostFilterPlugins(e.ctx, state, pod, framework.NewDefaultNodeToStatus())
		return "", status
	}
	infos, err := e.snapshot.NodeInfos().List()
	if err != nil {
		e.t.Fatal(err)
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Node().Name < infos[j].Node().Name })
	// As the scheduler does: nodes PreFilter left out share one status,
	// the others get their Filter verdict.
	statuses := framework.NewDefaultNodeToStatus()
	if res != nil && !res.AllNodes() {
		statuses.SetAbsentNodesStatus(fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node(s) didn't satisfy plugin(s) [Coscheduling]"))
	}
	node := ""
	var last *fwk.Status
	for _, ni := range infos {
		if res != nil && !res.AllNodes() && !res.NodeNames.Has(ni.Node().Name) {
			continue
		}
		if s := e.fh.RunFilterPlugins(e.ctx, state, pod, ni); !s.IsSuccess() {
			statuses.Set(ni.Node().Name, s)
			last = s
			continue
		}
		node = ni.Node().Name
		break
	}
	if node == "" {
		e.fh.RunPostFilterPlugins(e.ctx, state, pod, statuses)
		if last == nil {
			last = fwk.NewStatus(fwk.Unschedulable, "no candidate node")
		}
		return "", last
	}
	assumed := pod.DeepCopy()
	assumed.Spec.NodeName = node
	e.assume(assumed)
	if s := e.fh.RunReservePluginsReserve(e.ctx, state, assumed, node); !s.IsSuccess() {
		return node, s
	}
	waitTimes, s := e.fh.RunPermitPlugins(e.ctx, state, assumed, node)
	if s.IsWait() {
		e.fh.AddWaitingPod(assumed, waitTimes)
		return node, s
	}
	if !s.IsSuccess() {
		e.fh.RunReservePluginsUnreserve(e.ctx, state, assumed, node)
		e.forget(assumed)
		return node, s
	}
	return node, nil
}

// assume adds a pod to the snapshot as the cache does for an assumed pod.
func (e *testEnv) assume(pod *v1.Pod) {
	e.t.Helper()
	e.pods = append(e.pods, pod)
	*e.snapshot = *internalcache.NewSnapshot(e.pods, e.nodes)
}

// forget removes an assumed pod from the snapshot, as the cache does when a
// reservation is given back.
func (e *testEnv) forget(pod *v1.Pod) {
	e.t.Helper()
	kept := e.pods[:0]
	for _, p := range e.pods {
		if p.UID != pod.UID {
			kept = append(kept, p)
		}
	}
	e.pods = kept
	*e.snapshot = *internalcache.NewSnapshot(e.pods, e.nodes)
}

// waitAsync starts WaitOnPermit for a pod that Permit told to wait, the way
// the binding cycle does, and reports its outcome on the returned channel.
// A rejected pod is unreserved, as the scheduler does.
func (e *testEnv) waitAsync(pod *v1.Pod, node string) <-chan *fwk.Status {
	out := make(chan *fwk.Status, 1)
	assumed := pod.DeepCopy()
	assumed.Spec.NodeName = node
	go func() {
		s := e.fh.WaitOnPermit(e.ctx, assumed)
		if !s.IsSuccess() {
			e.fh.RunReservePluginsUnreserve(e.ctx, framework.NewCycleState(), assumed, node)
		}
		out <- s
	}()
	return out
}

// syncWatch returns once the pod informer's watch is live. The fake
// clientset does not replay events from a resourceVersion, so a change made
// between the informer's list and its watch would be lost; a probe pod
// created now can only reach the lister through the watch.
func (e *testEnv) syncWatch() {
	e.t.Helper()
	e.probes++
	probe := st.MakePod().Namespace("probe").Name(fmt.Sprint("probe-", e.probes)).Obj()
	if _, err := e.client.CoreV1().Pods(probe.Namespace).Create(e.ctx, probe, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("creating watch probe: %v", err)
	}
	lister := e.fh.SharedInformerFactory().Core().V1().Pods().Lister()
	if err := wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		_, err := lister.Pods(probe.Namespace).Get(probe.Name)
		return err == nil, nil
	}); err != nil {
		e.t.Fatalf("the pod informer never saw the watch probe: %v", err)
	}
}

// bind records that an assumed member was bound, as the binding cycle and
// the informer would: the lister shows it on its node.
func (e *testEnv) bind(pod *v1.Pod, node string) *v1.Pod {
	e.t.Helper()
	bound := pod.DeepCopy()
	bound.Spec.NodeName = node
	bound.ResourceVersion = ""
	e.update(bound)
	return bound
}

// update replaces a pod through the fake clientset and waits until the
// scheduler's informer has the new version.
func (e *testEnv) update(pod *v1.Pod) {
	e.t.Helper()
	e.syncWatch()
	updated, err := e.client.CoreV1().Pods(pod.Namespace).Update(e.ctx, pod, metav1.UpdateOptions{})
	if err != nil {
		e.t.Fatalf("updating pod %s: %v", pod.Name, err)
	}
	e.waitForLister(pod, func(p *v1.Pod) bool { return p.ResourceVersion == updated.ResourceVersion })
}

// create adds a pod through the fake clientset and waits for the informer.
func (e *testEnv) create(pod *v1.Pod) {
	e.t.Helper()
	e.syncWatch()
	pod = pod.DeepCopy()
	pod.ResourceVersion = ""
	if _, err := e.client.CoreV1().Pods(pod.Namespace).Create(e.ctx, pod, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("creating pod %s: %v", pod.Name, err)
	}
	e.waitForLister(pod, func(p *v1.Pod) bool { return p.UID == pod.UID })
}

// delete removes a pod through the fake clientset, waits until the informer
// has dropped it, and forgets it from the snapshot.
func (e *testEnv) delete(pod *v1.Pod) {
	e.t.Helper()
	e.syncWatch()
	if err := e.client.CoreV1().Pods(pod.Namespace).Delete(e.ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatalf("deleting pod %s: %v", pod.Name, err)
	}
	e.waitForLister(pod, nil)
	e.forget(pod)
}

// waitForLister waits until the scheduler's pod lister shows pod so that ok
// holds, or, with ok nil, no longer shows it.
func (e *testEnv) waitForLister(pod *v1.Pod, ok func(*v1.Pod) bool) {
	e.t.Helper()
	lister := e.fh.SharedInformerFactory().Core().V1().Pods().Lister()
	if err := wait.PollUntilContextTimeout(e.ctx, 5*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		p, err := lister.Pods(pod.Namespace).Get(pod.Name)
		if ok == nil {
			return err != nil, nil
		}
		return err == nil && ok(p), nil
	}); err != nil {
		e.t.Fatalf("the pod informer never caught up with pod %s: %v", pod.Name, err)
	}
}

// recorded drains the fake recorder and returns "Type Reason Note" lines.
func (e *testEnv) recorded() []string {
	var out []string
	for {
		select {
		case ev := <-e.recorder.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func hasEvent(events []string, reason, substr string) bool {
	for _, ev := range events {
		if strings.Contains(ev, " "+reason+" ") && strings.Contains(ev, substr) {
			return true
		}
	}
	return false
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

func (a *fakeActivator) reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.activated = nil
}

func (a *fakeActivator) get() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.activated...)
}

// lastInQueue is a queue position behind every gang, from which every hold
// is seen.
var lastInQueue = ledger.QueueOrder{Priority: math.MinInt32, Created: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), Group: "~"}
