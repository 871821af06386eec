package coscheduling

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
)

// TestInventoryFollowsChangedSlices checks the plugin's device inventory
// against one built from a fresh list of the DRA manager's slices, pass
// after pass, while slices are published, replaced (other products, fewer
// or more devices, a device taint) and withdrawn at random, several at a
// time or none between two passes.
func TestInventoryFollowsChangedSlices(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 20))
	const n = 12
	var nodes []*v1.Node
	objects := []runtime.Object{nvidiaClass()}
	published := map[string]bool{}
	for i := range n {
		name := fmt.Sprintf("node-%02d", i)
		nodes = append(nodes, draNode(name))
		if i%2 == 0 {
			objects = append(objects, gpuSlice(name, "H100", "H100", "H100", "H100"))
			published[name] = true
		}
	}
	env := newTestEnv(t, nodes, nil, nil, withDRA(), withObjects(objects...))
	inventories := env.pl.devices.Inventories()
	// GPUFleet is handed the inventories of capacity.ForDRAManager: one
	// device model per scheduler.
	require.Same(t, capacity.ForDRAManager(env.ctx, env.fh.SharedDRAManager()), inventories,
		"Coscheduling keeps inventories of its own")
	// The env's PublishSlice probes the watch with a slice of its own each
	// time, which would change the list with every change; once the watch
	// is known to run, slices change alone.
	env.PublishSlice(gpuSlice(nodes[1].Name, "H100", "H100", "H100", "H100"))
	published[nodes[1].Name] = true
	slicesAPI := env.client.ResourceV1().ResourceSlices()
	listed := func(name string) *resourceapi.ResourceSlice {
		list, err := env.pl.devices.Manager().ResourceSlices().ListWithDeviceTaintRules()
		require.NoError(t, err)
		for _, s := range list {
			if s.Name == name {
				return s
			}
		}
		return nil
	}

	// current is the inventories' matcher once it holds what a fresh list
	// of the DRA manager's slices holds. The inventories hear of a change
	// from their own informer handler, which may run after the slice
	// tracker's: until it has, Current may return the matcher it kept, as
	// any informer-fed cache trails the API server. A matcher that never
	// catches up fails the round.
	current := func(round int) *capacity.Matcher {
		var m *capacity.Matcher
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			got, err := inventories.Current()
			if !assert.NoError(c, err) {
				return
			}
			fresh, err := env.pl.devices.Manager().ResourceSlices().ListWithDeviceTaintRules()
			if !assert.NoError(c, err) {
				return
			}
			if assert.Empty(c, cmp.Diff(devicesOf(capacity.BuildInventory(fresh)), devicesOf(got.Inventory())), "-fresh,+cached") {
				m = got
			}
		}, sliceListedTimeout, 5*time.Millisecond, "round %d: the inventory never showed the listed slices", round)
		return m
	}

	// prev is the previous pass's matcher; changed is whether a slice
	// changed since.
	var prev *capacity.Matcher
	changed := true
	for round := range 40 {
		m := current(round)
		if !changed {
			require.Same(t, prev, m, "round %d: unchanged slices rebuilt the inventory", round)
		}
		prev, changed = m, r.IntN(4) > 0
		if !changed {
			continue
		}
		for range 1 + r.IntN(3) {
			node := nodes[r.IntN(n)].Name
			switch {
			case published[node] && r.IntN(3) == 0:
				name := gpuSlice(node).Name
				require.NoError(t, slicesAPI.Delete(env.ctx, name, metav1.DeleteOptions{}))
				require.Eventually(t, func() bool { return listed(name) == nil }, sliceListedTimeout, sliceListedTimeout/100)
				published[node] = false
			default:
				products := make([]string, 1+r.IntN(8))
				for i := range products {
					products[i] = []string{"H100", "A100", "B200"}[r.IntN(3)]
				}
				s := gpuSlice(node, products...)
				if r.IntN(3) == 0 {
					s.Spec.Devices[0].Taints = []resourceapi.DeviceTaint{{Key: "example.com/broken", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
				}
				// Wait for the new object, not only its contents: a
				// slice replaced by an equal one is a change too.
				before := listed(s.Name)
				var err error
				if published[node] {
					_, err = slicesAPI.Update(env.ctx, s, metav1.UpdateOptions{})
				} else {
					_, err = slicesAPI.Create(env.ctx, s, metav1.CreateOptions{})
				}
				require.NoError(t, err)
				require.Eventually(t, func() bool {
					got := listed(s.Name)
					return got != nil && got != before && apiequality.Semantic.DeepEqual(got.Spec, s.Spec)
				}, sliceListedTimeout, sliceListedTimeout/100)
				published[node] = true
			}
		}
	}
}

// sliceListedTimeout bounds how long the DRA manager takes to list a
// changed slice.
const sliceListedTimeout = 10 * time.Second

// devicesOf is what an inventory holds, node by node, in its order: each
// device's ID, product and taints.
func devicesOf(inv *capacity.Inventory) map[string][]string {
	out := map[string][]string{}
	for _, node := range inv.Nodes() {
		for _, d := range inv.Node(node).Devices {
			product := ""
			if a, ok := d.Attributes[scheduling.DeviceAttributeProductName]; ok && a.StringValue != nil {
				product = *a.StringValue
			}
			var taints []string
			for _, t := range d.Taints {
				taints = append(taints, t.Key+"="+string(t.Effect))
			}
			out[node] = append(out[node], fmt.Sprintf("%s %s %v", d.ID, product, taints))
		}
	}
	return out
}
