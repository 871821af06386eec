// Package plugintest runs gpu-gang's scheduler plugins for their packages'
// tests: in a real scheduling framework, built with kube-scheduler's testing
// helpers, fed by fake informers, with the plugins reading gangs from one
// gang.Sources as they do in the scheduler. It is test support only.
package plugintest

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgfake "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/fake"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// SchedulerName is the profile the framework runs as.
const SchedulerName = "gpu-gang"

// probeNamespace holds the objects SyncWatch creates.
const probeNamespace = "probe"

// Config says what an Env starts with.
type Config struct {
	Nodes []*v1.Node
	// Pods exist from the start; those bound to a node are in the
	// snapshot too.
	Pods []*v1.Pod
	// PodGroups are the scheduler-plugins PodGroups that exist from the
	// start.
	PodGroups []*v1alpha1.PodGroup
	// Objects are more objects of the cluster's clientset, native
	// PodGroups among them.
	Objects []runtime.Object
	// WatchNative has the gang sources watch native PodGroups, as the
	// scheduler does where it schedules them; otherwise they are not
	// watched, for the reason NativeNote gives.
	WatchNative bool
	NativeNote  string
	// WatchComposites has the gang sources watch CompositePodGroups too
	// (with native PodGroups), as where the API server serves them.
	WatchComposites bool
	// DRA gives the framework a DRA manager, as kube-scheduler's with
	// DynamicResourceAllocation on: ResourceSlices, ResourceClaims and
	// DeviceClasses among Objects are what it reads.
	DRA bool
	// Plugins registers the plugins under test, which read gangs from
	// sources, and the others the test runs with them (one QueueSort and
	// one Bind plugin at least).
	Plugins func(sources *gang.Sources) []tf.RegisterPluginFunc
	// Options are more options for the framework, such as a pod nominator.
	Options []frameworkruntime.Option
}

// Env is a scheduling framework with the plugins under test registered.
// Its informers run, and its snapshot is what the test makes it: the
// scheduler's cache does not run.
type Env struct {
	T         testing.TB
	Ctx       context.Context
	Framework framework.Framework
	// Client is the cluster's clientset; PodGroupClient serves
	// scheduler-plugins PodGroups, which are a CRD.
	Client         *fake.Clientset
	PodGroupClient *pgfake.Clientset
	// Informers are the scheduler's informers, started once the plugins
	// are built, as the scheduler starts them.
	Informers informers.SharedInformerFactory
	// Sources are the gang sources every plugin reads.
	Sources *gang.Sources
	// DRA is the framework's DRA manager, nil unless Config.DRA.
	DRA       fwk.SharedDRAManager
	Snapshot  *internalcache.Snapshot
	Activator *Activator
	Events    *Events

	// probes counts the watch probes made so far, to name the next.
	probes int
}

// New builds the framework on cfg, starts its informers and waits until
// they, and the gang sources' subscribers, have caught up with the
// cluster. Pods the plugins activated meanwhile are forgotten: the test
// starts with nothing activated.
func New(t testing.TB, cfg Config) *Env {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)

	objs := make([]runtime.Object, 0, len(cfg.Nodes)+len(cfg.Pods)+len(cfg.Objects))
	for _, n := range cfg.Nodes {
		objs = append(objs, n)
	}
	var assigned []*v1.Pod
	for _, p := range cfg.Pods {
		objs = append(objs, p)
		if p.Spec.NodeName != "" {
			assigned = append(assigned, p)
		}
	}
	objs = append(objs, versionedClaims(cfg.Objects)...)
	pgObjs := make([]runtime.Object, len(cfg.PodGroups))
	for i, pg := range cfg.PodGroups {
		pgObjs[i] = pg
	}
	recorder := events.NewFakeRecorder(1000)
	env := &Env{
		T:              t,
		Ctx:            ctx,
		Client:         fake.NewClientset(objs...),
		PodGroupClient: pgfake.NewSimpleClientset(pgObjs...),
		Snapshot:       internalcache.NewSnapshot(assigned, cfg.Nodes),
		Activator:      &Activator{},
		Events:         &Events{recorder: recorder},
	}
	stampClaimVersions(env.Client)
	env.Informers = informers.NewSharedInformerFactory(env.Client, 0)

	// As the scheduler does: the PodGroup informer has synced before the
	// plugins are built, the native one starts with the others after.
	podGroups := gangtest.NewPodGroupInformer(env.PodGroupClient)
	if err := podGroups.SetTransform(gang.SlimPodGroup); err != nil {
		t.Fatalf("trimming PodGroups: %v", err)
	}
	go podGroups.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podGroups.HasSynced) {
		t.Fatal("the PodGroup informer did not sync")
	}
	in := gang.Informers{PodGroups: podGroups, NativeNote: cfg.NativeNote}
	if cfg.WatchNative {
		in.Native = env.Informers.Scheduling().V1beta1().PodGroups().Informer()
	}
	if cfg.WatchNative && cfg.WatchComposites {
		in.Composites = env.Informers.Scheduling().V1alpha3().CompositePodGroups().Informer()
	}
	env.Sources = gang.NewSources(in)

	var draOpts []frameworkruntime.Option
	draSynced := func() bool { return true }
	if cfg.DRA {
		env.DRA, draSynced = env.newDRAManager()
		draOpts = append(draOpts, frameworkruntime.WithSharedDRAManager(env.DRA))
	}
	opts := append([]frameworkruntime.Option{
		frameworkruntime.WithInformerFactory(env.Informers),
		frameworkruntime.WithSnapshotSharedLister(env.Snapshot),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
		frameworkruntime.WithPodActivator(env.Activator),
		frameworkruntime.WithEventRecorder(recorder),
		frameworkruntime.WithClientSet(env.Client),
	}, append(draOpts, cfg.Options...)...)
	fh, err := tf.NewFramework(ctx, cfg.Plugins(env.Sources), SchedulerName, opts...)
	if err != nil {
		t.Fatalf("building framework: %v", err)
	}
	env.Framework = fh
	env.Informers.Start(ctx.Done())
	env.Informers.WaitForCacheSync(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), env.Sources.HasSynced) {
		t.Fatal("the gang sources' subscribers did not catch up")
	}
	if !cache.WaitForCacheSync(ctx.Done(), draSynced) {
		t.Fatal("the DRA manager's claims and extended-resource mapping did not catch up")
	}
	env.Activator.Reset()
	return env
}

// SyncWatch returns once the pod informer's watch is live. The fake
// clientset does not replay events from a resourceVersion, so a change made
// between the informer's list and its watch would be lost; a probe pod
// created now can only reach the lister through the watch.
func (e *Env) SyncWatch() {
	e.T.Helper()
	lister := e.Informers.Core().V1().Pods().Lister()
	e.probe("pod", func(name string) error {
		probe := st.MakePod().Namespace(probeNamespace).Name(name).Obj()
		_, err := e.Client.CoreV1().Pods(probeNamespace).Create(e.Ctx, probe, metav1.CreateOptions{})
		return err
	}, func(name string) bool {
		_, err := lister.Pods(probeNamespace).Get(name)
		return err == nil
	})
}

// probe creates probe objects until an informer shows one: a probe made
// before the informer's watch started is lost, as any change would be.
func (e *Env) probe(kind string, create func(name string) error, seen func(name string) bool) {
	e.T.Helper()
	deadline := time.Now().Add(wait.ForeverTestTimeout)
	for time.Now().Before(deadline) {
		e.probes++
		name := fmt.Sprint("probe-", e.probes)
		if err := create(name); err != nil {
			e.T.Fatalf("creating %s watch probe: %v", kind, err)
		}
		if wait.PollUntilContextTimeout(e.Ctx, 5*time.Millisecond, time.Second, true, func(context.Context) (bool, error) {
			return seen(name), nil
		}) == nil {
			return
		}
	}
	e.T.Fatalf("the %s informer never saw a watch probe", kind)
}

// CreatePod adds a pod through the clientset and waits for the informer.
func (e *Env) CreatePod(pod *v1.Pod) {
	e.T.Helper()
	e.SyncWatch()
	pod = pod.DeepCopy()
	pod.ResourceVersion = ""
	if _, err := e.Client.CoreV1().Pods(pod.Namespace).Create(e.Ctx, pod, metav1.CreateOptions{}); err != nil {
		e.T.Fatalf("creating pod %s: %v", pod.Name, err)
	}
	e.WaitForPod(pod, func(p *v1.Pod) bool { return p.UID == pod.UID })
}

// UpdatePod replaces a pod through the clientset and waits until the
// informer has the new version.
func (e *Env) UpdatePod(pod *v1.Pod) {
	e.T.Helper()
	e.SyncWatch()
	updated, err := e.Client.CoreV1().Pods(pod.Namespace).Update(e.Ctx, pod, metav1.UpdateOptions{})
	if err != nil {
		e.T.Fatalf("updating pod %s: %v", pod.Name, err)
	}
	e.WaitForPod(pod, func(p *v1.Pod) bool { return p.ResourceVersion == updated.ResourceVersion })
}

// DeletePod removes a pod through the clientset and waits until the
// informer has dropped it.
func (e *Env) DeletePod(pod *v1.Pod) {
	e.T.Helper()
	e.SyncWatch()
	if err := e.Client.CoreV1().Pods(pod.Namespace).Delete(e.Ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		e.T.Fatalf("deleting pod %s: %v", pod.Name, err)
	}
	e.WaitForPod(pod, nil)
}

// WaitForPod waits until the scheduler's pod lister shows pod so that ok
// holds, or, with ok nil, no longer shows it.
func (e *Env) WaitForPod(pod *v1.Pod, ok func(*v1.Pod) bool) {
	e.T.Helper()
	lister := e.Informers.Core().V1().Pods().Lister()
	e.eventually("the pod informer never caught up with pod "+pod.Name, func() bool {
		p, err := lister.Pods(pod.Namespace).Get(pod.Name)
		if ok == nil {
			return err != nil
		}
		return err == nil && ok(p)
	})
}

// CreatePodGroup adds a scheduler-plugins PodGroup and waits until the gang
// sources have it. The plugins' handlers of the change may still run.
func (e *Env) CreatePodGroup(pg *v1alpha1.PodGroup) {
	e.T.Helper()
	e.syncPodGroupWatch()
	created, err := e.PodGroupClient.SchedulingV1alpha1().PodGroups(pg.Namespace).Create(e.Ctx, pg, metav1.CreateOptions{})
	if err != nil {
		e.T.Fatalf("creating PodGroup %s: %v", pg.Name, err)
	}
	e.waitForGang(pg, func(s *gang.Spec) bool { return s.UID == created.UID })
}

// DeletePodGroup removes a scheduler-plugins PodGroup and waits until the
// gang sources no longer have it.
func (e *Env) DeletePodGroup(pg *v1alpha1.PodGroup) {
	e.T.Helper()
	e.syncPodGroupWatch()
	if err := e.PodGroupClient.SchedulingV1alpha1().PodGroups(pg.Namespace).Delete(e.Ctx, pg.Name, metav1.DeleteOptions{}); err != nil {
		e.T.Fatalf("deleting PodGroup %s: %v", pg.Name, err)
	}
	e.waitForGang(pg, nil)
}

// syncPodGroupWatch is SyncWatch for the PodGroup informer.
func (e *Env) syncPodGroupWatch() {
	e.T.Helper()
	e.probe("PodGroup", func(name string) error {
		_, err := e.PodGroupClient.SchedulingV1alpha1().PodGroups(probeNamespace).Create(e.Ctx,
			gangtest.MakePodGroup(name, probeNamespace).Obj(), metav1.CreateOptions{})
		return err
	}, func(name string) bool {
		_, err := e.Sources.Spec(gang.Key{Namespace: probeNamespace, Name: name})
		return err == nil
	})
}

// SyncNativeWatch is SyncWatch for the native PodGroup informer
// (Config.WatchNative): a native PodGroup changed before its watch is live
// would never reach the gang sources.
func (e *Env) SyncNativeWatch() {
	e.T.Helper()
	e.probe("native PodGroup", func(name string) error {
		_, err := e.Client.SchedulingV1beta1().PodGroups(probeNamespace).Create(e.Ctx,
			gangtest.MakeNativePodGroup(name, probeNamespace).Obj(), metav1.CreateOptions{})
		return err
	}, func(name string) bool {
		_, err := e.Sources.Spec(gang.Key{API: gang.Native, Namespace: probeNamespace, Name: name})
		return err == nil
	})
}

// SyncCompositeWatch is SyncWatch for the CompositePodGroup informer
// (Config.WatchComposites).
func (e *Env) SyncCompositeWatch() {
	e.T.Helper()
	e.probe("CompositePodGroup", func(name string) error {
		_, err := e.Client.SchedulingV1alpha3().CompositePodGroups(probeNamespace).Create(e.Ctx,
			gangtest.MakeCompositePodGroup(name, probeNamespace).Obj(), metav1.CreateOptions{})
		return err
	}, func(name string) bool {
		_, err := e.Sources.Composite(gang.Key{API: gang.Composite, Namespace: probeNamespace, Name: name})
		return err == nil
	})
}

// waitForGang waits until the gang sources show pg's gang so that ok holds,
// or, with ok nil, no longer show it.
func (e *Env) waitForGang(pg *v1alpha1.PodGroup, ok func(*gang.Spec) bool) {
	e.T.Helper()
	key := gang.Key{Namespace: pg.Namespace, Name: pg.Name}
	e.eventually("the gang sources never caught up with PodGroup "+key.String(), func() bool {
		s, err := e.Sources.Spec(key)
		if ok == nil {
			return apierrors.IsNotFound(err)
		}
		return err == nil && ok(s)
	})
}

// eventually waits until cond holds, or fails the test with what.
func (e *Env) eventually(what string, cond func() bool) {
	e.T.Helper()
	if err := wait.PollUntilContextTimeout(e.Ctx, 5*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		e.T.Fatalf("%s: %v", what, err)
	}
}
