package capacity

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
)

// ClaimReader finds ResourceClaims. The scheduler's DRA manager is one: it
// shows allocations in flight as if they were written.
type ClaimReader interface {
	Get(namespace, name string) (*resourceapi.ResourceClaim, error)
}

// ClassReader finds DeviceClasses.
type ClassReader interface {
	Get(name string) (*resourceapi.DeviceClass, error)
}

// ExtendedResolver says which DeviceClass serves an extended resource
// (its spec.extendedResourceName, or the implicit
// deviceclass.resource.kubernetes.io/<class>), nil if none. The scheduler's
// DRA manager is one, so the model and kube-scheduler agree on which class
// wins when two name the same resource.
type ExtendedResolver interface {
	GetDeviceClass(name v1.ResourceName) *resourceapi.DeviceClass
}

// PodDevices is what one pod asks of devices.
type PodDevices struct {
	// Claims are the pod's claims that are not allocated yet, in the
	// order of pod.spec.resourceClaims. An allocated claim asks for
	// nothing more: its devices are taken, and DynamicResources keeps the
	// pod on the nodes that reach them.
	Claims []ClaimDemand
	// Mapped are the pod's extended resources that a DeviceClass serves on
	// nodes that do not advertise them, in name order.
	Mapped []Mapped
	// Inexact says, for people, what in the pod's claims the model does not
	// count (constraints between devices, admin access, capacity requests):
	// for such a pod DynamicResources' Filter stays the judge of each node.
	Inexact []string
	// Pinned are the pod's allocated claims that only some nodes reach, in
	// the order of pod.spec.resourceClaims: the pod may run only on nodes
	// that reach every one of them.
	Pinned []PinnedClaim
}

// Any reports whether the pod asks for devices at all; an allocated claim
// asks for none (see Pinned).
func (p *PodDevices) Any() bool { return len(p.Claims) > 0 || len(p.Mapped) > 0 }

// ClaimDemand is one unallocated claim.
type ClaimDemand struct {
	Name types.NamespacedName
	UID  types.UID
	// Requests are the claim's device requests, in claim order.
	Requests []RequestDemand
}

// RequestDemand is one request of a claim: exactly one alternative for an
// `exactly` request, one per subrequest for `firstAvailable`.
type RequestDemand struct {
	Name         string
	Alternatives []Alternative
}

// Alternative is one way to satisfy a request.
type Alternative struct {
	// SubRequest names the firstAvailable entry, "" for `exactly`.
	SubRequest string
	Kind       *Kind
	// Count is the devices asked for in ExactCount mode.
	Count int64
	// All is set for allocationMode All: every device of the kind on the
	// node, which must all be free.
	All bool
}

// Mapped is an extended resource a DeviceClass serves.
type Mapped struct {
	Resource v1.ResourceName
	// Kind is the class's devices, no selectors: what kube-scheduler asks
	// for on a node that does not advertise Resource.
	Kind  *Kind
	Count int64
}

// ClassNotFoundError is a claim that names a DeviceClass that does not
// exist: bad input that no capacity can satisfy.
type ClassNotFoundError struct {
	Claim   types.NamespacedName
	Request string
	Class   string
}

func (e *ClassNotFoundError) Error() string {
	return fmt.Sprintf("ResourceClaim %s: request %q names DeviceClass %q, which does not exist; create the class or correct the claim",
		e.Claim, e.Request, e.Class)
}

// ClaimNotFoundError is a pod whose claim does not exist yet (the claim
// controller creates claims from templates) or any more.
type ClaimNotFoundError struct {
	Pod   types.NamespacedName
	Claim string
}

func (e *ClaimNotFoundError) Error() string {
	return fmt.Sprintf("pod %s: its ResourceClaim %s does not exist yet", e.Pod, e.Claim)
}

// Reader reads what pods ask of devices.
type Reader struct {
	Claims   ClaimReader
	Classes  ClassReader
	Resolver ExtendedResolver
}

// Pod reads pod's device demand. It fails with *ClaimNotFoundError for a
// claim that does not exist (yet), *ClassNotFoundError for a request naming
// an unknown class, or the reader's error.
func (r *Reader) Pod(pod *v1.Pod) (*PodDevices, error) {
	out := &PodDevices{}
	podName := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		name, _, err := resourceclaim.Name(pod, pc)
		if err != nil {
			return nil, &ClaimNotFoundError{Pod: podName, Claim: pc.Name}
		}
		if name == nil {
			continue // no claim is needed for this entry
		}
		claim, err := r.Claims.Get(pod.Namespace, *name)
		if apierrors.IsNotFound(err) {
			return nil, &ClaimNotFoundError{Pod: podName, Claim: *name}
		}
		if err != nil {
			return nil, fmt.Errorf("reading ResourceClaim %s/%s: %w", pod.Namespace, *name, err)
		}
		if alloc := claim.Status.Allocation; alloc != nil {
			pin, err := pinnedClaim(claim, alloc)
			if err != nil {
				return nil, err
			}
			if pin != nil {
				out.Pinned = append(out.Pinned, *pin)
			}
			continue
		}
		cd, inexact, err := r.claim(claim)
		if err != nil {
			return nil, err
		}
		out.Claims = append(out.Claims, *cd)
		out.Inexact = append(out.Inexact, inexact...)
	}
	if r.Resolver != nil {
		mapped, err := r.mapped(pod)
		if err != nil {
			return nil, err
		}
		out.Mapped = mapped
	}
	return out, nil
}

// claim reads one unallocated claim.
func (r *Reader) claim(claim *resourceapi.ResourceClaim) (*ClaimDemand, []string, error) {
	name := types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}
	cd := &ClaimDemand{Name: name, UID: claim.UID}
	var inexact []string
	if n := len(claim.Spec.Devices.Constraints); n > 0 {
		inexact = append(inexact, fmt.Sprintf("ResourceClaim %s has %d constraint(s) between its devices", name, n))
	}
	for _, req := range claim.Spec.Devices.Requests {
		rd := RequestDemand{Name: req.Name}
		if e := req.Exactly; e != nil {
			alt, why, err := r.alternative(name, req.Name, "", e.DeviceClassName, e.Selectors, e.Tolerations, e.AllocationMode, e.Count,
				e.AdminAccess != nil && *e.AdminAccess, e.Capacity != nil)
			if err != nil {
				return nil, nil, err
			}
			rd.Alternatives = append(rd.Alternatives, alt)
			inexact = append(inexact, why...)
		}
		for _, sub := range req.FirstAvailable {
			alt, why, err := r.alternative(name, req.Name, sub.Name, sub.DeviceClassName, sub.Selectors, sub.Tolerations, sub.AllocationMode, sub.Count,
				false, sub.Capacity != nil)
			if err != nil {
				return nil, nil, err
			}
			rd.Alternatives = append(rd.Alternatives, alt)
			inexact = append(inexact, why...)
		}
		if len(rd.Alternatives) > 0 {
			cd.Requests = append(cd.Requests, rd)
		}
	}
	return cd, inexact, nil
}

func (r *Reader) alternative(claim types.NamespacedName, request, sub, className string, selectors []resourceapi.DeviceSelector,
	tolerations []resourceapi.DeviceToleration, mode resourceapi.DeviceAllocationMode, count int64, admin, capacity bool) (Alternative, []string, error) {
	class, err := r.Classes.Get(className)
	if apierrors.IsNotFound(err) {
		return Alternative{}, nil, &ClassNotFoundError{Claim: claim, Request: request, Class: className}
	}
	if err != nil {
		return Alternative{}, nil, fmt.Errorf("reading DeviceClass %s: %w", className, err)
	}
	alt := Alternative{SubRequest: sub, Kind: NewKind(class, selectors, tolerations)}
	switch mode {
	case resourceapi.DeviceAllocationModeAll:
		alt.All = true
	default:
		alt.Count = max(count, 1)
	}
	var why []string
	if admin {
		why = append(why, fmt.Sprintf("ResourceClaim %s request %q asks for admin access", claim, request))
	}
	if capacity {
		why = append(why, fmt.Sprintf("ResourceClaim %s request %q asks for part of a device's capacity", claim, request))
	}
	return alt, why, nil
}

// mapped lists the pod's extended resources that a DeviceClass serves.
func (r *Reader) mapped(pod *v1.Pod) ([]Mapped, error) {
	if !asksExtended(pod) {
		// Most pods ask for cpu and memory alone: spare them summing
		// their requests on every planning pass.
		return nil, nil
	}
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	var out []Mapped
	for _, name := range sortedResourceNames(reqs) {
		q := reqs[name]
		if q.IsZero() || !isExtendedName(name) {
			continue
		}
		class := r.Resolver.GetDeviceClass(name)
		if class == nil {
			continue
		}
		out = append(out, Mapped{Resource: name, Kind: NewKind(class, nil, nil), Count: q.Value()})
	}
	return out, nil
}

// asksExtended reports whether some container of pod requests a resource
// isExtendedName lets through: whether PodRequests, which reads requests
// alone (the API server copies an extended resource's limit to its
// request), could hold one.
func asksExtended(pod *v1.Pod) bool {
	names := func(l v1.ResourceList) bool {
		for name := range l {
			if isExtendedName(name) {
				return true
			}
		}
		return false
	}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if names(cs[i].Resources.Requests) {
				return true
			}
		}
	}
	return pod.Spec.Resources != nil && names(pod.Spec.Resources.Requests)
}

// isExtendedName reports whether a resource name could be served by a
// DeviceClass: not one of a node's own resources. The resolver decides the
// rest.
//
// It is wider than fleet.IsAccelerator on purpose: it must let through
// deviceclass.resource.kubernetes.io/<class>, the name every DeviceClass
// answers to, which IsAccelerator rejects as a kubernetes.io name. And
// pkg/fleet imports this package, so this one cannot call it.
func isExtendedName(name v1.ResourceName) bool {
	switch name {
	case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage, v1.ResourcePods:
		return false
	}
	return !strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

func sortedResourceNames(l v1.ResourceList) []v1.ResourceName {
	out := make([]v1.ResourceName, 0, len(l))
	for name := range l {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
