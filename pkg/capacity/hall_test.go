package capacity

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
)

// TestUnionDimensionsAreExact checks the model against an exhaustive oracle
// on small random nodes: requests of overlapping device kinds fit a node by
// the model's dimensions (each kind, each union) exactly when some
// assignment of distinct free devices serves them all.
func TestUnionDimensionsAreExact(t *testing.T) {
	ctx := context.Background()
	products := []string{"A", "B", "C"}
	// Kinds: any GPU, one product, or two products.
	selectorsOf := [][]string{nil, {"A"}, {"B"}, {"C"}, {"A", "B"}, {"B", "C"}}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 400 {
		var devices []resourceapi.Device
		for i := range 1 + rng.IntN(6) {
			devices = append(devices, gpuDevice(fmt.Sprintf("gpu-%d", i), products[rng.IntN(len(products))]))
		}
		inv := BuildInventory([]*resourceapi.ResourceSlice{sliceOf("n", devices...)})
		allocated := sets.New[structured.DeviceID]()
		for _, dv := range devices {
			if rng.IntN(4) == 0 {
				allocated.Insert(structured.MakeDeviceID(gpuDriver, "n", dv.Name))
			}
		}
		var claims []*resourceapi.ResourceClaim
		var pods []*v1.Pod
		for c := range 1 + rng.IntN(3) {
			sel := selectorsOf[rng.IntN(len(selectorsOf))]
			var selectors []resourceapi.DeviceSelector
			if len(sel) > 0 {
				quoted := make([]string, len(sel))
				for i, s := range sel {
					quoted[i] = fmt.Sprintf("%q", s)
				}
				selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
					Expression: fmt.Sprintf(`device.attributes["gpu.nvidia.com"].productName in [%s]`, strings.Join(quoted, ", "))}}}
			}
			name := fmt.Sprintf("c%d", c)
			claims = append(claims, claim("ns", name, gpuDriver, int64(1+rng.IntN(3)), selectors...))
			pods = append(pods, podWithClaims("ns", name, name))
		}
		objs := newObjects([]*resourceapi.DeviceClass{gpuClass(false)}, claims...)
		d := NewDevices(NewMatcher(inv, testCEL), NewRegistry(), objs, allocated)
		var members []*PodDevices
		for _, p := range pods {
			pd, err := objs.reader().Pod(p)
			if err != nil {
				t.Fatal(err)
			}
			members = append(members, pd)
		}
		demand := d.GangDemand(ctx, members, 0)
		total := Amounts{}
		for _, e := range demand.Extra {
			for dim, q := range e {
				total[dim] += q
			}
		}
		modelFits := true
		for dim, q := range total {
			if q > d.Free(ctx, node{name: "n"}, dim, demand.Unions, nil) {
				modelFits = false
			}
		}
		// The oracle: try every assignment of free devices to requests.
		var wants []Bits // per requested device, the free devices it may take
		for _, pd := range members {
			r := pd.Claims[0].Requests[0].Alternatives[0]
			b := d.matcher.On(ctx, d.registry.Add(r.Kind), "n")
			for range r.Count {
				wants = append(wants, b)
			}
		}
		alloc := d.Allocated("n")
		var assign func(i int, used Bits) bool
		assign = func(i int, used Bits) bool {
			if i == len(wants) {
				return true
			}
			for pos := range len(devices) {
				if wants[i].Has(pos) && !alloc.Has(pos) && !used.Has(pos) {
					next := append(Bits(nil), used...)
					next.set(pos)
					if assign(i+1, next) {
						return true
					}
				}
			}
			return false
		}
		if oracle := assign(0, nil); oracle != modelFits {
			t.Fatalf("round %d: model says fits=%v, oracle says %v (devices %d, demand %v, unions %d)",
				round, modelFits, oracle, len(devices), total, len(demand.Unions))
		}
	}
}
