package capacity

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/utils/ptr"
)

const gpuDriver = "gpu.nvidia.com"

var testCEL = cel.NewCache(100, cel.Features{})

// sliceOf publishes devices for node as one slice of a one-slice pool.
func sliceOf(node string, devices ...resourceapi.Device) *resourceapi.ResourceSlice {
	return poolSlice(node, node, 1, 1, devices...)
}

// poolSlice is one of count slices of pool at generation gen, for node.
func poolSlice(node, pool string, gen, count int64, devices ...resourceapi.Device) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d-%d", node, pool, gen, len(devices))},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   gpuDriver,
			Pool:     resourceapi.ResourcePool{Name: pool, Generation: gen, ResourceSliceCount: count},
			NodeName: ptr.To(node),
			Devices:  devices,
		},
	}
}

// gpuDevice is a whole GPU of product.
func gpuDevice(name, product string) resourceapi.Device {
	return resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"type":        {StringValue: ptr.To("gpu")},
		"productName": {StringValue: ptr.To(product)},
	}}
}

// gpus is n GPUs of product named gpu-0..gpu-(n-1).
func gpus(n int, product string) []resourceapi.Device {
	out := make([]resourceapi.Device, n)
	for i := range out {
		out[i] = gpuDevice(fmt.Sprintf("gpu-%d", i), product)
	}
	return out
}

// gpuClass is NVIDIA's DeviceClass, mapping nvidia.com/gpu when mapped.
func gpuClass(mapped bool) *resourceapi.DeviceClass {
	c := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: gpuDriver},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{
			{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"`}},
		}},
	}
	if mapped {
		c.Spec.ExtendedResourceName = ptr.To("nvidia.com/gpu")
	}
	return c
}

func productSelector(product string) []resourceapi.DeviceSelector {
	return []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
		Expression: fmt.Sprintf(`device.attributes["gpu.nvidia.com"].productName == %q`, product)}}}
}

// claim is an unallocated claim asking for count devices of class.
func claim(ns, name string, class string, count int64, selectors ...resourceapi.DeviceSelector) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpus",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount,
				Count: count, Selectors: selectors},
		}}}},
	}
}

// podWithClaims is a pod using the named claims directly.
func podWithClaims(ns, name string, claims ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name)}}
	for _, c := range claims {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: c, ResourceClaimName: ptr.To(c)})
	}
	p.Spec.Containers = []v1.Container{{Name: "c"}}
	return p
}

// objects is an in-memory store that reads like the DRA manager's listers.
type objects struct {
	claims  map[string]*resourceapi.ResourceClaim
	classes map[string]*resourceapi.DeviceClass
}

func newObjects(classes []*resourceapi.DeviceClass, claims ...*resourceapi.ResourceClaim) *objects {
	o := &objects{claims: map[string]*resourceapi.ResourceClaim{}, classes: map[string]*resourceapi.DeviceClass{}}
	for _, c := range classes {
		o.classes[c.Name] = c
	}
	for _, c := range claims {
		o.claims[c.Namespace+"/"+c.Name] = c
	}
	return o
}

type claimReader struct{ *objects }

func (o claimReader) Get(ns, name string) (*resourceapi.ResourceClaim, error) {
	if c, ok := o.claims[ns+"/"+name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, name)
}

type classReader struct{ *objects }

func (o classReader) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := o.classes[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "deviceclasses"}, name)
}

// GetDeviceClass resolves extended resources as kube-scheduler does, for
// the explicit mapping.
func (o *objects) GetDeviceClass(name v1.ResourceName) *resourceapi.DeviceClass {
	for _, c := range o.classes {
		if c.Spec.ExtendedResourceName != nil && v1.ResourceName(*c.Spec.ExtendedResourceName) == name {
			return c
		}
	}
	return nil
}

func (o *objects) reader() *Reader {
	return &Reader{Claims: claimReader{o}, Classes: classReader{o}, Resolver: o}
}

// node is a NodeCapacity with fixed allocatable and free quantities.
type node struct {
	name        string
	allocatable Amounts
	free        Amounts
}

func (n node) Name() string                           { return n.name }
func (n node) Allocatable(name v1.ResourceName) int64 { return n.allocatable[name] }
func (n node) Free(name v1.ResourceName) int64        { return n.free[name] }
