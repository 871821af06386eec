package fleet

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
)

// PodDemand is what a pod asks of NVIDIA GPUs, and the one rule of which
// pods are GPU pods: DemandOf its requests, plus DRA when it takes devices
// of NVIDIA's GPU DRA driver (scheduling.DRADriverGPU) through Dynamic
// Resource Allocation, which is when
//   - one of its ResourceClaims (named, from a template, or its
//     PodGroup's) is allocated devices of the driver, or, not allocated
//     yet, has a request or a firstAvailable subrequest whose DeviceClass
//     and selectors select some device of the driver; or
//   - it requests an extended resource that a DeviceClass serves
//     (extendedResourceName, or deviceclass.resource.kubernetes.io/<class>)
//     and the class selects some device of the driver. nvidia.com/gpu so
//     served is a whole GPU on nodes that advertise it and a device of
//     the class on those that do not; either way a GPU.
//
// Whether a request selects the driver's devices is read off the devices
// it selects (selectsGPUs, see SelectsGPUs), with the CEL evaluation the
// allocator uses, not off the names of classes or the text of selectors:
// the classes NVIDIA's chart installs, a cluster's own classes, and a
// request that narrows a generic class down to the driver all count.
//
// r reads the pod's claims and their classes (the scheduler's DRA
// manager); nil reads requests only. The errors are capacity.Reader.Pod's:
// a claim that does not exist (yet), a request that names a DeviceClass
// that does not exist.
func PodDemand(pod *v1.Pod, r *capacity.Reader, selectsGPUs func(*capacity.Kind) bool) (Demand, error) {
	d := DemandOf(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
	if r == nil {
		return d, nil
	}
	devices, err := r.Pod(pod)
	if err != nil {
		return d, err
	}
	for _, c := range devices.Claims {
		for _, req := range c.Requests {
			for _, alt := range req.Alternatives {
				d.DRA = d.DRA || selectsGPUs(alt.Kind)
			}
		}
	}
	for _, m := range devices.Mapped {
		d.DRA = d.DRA || selectsGPUs(m.Kind)
	}
	if d.DRA {
		return d, nil
	}
	// Reader.Pod leaves allocated claims out: they ask for nothing more.
	// Their allocations say whose devices they hold.
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil || name == nil {
			continue // Reader.Pod has judged these
		}
		claim, err := r.Claims.Get(pod.Namespace, *name)
		if err != nil {
			return d, fmt.Errorf("reading ResourceClaim %s/%s: %w", pod.Namespace, *name, err)
		}
		if claim.Status.Allocation == nil {
			continue
		}
		for _, res := range claim.Status.Allocation.Devices.Results {
			d.DRA = d.DRA || res.Driver == scheduling.DRADriverGPU
		}
	}
	return d, nil
}

// SelectsGPUs reports whether some device of kind k in m's inventory is a
// device of NVIDIA's GPU DRA driver: whether a request of that kind may be
// handed GPUs. Nodes without such devices are not evaluated. It stops at
// the first such device; a kind that selects none costs an evaluation of
// the kind on every node with GPU devices, which m remembers.
func SelectsGPUs(ctx context.Context, m *capacity.Matcher, k *capacity.Kind) bool {
	if m == nil {
		return false
	}
	inv := m.Inventory()
	for _, name := range inv.Nodes() {
		nd := inv.Node(name)
		var on capacity.Bits
		evaluated := false
		for i := range nd.Devices {
			if nd.Devices[i].Driver != scheduling.DRADriverGPU {
				continue
			}
			if !evaluated {
				on, evaluated = m.On(ctx, k, name), true
			}
			if on.Has(i) {
				return true
			}
		}
	}
	return false
}
