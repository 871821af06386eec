package fleet

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// IsAccelerator reports whether a resource is an accelerator: a Kubernetes
// extended resource, named in a domain of its own outside kubernetes.io, the
// way device plugins (and DRA's extended-resource mapping) advertise
// devices: nvidia.com/gpu, a MIG profile such as nvidia.com/mig-1g.10gb,
// amd.com/gpu, a NIC's rdma/hca. This is the one meaning gpu-gang gives the
// word:
//
//   - only members that request a positive quantity of an accelerator are
//     bound by topology (placement.Member.Accelerated) and by the node
//     groups a gang must not mix; a launcher or parameter server that asks
//     for CPUs and memory goes anywhere;
//   - preemption's cost order counts the accelerators a victim holds as its
//     GPUs;
//   - the simulator's snapshot loader tells pods that use devices from
//     CPU-only ones.
//
// Native resources are not accelerators, whether bare (cpu, memory,
// ephemeral-storage, pods, and hugepages-<size>: memory reserved in huge
// pages, counted in bytes and tied to no device or interconnect) or
// prefixed with kubernetes.io/. It is Kubernetes' own IsExtendedResourceName
// (k8s.io/kubernetes/pkg/apis/core/v1/helper) without its name validation,
// which the API server has already applied to every pod and node: that
// check builds a string and runs a regular expression per call, too much for
// the scheduler, which asks for every resource of every pod it plans around.
//
// ResourceKind narrows accelerators down to NVIDIA GPUs, the only ones whose
// CUDA and driver rules Requirements applies.
//
// pkg/capacity's isExtendedName, which asks which pod resources a
// DeviceClass may serve, is wider on purpose: it also takes
// deviceclass.resource.kubernetes.io/<class>, a kubernetes.io name that is
// not an accelerator here. It cannot call IsAccelerator, as this package
// imports capacity.
func IsAccelerator(name v1.ResourceName) bool {
	s := string(name)
	return strings.Contains(s, "/") &&
		!strings.Contains(s, v1.ResourceDefaultNamespacePrefix) &&
		!strings.HasPrefix(s, v1.DefaultResourceRequestsPrefix)
}
