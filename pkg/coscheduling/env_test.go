package coscheduling

import (
	"context"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeports"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	testingclock "k8s.io/utils/clock/testing"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/placement/placementtest"
	"github.com/gpu-gang/gpu-gang/pkg/plugintest"
)

const (
	testNS        = "team-a"
	testScheduler = plugintest.SchedulerName
	gpu           = v1.ResourceName("nvidia.com/gpu")
)

// testEnv is the shared plugin test environment (plugintest.Env) with the
// gang plugin registered, and a snapshot the test updates the way the
// scheduler's cache would. Its short fields are the environment's, under the
// names this package's tests use.
type testEnv struct {
	*plugintest.Env
	t         testing.TB
	ctx       context.Context
	fh        framework.Framework
	client    *fake.Clientset
	snapshot  *internalcache.Snapshot
	activator *plugintest.Activator
	pl        *Plugin
	clock     *testingclock.FakeClock
	nominator *fakeNominator
	pods      []*v1.Pod
	nodes     []*v1.Node
}

type envOption func(*envConfig)

type envConfig struct {
	args    *config.CoschedulingArgs
	planner placement.Planner
	// filters are more plugins to register at PreFilter and Filter, as a
	// profile would have them.
	filters []func(*gang.Sources) tf.RegisterPluginFunc
	// objects are more API objects for the fake clientset.
	objects []runtime.Object
	// dra gives the framework a DRA manager, which reads the
	// ResourceSlices, DeviceClasses and ResourceClaims among objects.
	dra bool
	// watchNative and nativeNote say whether the gang sources watch native
	// PodGroups, and why (see withNativePodGroups).
	watchNative bool
	nativeNote  string
	// watchComposites has them watch CompositePodGroups too (see
	// withComposites).
	watchComposites bool
	// profile, when set, registers a whole profile in place of the test's
	// own plugins (see withShippedProfile); gangPlugin builds the gang
	// plugin.
	profile func(sources *gang.Sources, gangPlugin frameworkruntime.PluginFactory) tf.RegisterPluginFunc
	// stock, when set, meters the PreFilter of kube-scheduler's own
	// resource plugins (NodeResourcesFit, DynamicResources) for the pod
	// being scheduled (see withStockMeter).
	stock *threadMeter
}

// withFilters registers the named in-tree Filter plugins (with their
// PreFilter) before the gang plugin, as the default profile orders them.
func withFilters(t testing.TB, names ...string) envOption {
	return func(c *envConfig) {
		for _, name := range names {
			var factory frameworkruntime.PluginFactory
			switch name {
			case interpodaffinity.Name:
				factory = func(ctx context.Context, _ runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
					return interpodaffinity.New(ctx, &schedconfig.InterPodAffinityArgs{}, fh, feature.Features{})
				}
			case nodeaffinity.Name:
				factory = func(ctx context.Context, _ runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
					return nodeaffinity.New(ctx, &schedconfig.NodeAffinityArgs{}, fh, feature.Features{})
				}
			case nodeports.Name:
				factory = func(ctx context.Context, _ runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
					return nodeports.New(ctx, nil, fh, feature.Features{})
				}
			default:
				t.Fatalf("withFilters: no constructor for %q", name)
			}
			c.filters = append(c.filters, func(*gang.Sources) tf.RegisterPluginFunc {
				return tf.RegisterPluginAsExtensions(name, factory, "PreFilter", "Filter")
			})
		}
	}
}

// withFilterPlugin registers a test's own Filter plugin.
func withFilterPlugin(name string, pl fwk.Plugin) envOption {
	return func(c *envConfig) {
		c.filters = append(c.filters, func(*gang.Sources) tf.RegisterPluginFunc {
			return tf.RegisterFilterPlugin(name, func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
				return pl, nil
			})
		})
	}
}

// withDRA gives the framework the scheduler's DRA manager and registers
// DynamicResources before the gang plugin, as the default profile orders
// them; NodeResourcesFit then runs with the process's features, so that it
// leaves an extended resource a DeviceClass serves to DynamicResources on
// nodes that do not advertise it.
func withDRA() envOption {
	return func(c *envConfig) {
		c.dra = true
		c.filters = append(c.filters, func(*gang.Sources) tf.RegisterPluginFunc { return dynamicResources(c.stock) })
	}
}

func withArgs(a config.CoschedulingArgs) envOption { return func(c *envConfig) { c.args = &a } }

func defaultTestArgs() config.CoschedulingArgs {
	return config.CoschedulingArgs{PermitWaitingTimeSeconds: 60, PodGroupBackoffSeconds: 2, PodGroupMaxBackoffSeconds: 60, TopologyPreset: "nvidia"}
}

func newTestEnv(t testing.TB, nodes []*v1.Node, pods []*v1.Pod, pgs []*v1alpha1.PodGroup, opts ...envOption) *testEnv {
	t.Helper()
	cfg := envConfig{planner: placementtest.Greedy{}}
	args := defaultTestArgs()
	cfg.args = &args
	for _, o := range opts {
		o(&cfg)
	}
	env := &testEnv{
		clock:     testingclock.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)),
		nominator: &fakeNominator{},
		nodes:     nodes,
	}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			env.pods = append(env.pods, p)
		}
	}
	register := func(sources *gang.Sources) []tf.RegisterPluginFunc {
		if cfg.profile != nil {
			return []tf.RegisterPluginFunc{cfg.profile(sources, shippedPluginFactory(env, sources))}
		}
		factory := func(ctx context.Context, _ runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
			pl, err := newPlugin(ctx, cfg.args, fh, sources, env.clock, cfg.planner)
			env.pl = pl
			return pl, err
		}
		// NodeResourcesFit runs too, so that pods do not land on full nodes.
		fts := feature.Features{}
		if cfg.dra {
			fts = schedulerFeatures()
		}
		registrations := []tf.RegisterPluginFunc{nodeResourcesFit(fts, cfg.stock)}
		for _, f := range cfg.filters {
			registrations = append(registrations, f(sources))
		}
		return append(registrations,
			tf.RegisterPluginAsExtensions(Name, factory, "QueueSort", "PreEnqueue", "PreFilter", "Filter", "PostFilter", "PreScore", "Score", "Reserve", "Permit"),
			tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New))
	}
	env.Env = plugintest.New(t, plugintest.Config{
		Nodes: nodes, Pods: pods, PodGroups: pgs, Objects: cfg.objects, DRA: cfg.dra,
		WatchNative: cfg.watchNative, NativeNote: cfg.nativeNote, WatchComposites: cfg.watchComposites,
		Plugins: register,
		Options: []frameworkruntime.Option{frameworkruntime.WithPodNominator(env.nominator)},
	})
	env.t, env.ctx, env.fh, env.client = t, env.Ctx, env.Framework, env.Client
	env.snapshot, env.activator = env.Snapshot, env.Activator
	if env.pl != nil {
		// The informers' caches are synced, but the plugin's own node
		// handler may still be receiving the initial adds, each of which
		// moves the node generation: a test that compares two plans' node order
		// would see it change between them.
		require.Eventually(t, func() bool { return env.pl.core.NodeGeneration() >= uint64(len(nodes)) },
			wait.ForeverTestTimeout, time.Millisecond, "the plugin's node handler did not see the %d initial nodes", len(nodes))
	}
	return env
}

// nodeResourcesFit registers NodeResourcesFit, with fts, at PreFilter and
// Filter; m, when not nil, meters its PreFilter.
func nodeResourcesFit(fts feature.Features, m *threadMeter) tf.RegisterPluginFunc {
	fit := func(ctx context.Context, _ runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
		pl, err := noderesources.NewFit(ctx, &schedconfig.NodeResourcesFitArgs{ScoringStrategy: &schedconfig.ScoringStrategy{
			Type:      schedconfig.LeastAllocated,
			Resources: []schedconfig.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}},
		}}, fh, fts)
		if err != nil || m == nil {
			return pl, err
		}
		return &meteredFit{Fit: pl.(*noderesources.Fit), m: m}, nil
	}
	return tf.RegisterPluginAsExtensions(noderesources.Name, fit, "PreFilter", "Filter")
}

// ledger is the plugin's memory of gangs. Tests read and prime it through
// package ledger's own API, as the plugin's extension points do; the one
// plugin field they reach is this.
func (e *testEnv) ledger() *ledger.Ledger { return e.pl.ledger }

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

// preEnqueue runs PreEnqueue as the scheduling queue does, under the
// queue's lock, which activating pods takes: a plugin that activated pods
// from PreEnqueue would deadlock kube-scheduler, and fails the test here.
func (e *testEnv) preEnqueue(pod *v1.Pod) *fwk.Status {
	e.t.Helper()
	var status *fwk.Status
	if !e.activator.UnderQueueLock(5*time.Second, func() { status = e.pl.PreEnqueue(e.ctx, pod) }) {
		e.t.Fatalf("PreEnqueue of %s activated pods under the scheduling queue's lock, where kube-scheduler deadlocks", pod.Name)
	}
	return status
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

// syncWatch returns once the pod informer's watch is live (see
// plugintest.Env.SyncWatch).
func (e *testEnv) syncWatch() {
	e.t.Helper()
	e.SyncWatch()
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
	e.UpdatePod(pod)
}

// create adds a pod through the fake clientset and waits for the informer.
func (e *testEnv) create(pod *v1.Pod) {
	e.t.Helper()
	e.CreatePod(pod)
}

// delete removes a pod through the fake clientset, waits until the informer
// has dropped it, and forgets it from the snapshot.
func (e *testEnv) delete(pod *v1.Pod) {
	e.t.Helper()
	e.DeletePod(pod)
	e.forget(pod)
}

// waitForLister waits until the scheduler's pod lister shows pod so that ok
// holds, or, with ok nil, no longer shows it.
func (e *testEnv) waitForLister(pod *v1.Pod, ok func(*v1.Pod) bool) {
	e.t.Helper()
	e.WaitForPod(pod, ok)
}

// recorded drains the recorded Events and returns "Type Reason Note" lines.
func (e *testEnv) recorded() []string { return e.Events.Drain() }

func hasEvent(events []string, reason, substr string) bool {
	for _, ev := range events {
		if strings.Contains(ev, " "+reason+" ") && strings.Contains(ev, substr) {
			return true
		}
	}
	return false
}

// lastInQueue is a queue position behind every gang, from which every hold
// is seen.
var lastInQueue = ledger.QueueOrder{Priority: math.MinInt32, Created: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), Group: "~"}
