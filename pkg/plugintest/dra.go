package plugintest

import (
	"strconv"
	"sync/atomic"

	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/deviceclass/extendedresourcecache"
	"k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
	"k8s.io/utils/ptr"
)

// newDRAManager builds the scheduler's DRA manager on the env's informers,
// as kube-scheduler 1.37 does when DynamicResourceAllocation is on:
// ResourceClaims through an assume cache, slices through the slice
// tracker, DeviceClasses from their lister, and the extended-resource
// mapping kept by a DeviceClass handler. The tracker takes its options
// from the feature gates as scheduler.New does, so with DRADeviceTaintRules
// on (the 1.37 default) it watches DeviceTaintRules and lists its own
// patched copies of the slices, written from its handlers. The informers
// start with the others; synced reports when the handlers that feed the
// claim cache, the tracker and the mapping have caught up with them.
func (e *Env) newDRAManager() (m fwk.SharedDRAManager, synced func() bool) {
	e.T.Helper()
	claims := assumecache.NewAssumeCache(klog.FromContext(e.Ctx), e.Informers.Resource().V1().ResourceClaims().Informer(), "ResourceClaim", "", nil)
	claimsSynced := claims.AddEventHandler(cache.ResourceEventHandlerFuncs{}).HasSynced
	opts := tracker.Options{
		EnableDeviceTaintRules:   utilfeature.DefaultFeatureGate.Enabled(features.DRADeviceTaintRules),
		EnableConsumableCapacity: utilfeature.DefaultFeatureGate.Enabled(features.DRAConsumableCapacity),
		SliceInformer:            e.Informers.Resource().V1().ResourceSlices(),
		KubeClient:               e.Client,
	}
	if opts.EnableDeviceTaintRules {
		opts.TaintInformer = e.Informers.Resource().V1().DeviceTaintRules()
	}
	slices, err := tracker.StartTracker(e.Ctx, opts)
	if err != nil {
		e.T.Fatalf("starting the ResourceSlice tracker: %v", err)
	}
	manager := dynamicresources.NewDRAManager(e.Ctx, claims, slices, e.Informers)
	classesSynced := func() bool { return true }
	if resolver, ok := manager.DeviceClassResolver().(*extendedresourcecache.ExtendedResourceCache); ok && resolver != nil {
		reg, err := e.Informers.Resource().V1().DeviceClasses().Informer().AddEventHandler(resolver)
		if err != nil {
			e.T.Fatalf("watching DeviceClasses: %v", err)
		}
		classesSynced = reg.HasSynced
	}
	return manager, func() bool { return claimsSynced() && slices.HasSynced() && classesSynced() }
}

// PublishSlice creates or replaces a ResourceSlice through the clientset
// and waits until the DRA manager lists it so.
func (e *Env) PublishSlice(s *resourceapi.ResourceSlice) {
	e.T.Helper()
	e.syncSliceWatch()
	s = s.DeepCopy()
	client := e.Client.ResourceV1().ResourceSlices()
	have, err := client.Get(e.Ctx, s.Name, metav1.GetOptions{})
	var done *resourceapi.ResourceSlice
	if err == nil {
		s.ResourceVersion = have.ResourceVersion
		done, err = client.Update(e.Ctx, s, metav1.UpdateOptions{})
	} else {
		s.ResourceVersion = ""
		done, err = client.Create(e.Ctx, s, metav1.CreateOptions{})
	}
	if err != nil {
		e.T.Fatalf("publishing ResourceSlice %s: %v", s.Name, err)
	}
	// The fake clientset keeps no resource versions: compare contents.
	e.eventually("the DRA manager never listed ResourceSlice "+s.Name, func() bool {
		got := e.listedSlice(s.Name)
		return got != nil && apiequality.Semantic.DeepEqual(got.Spec, done.Spec)
	})
}

// WithdrawSlice deletes a ResourceSlice and waits until the DRA manager no
// longer lists it.
func (e *Env) WithdrawSlice(name string) {
	e.T.Helper()
	e.syncSliceWatch()
	if err := e.Client.ResourceV1().ResourceSlices().Delete(e.Ctx, name, metav1.DeleteOptions{}); err != nil {
		e.T.Fatalf("deleting ResourceSlice %s: %v", name, err)
	}
	e.eventually("the DRA manager still lists ResourceSlice "+name, func() bool { return e.listedSlice(name) == nil })
}

// listedSlice is the named slice as the DRA manager lists it, nil if not.
func (e *Env) listedSlice(name string) *resourceapi.ResourceSlice {
	list, err := e.DRA.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		e.T.Fatalf("listing ResourceSlices: %v", err)
	}
	for _, s := range list {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// syncSliceWatch is SyncWatch for the ResourceSlice informer. Its probes
// publish no device, for no driver a test uses, on no node.
func (e *Env) syncSliceWatch() {
	e.T.Helper()
	if e.DRA == nil {
		e.T.Fatal("the environment has no DRA manager: set Config.DRA")
	}
	e.probe("ResourceSlice", func(name string) error {
		_, err := e.Client.ResourceV1().ResourceSlices().Create(e.Ctx, &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:   "probe.plugintest.gpu-gang.x-k8s.io",
				Pool:     resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1},
				AllNodes: ptr.To(true),
			},
		}, metav1.CreateOptions{})
		return err
	}, func(name string) bool { return e.listedSlice(name) != nil })
}

// The DRA manager keeps ResourceClaims in an assume cache, which takes an
// update only when its resourceVersion is newer than the one it holds; the
// fake clientset keeps whatever version its writer sent, and a claim
// without one is never updated there. So that the DRA manager sees every
// write of a claim, as it does with the API server, the env's claims start
// at version 1 (versionedClaims) and each create or update of one is
// stamped with a newer version (stampClaimVersions).

// versionedClaims is objs with each ResourceClaim that has no
// resourceVersion replaced by a copy at version 1.
func versionedClaims(objs []runtime.Object) []runtime.Object {
	out := make([]runtime.Object, len(objs))
	for i, o := range objs {
		if c, ok := o.(*resourceapi.ResourceClaim); ok && c.ResourceVersion == "" {
			c = c.DeepCopy()
			c.ResourceVersion = "1"
			o = c
		}
		out[i] = o
	}
	return out
}

// stampClaimVersions has client store each ResourceClaim it creates or
// updates, status included, with a resourceVersion newer than any before.
func stampClaimVersions(client *fake.Clientset) {
	var version atomic.Int64
	version.Store(1)
	store := clienttesting.ObjectReaction(client.Tracker())
	stamped := func(obj runtime.Object) runtime.Object {
		obj = obj.DeepCopyObject()
		obj.(metav1.Object).SetResourceVersion(strconv.FormatInt(version.Add(1), 10))
		return obj
	}
	client.PrependReactor("*", "resourceclaims", func(a clienttesting.Action) (bool, runtime.Object, error) {
		switch a := a.(type) {
		case clienttesting.CreateActionImpl:
			a.Object = stamped(a.Object)
			return store(a)
		case clienttesting.UpdateActionImpl:
			a.Object = stamped(a.Object)
			return store(a)
		}
		return false, nil, nil // on to the object tracker
	})
}
