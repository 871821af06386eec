package capacity

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
	"k8s.io/utils/ptr"
)

// settleTimeout bounds how long the informers, the slice tracker and our
// handlers take to show one change.
const settleTimeout = 10 * time.Second

// What a plan reads of the devices through the kept state (Inventories
// with Watch, positions kept through the claim tracker) is what a fresh
// build reads (a new inventory from the DRA manager's list, positions from
// its allocated set), after every step of random sequences of slices
// published, replaced and withdrawn, DeviceTaintRules added and removed,
// and claims allocated, in flight and released, on kube-scheduler 1.37's
// DRA manager with DeviceTaintRules on. After each step both are read
// once the DRA manager shows it; the kept state must agree within
// settleTimeout and stay in agreement on the next reads.
func TestKeptDevicesFollowRandomChanges(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			w := newDRAWorld(t)
			rng := rand.New(rand.NewPCG(seed, 16))
			for step := range 60 {
				op := w.randomStep(rng)
				t.Logf("step %d: %s", step, op)
				w.settle(fmt.Sprintf("step %d (%s)", step, op))
			}
		})
	}
}

// draWorld is a fake API server, the scheduler's DRA manager on its
// informers, the kept Inventories, and what the test wrote.
type draWorld struct {
	t      *testing.T
	ctx    context.Context
	client *fake.Clientset
	dra    fwk.SharedDRAManager
	inv    *Inventories
	// slices are the devices published per node; rules the tainted
	// devices ("node/device"); claims the claims by name with the device
	// they hold ("node/device", "" when none) and whether that is in
	// flight only.
	slices map[string][]string
	rules  sets.Set[string]
	claims map[string]*worldClaim
	next   int
	// version is the last resource version written to a claim: the
	// fake clientset sets none, and the claim cache takes only newer ones.
	version int
}

type worldClaim struct {
	device  string
	pending bool
}

var worldNodes = []string{"n0", "n1", "n2", "n3"}

func newDRAWorld(t *testing.T) *draWorld {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	claims := assumecache.NewAssumeCache(klog.FromContext(ctx), factory.Resource().V1().ResourceClaims().Informer(), "ResourceClaim", "", nil)
	tr, err := tracker.StartTracker(ctx, tracker.Options{
		EnableDeviceTaintRules: true,
		SliceInformer:          factory.Resource().V1().ResourceSlices(),
		TaintInformer:          factory.Resource().V1().DeviceTaintRules(),
		KubeClient:             client,
	})
	if err != nil {
		t.Fatal(err)
	}
	dra := dynamicresources.NewDRAManager(ctx, claims, tr, factory)
	kept := NewInventories(dra.ResourceSlices().ListWithDeviceTaintRules, testCEL)
	if err := kept.Watch(factory); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	factory.WaitForCacheSync(ctx.Done())
	return &draWorld{t: t, ctx: ctx, client: client, dra: dra, inv: kept,
		slices: map[string][]string{}, rules: sets.New[string](), claims: map[string]*worldClaim{}}
}

// randomStep makes one random change and names it.
func (w *draWorld) randomStep(rng *rand.Rand) string {
	node := worldNodes[rng.IntN(len(worldNodes))]
	switch rng.IntN(8) {
	case 0, 1:
		// Always 4 devices: kube-scheduler 1.37's slice tracker indexes a
		// slice's old patched copy by the new one's devices when a
		// DeviceTaintRule changes, and panics if a replaced slice has
		// more devices than the copy it has not yet replaced.
		product := []string{"H100", "A100"}[rng.IntN(2)]
		w.publish(node, 4, product)
		return fmt.Sprintf("publish 4 %s on %s", product, node)
	case 2:
		if _, ok := w.slices[node]; ok {
			w.must(w.client.ResourceV1().ResourceSlices().Delete(w.ctx, "slice-"+node, metav1.DeleteOptions{}))
			delete(w.slices, node)
			return "withdraw " + node
		}
	case 3:
		dev := fmt.Sprint("gpu-", rng.IntN(4))
		id := node + "/" + dev
		if w.rules.Len() > 0 && rng.IntN(2) == 0 {
			id = sets.List(w.rules)[rng.IntN(w.rules.Len())]
		}
		if w.rules.Has(id) {
			w.must(w.client.ResourceV1().DeviceTaintRules().Delete(w.ctx, ruleName(id), metav1.DeleteOptions{}))
			w.rules.Delete(id)
			return "untaint " + id
		}
		_, err := w.client.ResourceV1().DeviceTaintRules().Create(w.ctx, &resourceapi.DeviceTaintRule{
			ObjectMeta: metav1.ObjectMeta{Name: ruleName(id)},
			Spec: resourceapi.DeviceTaintRuleSpec{
				DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: ptr.To(gpuDriver), Pool: ptr.To(node), Device: ptr.To(dev)},
				Taint:          resourceapi.DeviceTaint{Key: "drain", Effect: resourceapi.DeviceTaintEffectNoSchedule},
			},
		}, metav1.CreateOptions{})
		w.must(err)
		w.rules.Insert(id)
		return "taint " + id
	}
	return w.claimStep(rng, node)
}

// claimStep changes a claim: a new one allocated or waiting, one in
// flight, its allocation written or dropped, or one released.
func (w *draWorld) claimStep(rng *rand.Rand, node string) string {
	names := make([]string, 0, len(w.claims))
	for name := range w.claims {
		names = append(names, name)
	}
	slices.Sort(names)
	if len(names) == 0 || rng.IntN(3) == 0 {
		name := fmt.Sprint("c", w.next)
		w.next++
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)}}
		wc := &worldClaim{}
		if dev := w.freeDevice(rng, node); dev != "" && rng.IntN(2) == 0 {
			c.Status.Allocation = allocation(node, strings.TrimPrefix(dev, node+"/"))
			wc.device = dev
		}
		c.ResourceVersion = w.nextVersion()
		_, err := w.client.ResourceV1().ResourceClaims("ns").Create(w.ctx, c, metav1.CreateOptions{})
		w.must(err)
		w.claims[name] = wc
		// Later steps read the claim through the claim cache.
		w.eventually("the claim cache never showed "+name, func() bool {
			_, err := w.dra.ResourceClaims().Get("ns", name)
			return err == nil
		})
		return fmt.Sprintf("create claim %s holding %q", name, wc.device)
	}
	name := names[rng.IntN(len(names))]
	wc := w.claims[name]
	ct := w.dra.ResourceClaims()
	switch {
	case wc.device == "":
		dev := w.freeDevice(rng, node)
		if dev == "" {
			return "no free device on " + node
		}
		c, err := ct.Get("ns", name)
		w.must(err)
		c = c.DeepCopy()
		c.Status.Allocation = allocation(node, strings.TrimPrefix(dev, node+"/"))
		w.must(ct.SignalClaimPendingAllocation(c.UID, c))
		wc.device, wc.pending = dev, true
		return "allocation in flight for " + name + " on " + dev
	case wc.pending && rng.IntN(2) == 0:
		ct.MaybeRemoveClaimPendingAllocation(types.UID(name), true)
		wc.device, wc.pending = "", false
		return "allocation in flight dropped for " + name
	case wc.pending:
		// As DynamicResources' PreBind: write the allocation, then end
		// the flight once the cache shows it.
		c, err := ct.Get("ns", name)
		w.must(err)
		c = c.DeepCopy()
		c.Status.Allocation = ct.GetPendingAllocation(c.UID)
		c.ResourceVersion = w.nextVersion()
		_, err = w.client.ResourceV1().ResourceClaims("ns").UpdateStatus(w.ctx, c, metav1.UpdateOptions{})
		w.must(err)
		w.eventually("the claim cache never showed the allocation of "+name, func() bool {
			got, err := ct.Get("ns", name)
			return err == nil && got.Status.Allocation != nil
		})
		ct.MaybeRemoveClaimPendingAllocation(c.UID, true)
		wc.pending = false
		return "allocation written for " + name
	default:
		w.must(w.client.ResourceV1().ResourceClaims("ns").Delete(w.ctx, name, metav1.DeleteOptions{}))
		delete(w.claims, name)
		return "release " + name
	}
}

func (w *draWorld) nextVersion() string {
	w.version++
	return fmt.Sprint(w.version)
}

func ruleName(id string) string { return "rule-" + strings.ReplaceAll(id, "/", "-") }

// publish creates or replaces node's slice with n GPUs of product.
func (w *draWorld) publish(node string, n int, product string) {
	s := sliceOf(node, gpus(n, product)...)
	s.Name = "slice-" + node
	client := w.client.ResourceV1().ResourceSlices()
	if _, ok := w.slices[node]; ok {
		_, err := client.Update(w.ctx, s, metav1.UpdateOptions{})
		w.must(err)
	} else {
		_, err := client.Create(w.ctx, s, metav1.CreateOptions{})
		w.must(err)
	}
	w.slices[node] = make([]string, n)
	for i := range n {
		w.slices[node][i] = fmt.Sprintf("gpu-%d/%s", i, product)
	}
}

// freeDevice is a device of node no claim holds, published or not; "" if
// none.
func (w *draWorld) freeDevice(rng *rand.Rand, node string) string {
	held := sets.New[string]()
	for _, c := range w.claims {
		held.Insert(c.device)
	}
	start := rng.IntN(4)
	for i := range 4 {
		if id := fmt.Sprintf("%s/gpu-%d", node, (start+i)%4); !held.Has(id) {
			return id
		}
	}
	return ""
}

// want is what the test wrote, as describe shows it.
func (w *draWorld) want() map[string][]string {
	allocated := sets.New[string]()
	for _, c := range w.claims {
		allocated.Insert(c.device)
	}
	out := map[string][]string{}
	for node, devices := range w.slices {
		for _, d := range devices {
			name, product, _ := strings.Cut(d, "/")
			id := node + "/" + name
			out[node] = append(out[node], fmt.Sprintf("%s %s tainted=%v allocated=%v", name, product, w.rules.Has(id), allocated.Has(id)))
		}
	}
	return out
}

// describe shows each node's devices, their product, whether a rule
// taints them and whether they are allocated.
func describe(m *Matcher, allocated func(node string) Bits) map[string][]string {
	out := map[string][]string{}
	for _, node := range m.Inventory().Nodes() {
		nd := m.Inventory().Node(node)
		bits := allocated(node)
		for i, d := range nd.Devices {
			out[node] = append(out[node], fmt.Sprintf("%s %s tainted=%v allocated=%v",
				d.Name, *d.Attributes["productName"].StringValue, len(d.Taints) > 0, bits.Has(i)))
		}
	}
	return out
}

// fresh builds the device view anew from the DRA manager.
func (w *draWorld) fresh() map[string][]string {
	list, err := w.dra.ResourceSlices().ListWithDeviceTaintRules()
	w.must(err)
	m := NewMatcher(BuildInventory(list), testCEL)
	ids := w.allocatedSet()
	positions := m.Inventory().Allocated(ids)
	return describe(m, func(node string) Bits { return positions[node] })
}

// kept reads the device view as a planning pass does.
func (w *draWorld) kept() map[string][]string {
	m, err := w.inv.Current()
	w.must(err)
	d, err := NewDevicesFromTracker(m, NewRegistry(), nil, w.dra.ResourceClaims(), w.inv.Claims(), func() (sets.Set[structured.DeviceID], error) {
		return w.allocatedSet(), nil
	})
	w.must(err)
	return describe(m, d.Allocated)
}

// allocatedSet is the DRA manager's allocated devices, read again while
// a read races with a change, as DynamicResources does.
func (w *draWorld) allocatedSet() sets.Set[structured.DeviceID] {
	var ids sets.Set[structured.DeviceID]
	w.must(wait.PollUntilContextTimeout(w.ctx, time.Millisecond, settleTimeout, true, func(context.Context) (bool, error) {
		var err error
		ids, err = w.dra.ResourceClaims().ListAllAllocatedDevices()
		return err == nil, nil
	}))
	return ids
}

// settle waits until the DRA manager shows what the test wrote, then until
// the kept view agrees with a fresh one, and checks that it keeps agreeing.
func (w *draWorld) settle(what string) {
	w.t.Helper()
	want := w.want()
	w.eventually(what+": the DRA manager never showed it", func() bool { return cmp.Equal(want, w.fresh()) })
	var diff string
	w.eventually(what+": the kept view never agreed with a fresh one", func() bool {
		diff = cmp.Diff(w.fresh(), w.kept())
		return diff == ""
	}, func() { w.t.Logf("(-fresh,+kept):\n%s", diff) })
	for range 3 {
		if diff := cmp.Diff(w.fresh(), w.kept()); diff != "" {
			w.t.Fatalf("%s: the kept view stopped agreeing (-fresh,+kept):\n%s", what, diff)
		}
	}
}

func (w *draWorld) eventually(msg string, cond func() bool, onFail ...func()) {
	w.t.Helper()
	if err := wait.PollUntilContextTimeout(w.ctx, time.Millisecond, settleTimeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		for _, f := range onFail {
			f()
		}
		w.t.Fatal(msg)
	}
}

func (w *draWorld) must(err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
}
