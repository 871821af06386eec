package dra

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// gatherTracker refuses the read of allocated devices fails times, as the
// scheduler's tracker does when the read races a change.
type gatherTracker struct {
	fwk.ResourceClaimTracker
	fails int
}

func (g *gatherTracker) GatherAllocatedState() (*structured.AllocatedState, error) {
	if g.fails > 0 {
		g.fails--
		return nil, errors.New("conflicting concurrent modification")
	}
	return &structured.AllocatedState{AllocatedDevices: sets.New[structured.DeviceID]()}, nil
}

type gatherManager struct {
	fwk.SharedDRAManager
	tracker *gatherTracker
}

func (m gatherManager) ResourceClaims() fwk.ResourceClaimTracker { return m.tracker }

// TestGatherRetriesRacedReads checks that a read of allocated devices that
// raced a change is read again, and that one that keeps racing is a
// transient failure (the gang tries again without a penalty), not a
// failure of the plan.
func TestGatherRetriesRacedReads(t *testing.T) {
	for _, tc := range []struct {
		fails     int
		transient bool
	}{{fails: 0}, {fails: 3}, {fails: gatherTries + 1, transient: true}} {
		a := &Allocator{DRA: gatherManager{tracker: &gatherTracker{fails: tc.fails}}}
		_, err := a.gather(context.Background())
		if (err != nil) != tc.transient || (err != nil && !Transient(err)) {
			t.Errorf("%d raced reads: err %v, want a transient error: %v", tc.fails, err, tc.transient)
		}
	}
}

// batchManager is a DRA manager over fixed slices and classes that counts
// the reads of allocated devices.
type batchManager struct {
	fwk.SharedDRAManager
	tracker *gatherTracker
	slices  []*resourceapi.ResourceSlice
	classes []*resourceapi.DeviceClass
	gathers *int
}

func (m batchManager) ResourceClaims() fwk.ResourceClaimTracker { *m.gathers++; return m.tracker }
func (m batchManager) ResourceSlices() fwk.ResourceSliceLister  { return sliceList(m.slices) }
func (m batchManager) DeviceClasses() fwk.DeviceClassLister     { return classList(m.classes) }

type sliceList []*resourceapi.ResourceSlice

func (l sliceList) ListWithDeviceTaintRules() ([]*resourceapi.ResourceSlice, error) { return l, nil }

type classList []*resourceapi.DeviceClass

func (l classList) List() ([]*resourceapi.DeviceClass, error) { return l, nil }
func (l classList) Get(name string) (*resourceapi.DeviceClass, error) {
	for _, c := range l {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

// TestBatchKeepsWhatItGaveFromTheNextPod checks that pods allocated in one
// batch on one node get different devices, with the allocated devices read
// once, and that only the node's own slices are offered.
func TestBatchKeepsWhatItGaveFromTheNextPod(t *testing.T) {
	slice := func(node string, devices ...string) *resourceapi.ResourceSlice {
		s := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: node},
			Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.example.com", NodeName: ptr.To(node),
				Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}},
		}
		for _, d := range devices {
			s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: d})
		}
		return s
	}
	claim := func(name string) *resourceapi.ResourceClaim {
		return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
			}}}}}
	}
	gathers := 0
	a := &Allocator{CEL: cel.NewCache(8, cel.Features{}), Clock: clocktesting.NewFakePassiveClock(time.Now()),
		DRA: batchManager{tracker: &gatherTracker{}, gathers: &gathers,
			slices:  []*resourceapi.ResourceSlice{slice("n0", "gpu-0", "gpu-1"), slice("n1", "gpu-0", "gpu-1")},
			classes: []*resourceapi.DeviceClass{{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}}}}}
	b, err := a.Batch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n0"}}
	var got []string
	for _, name := range []string{"a", "b"} {
		results, err := b.AllocateAmong(context.Background(), node, []*resourceapi.ResourceClaim{claim(name)}, nil)
		if err != nil {
			t.Fatalf("claim %s: %v", name, err)
		}
		d := results[0].Devices.Results[0]
		if d.Pool != "n0" {
			t.Fatalf("claim %s got %s/%s, a device of another node", name, d.Pool, d.Device)
		}
		got = append(got, d.Device)
	}
	if got[0] == got[1] {
		t.Fatalf("both pods got %s", got[0])
	}
	if _, err := b.AllocateAmong(context.Background(), node, []*resourceapi.ResourceClaim{claim("c")}, nil); err == nil {
		t.Fatal("a third pod got a device of n0, which has two")
	}
	if gathers != 1 {
		t.Fatalf("the allocated devices were read %d times, want once for the batch", gathers)
	}
}
