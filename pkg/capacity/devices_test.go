package capacity

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

func TestInventoryFollowsPoolRules(t *testing.T) {
	networked := poolSlice("", "fabric", 1, 1, gpuDevice("nic-0", ""))
	networked.Spec.NodeName = nil
	networked.Spec.AllNodes = ptr.To(true)
	inv := BuildInventory([]*resourceapi.ResourceSlice{
		// n1: generation 2 replaces generation 1.
		poolSlice("n1", "n1", 1, 1, gpus(8, "H100")...),
		poolSlice("n1", "n1", 2, 1, gpus(4, "H100")...),
		// n2: two slices of one pool, both present.
		poolSlice("n2", "n2", 1, 2, gpuDevice("gpu-0", "H100"), gpuDevice("gpu-1", "H100")),
		poolSlice("n2", "n2", 1, 2, gpuDevice("gpu-2", "H100")),
		// n3: one of two slices missing: incomplete, not counted.
		poolSlice("n3", "n3", 1, 2, gpus(8, "H100")...),
		networked,
	})
	got := map[string]int{}
	for _, n := range inv.Nodes() {
		got[n] = len(inv.Node(n).Devices)
	}
	if diff := cmp.Diff(map[string]int{"n1": 4, "n2": 3}, got); diff != "" {
		t.Errorf("devices per node (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]PoolID{{gpuDriver, "n3"}}, inv.Incomplete); diff != "" {
		t.Errorf("incomplete pools (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]PoolID{{gpuDriver, "fabric"}}, inv.Networked); diff != "" {
		t.Errorf("networked pools (-want,+got):\n%s", diff)
	}
}

func TestFreeCountsMatchingUnallocatedDevices(t *testing.T) {
	ctx := context.Background()
	inv := BuildInventory([]*resourceapi.ResourceSlice{
		sliceOf("h100", gpus(8, "H100")...),
		sliceOf("mixed", append(gpus(2, "H200"), gpuDevice("gpu-9", "H100"))...),
	})
	m := NewMatcher(inv, testCEL)
	allocated := sets.New(structured.MakeDeviceID(gpuDriver, "h100", "gpu-0"), structured.MakeDeviceID(gpuDriver, "h100", "gpu-3"))
	objs := newObjects([]*resourceapi.DeviceClass{gpuClass(true)},
		claim("ns", "any", gpuDriver, 2), claim("ns", "h200", gpuDriver, 2, productSelector("H200")...))
	reg := NewRegistry()
	d := NewDevices(m, reg, objs, allocated)

	read := func(name string) *PodDevices {
		pd, err := objs.reader().Pod(podWithClaims("ns", name, name))
		if err != nil {
			t.Fatal(err)
		}
		return pd
	}
	any, h200 := read("any"), read("h200")
	demand := d.GangDemand(ctx, []*PodDevices{any, h200}, 0)
	anyDim := any.Claims[0].Requests[0].Alternatives[0].Kind.Dimension
	h200Dim := h200.Claims[0].Requests[0].Alternatives[0].Kind.Dimension

	h100, mixed := node{name: "h100"}, node{name: "mixed"}
	for _, tc := range []struct {
		node node
		dim  v1.ResourceName
		held Amounts
		want int64
	}{
		{h100, anyDim, nil, 6},
		{h100, h200Dim, nil, 0},
		{mixed, anyDim, nil, 3},
		{mixed, h200Dim, nil, 2},
		// nvidia.com/gpu is served by the mapped class's devices where the
		// node does not advertise it.
		{h100, "nvidia.com/gpu", nil, 6},
		// What another gang holds of an overlapping kind counts against it.
		{mixed, h200Dim, Amounts{anyDim: 1}, 1},
		{mixed, anyDim, Amounts{h200Dim: 2}, 1},
		{h100, anyDim, Amounts{"nvidia.com/gpu": 4}, 2},
	} {
		if got := d.Free(ctx, tc.node, tc.dim, demand.Unions, tc.held); got != tc.want {
			t.Errorf("free %s on %s with %v held: got %d, want %d", d.DescribeDimension(tc.dim, nil), tc.node.name, tc.held, got, tc.want)
		}
	}
	// The two kinds share devices on node "mixed": one union dimension makes
	// their joint demand exact.
	if len(demand.Unions) != 1 {
		t.Fatalf("want one union dimension for overlapping kinds, got %v", demand.Unions)
	}
	for dim := range demand.Unions {
		if got := d.Free(ctx, mixed, dim, demand.Unions, nil); got != 3 {
			t.Errorf("union free on mixed: got %d, want 3", got)
		}
		if got := demand.Extra[0][dim] + demand.Extra[1][dim]; got != 4 {
			t.Errorf("union demand: got %d, want 4", got)
		}
	}
}

func TestAdvertisedExtendedResourceStaysPlain(t *testing.T) {
	ctx := context.Background()
	inv := BuildInventory([]*resourceapi.ResourceSlice{sliceOf("dra", gpus(8, "H100")...)})
	objs := newObjects([]*resourceapi.DeviceClass{gpuClass(true)})
	d := NewDevices(NewMatcher(inv, testCEL), NewRegistry(), objs, nil)
	plugin := node{name: "plugin", allocatable: Amounts{"nvidia.com/gpu": 8}, free: Amounts{"nvidia.com/gpu": 3}}
	if got := d.Free(ctx, plugin, "nvidia.com/gpu", nil, Amounts{"nvidia.com/gpu": 1}); got != 2 {
		t.Errorf("device-plugin node: free %d, want 2", got)
	}
	if got := d.Allocatable(ctx, node{name: "dra"}, "nvidia.com/gpu", nil); got != 8 {
		t.Errorf("DRA node: allocatable %d, want 8", got)
	}
}

func TestReaderReportsBadInput(t *testing.T) {
	objs := newObjects(nil, claim("ns", "c", "no-such-class", 1))
	_, err := objs.reader().Pod(podWithClaims("ns", "p", "c"))
	var cnf *ClassNotFoundError
	if !errors.As(err, &cnf) || cnf.Class != "no-such-class" {
		t.Fatalf("want ClassNotFoundError naming the class, got %v", err)
	}
	_, err = objs.reader().Pod(podWithClaims("ns", "p", "missing"))
	var missing *ClaimNotFoundError
	if !errors.As(err, &missing) {
		t.Fatalf("want ClaimNotFoundError, got %v", err)
	}
}

func TestSharedClaimCountsOnce(t *testing.T) {
	ctx := context.Background()
	objs := newObjects([]*resourceapi.DeviceClass{gpuClass(false)}, claim("ns", "shared", gpuDriver, 8))
	inv := BuildInventory([]*resourceapi.ResourceSlice{sliceOf("n", gpus(8, "H100")...)})
	d := NewDevices(NewMatcher(inv, testCEL), NewRegistry(), objs, nil)
	var members []*PodDevices
	for _, name := range []string{"a", "b", "c"} {
		pd, err := objs.reader().Pod(podWithClaims("ns", name, "shared"))
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, pd)
	}
	demand := d.GangDemand(ctx, members, 0)
	var total int64
	for _, e := range demand.Extra {
		for _, q := range e {
			total += q
		}
	}
	if total != 8 {
		t.Errorf("a claim shared by three members asks for %d devices in all, want 8", total)
	}
	for i, acc := range demand.Accelerated {
		if !acc {
			t.Errorf("member %d uses GPUs and must be bound by topology", i)
		}
	}
}

// TestReaderFindsMappedRequests checks where the reader finds an extended
// resource a DeviceClass maps: container requests and init containers'
// requests; a pod asking for cpu alone maps nothing.
func TestReaderFindsMappedRequests(t *testing.T) {
	objs := newObjects([]*resourceapi.DeviceClass{gpuClass(true)})
	gpus := func(n int64) v1.ResourceList {
		return v1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(n, resource.DecimalSI)}
	}
	cpu := v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}
	for _, tc := range []struct {
		name string
		edit func(*v1.Pod)
		want int64 // 0: nothing mapped
	}{
		{"cpu only", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests = cpu }, 0},
		{"requests", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests = gpus(4) }, 4},
		{"init container", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests = cpu
			p.Spec.InitContainers = []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{Requests: gpus(2)}}}
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := podWithClaims("ns", "p")
			tc.edit(pod)
			pd, err := objs.reader().Pod(pod)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == 0 && len(pd.Mapped) != 0:
				t.Errorf("mapped %+v, want none", pd.Mapped)
			case tc.want > 0 && (len(pd.Mapped) != 1 || pd.Mapped[0].Resource != "nvidia.com/gpu" || pd.Mapped[0].Count != tc.want):
				t.Errorf("mapped %+v, want %d nvidia.com/gpu", pd.Mapped, tc.want)
			}
		})
	}
}
