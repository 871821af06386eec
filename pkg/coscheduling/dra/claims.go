package dra

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// Gangs is what GangClaims asks of the gang plugin, which owns the gangs:
// their units, their attempts in flight, their lessons and their Events.
type Gangs interface {
	// UnitOf returns the admission unit pod belongs to; false for a pod
	// of no gang.
	UnitOf(pod *v1.Pod) (gang.Key, bool)
	// Reserved reports whether member pod of gang key holds a reserved
	// node in the attempt in flight.
	Reserved(key gang.Key, pod types.UID) bool
	// Reject ends gang key's attempt in flight because the claims its
	// members share could not be allocated or adopted; penalize sends
	// the gang through its backoff rather than planning again at once.
	Reject(ctx context.Context, key gang.Key, why string, penalize bool)
	// Fail ends gang key's attempt in flight with an Event of reason.
	Fail(ctx context.Context, key gang.Key, reason, why string, penalize bool)
	// KeepOff teaches gang key that its members with these filter
	// signatures cannot use node, and drops its plan; it reports whether
	// the gang learned anything new.
	KeepOff(key gang.Key, signatures []string, node string) bool
	// Signature is the filter signature of member pod asking request:
	// members with one signature share a template and its lessons.
	Signature(pod *v1.Pod, request capacity.Amounts) string
	// Event records an Event regarding a gang's API object, known by
	// reference; related is the member that prompted it, if any.
	Event(ref *v1.ObjectReference, related *v1.Pod, eventType, reason, format string, args ...any)
}

// GangClaims allocates the claims a gang's members share, hears claims
// change under waiting gangs, and tells gangs what is wrong with their DRA
// input. Its source is nil when the framework has no DRA manager; then no
// member takes devices and it does nothing.
type GangClaims struct {
	source      *DeviceSource
	allocations *Allocations
	nodes       corelisters.NodeLister
	pods        corelisters.PodLister
	gangs       Gangs
	logger      klog.Logger
	// fences are the fences of members that ask for aligned devices
	// through an extended resource; nil without DRA.
	fences *Fences
	// profile is the gang plugin's profile.
	profile string
}

// NewGangClaims builds the claims side of the gang plugin on its device
// source and its table of allocations.
func NewGangClaims(source *DeviceSource, allocations *Allocations, fences *Fences, profile string, nodes corelisters.NodeLister, pods corelisters.PodLister, gangs Gangs, logger klog.Logger) *GangClaims {
	return &GangClaims{source: source, allocations: allocations, fences: fences, profile: profile, nodes: nodes, pods: pods, gangs: gangs, logger: logger}
}

// Fences are the fences of the members that ask for aligned devices
// through an extended resource; nil without DRA.
func (c *GangClaims) Fences() *Fences { return c.fences }

// Fencing reports whether the gang plugin's plans fence (its profile's
// RailFence plugin raises the fences).
func (c *GangClaims) Fencing() bool { return c.fences.Enabled(c.profile) }

// AllocationsOptions configure the gang plugin's table of allocations.
func AllocationsOptions(handle fwk.Handle, devices *DeviceSource, logger klog.Logger) Options {
	o := Options{
		Client:   handle.ClientSet().ResourceV1(),
		Recorder: handle.EventRecorder(),
		Logger:   logger,
	}
	if devices != nil {
		o.Tracker = devices.Manager().ResourceClaims()
	}
	return o
}

// ClaimsChanged tells the source's claim watch that claims changed, so
// that no pass keeps what it read before; nothing when s is nil.
func (s *DeviceSource) ClaimsChanged() {
	if s != nil {
		s.inventories.Claims().Changed()
	}
}

// ClaimDeleted fails the attempt in flight of every gang with a member that
// reserved a node and uses the deleted claim: that member cannot bind as
// planned. Its siblings give back their nodes at once and the gang plans
// again when the claim is back (the claim controller recreates a claim from
// a template while the pod exists).
func (c *GangClaims) ClaimDeleted(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	claim, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	pods, err := c.pods.Pods(claim.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	ctx := klog.NewContext(context.Background(), c.logger)
	failed := map[gang.Key]bool{}
	for _, p := range pods {
		key, member := c.gangs.UnitOf(p)
		if !member || failed[key] || !UsesClaim(p, claim.Name) {
			continue
		}
		if !c.gangs.Reserved(key, p.UID) || p.Spec.NodeName != "" {
			continue
		}
		failed[key] = true
		c.gangs.Fail(ctx, key, ReasonClaimDeleted, fmt.Sprintf("ResourceClaim %s of member %s was deleted while the member waited for its gang; it plans again once the claim exists: the claim controller makes a template's claim again, a claim the pod names (resourceClaimName) must be created again", claim.Name, p.Name), false)
	}
}

// UsesClaim reports whether pod names the claim, directly or through the
// claim made for it from a template.
func UsesClaim(pod *v1.Pod, name string) bool {
	for _, pc := range pod.Spec.ResourceClaims {
		if pc.ResourceClaimName != nil && *pc.ResourceClaimName == name {
			return true
		}
	}
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.ResourceClaimName != nil && *st.ResourceClaimName == name {
			return true
		}
	}
	return false
}

// ClaimAdded tells a native PodGroup that the claim the claim controller
// just made for it from a template (DRAWorkloadResourceClaims) cannot be
// used: kube-scheduler 1.37's DynamicResources accepts a claim owned by a
// PodGroup only with its GenericWorkload gate on, which gpu-gang's scheduler
// runs with off, and otherwise holds the pods without a word. A claim the
// PodGroup names (resourceClaimName) is an ordinary shared claim and works.
//
// The Event regards the PodGroup the claim's controller reference names:
// the claim controller makes the claim as soon as it sees the PodGroup, and
// the plugin's own PodGroup informer may hear of the group only after this
// claim, so the group is not looked up.
func (c *GangClaims) ClaimAdded(obj interface{}) {
	claim, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	ref := metav1.GetControllerOf(claim)
	if ref == nil || ref.Kind != "PodGroup" || !strings.HasPrefix(ref.APIVersion, schedulingv1beta1.GroupName+"/") {
		return
	}
	group := &v1.ObjectReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: claim.Namespace, Name: ref.Name, UID: ref.UID}
	c.gangs.Event(group, nil, v1.EventTypeWarning, ReasonInvalidResourceClaim,
		"ResourceClaim %s was made for this PodGroup from a template (spec.resourceClaims[].resourceClaimTemplateName); kube-scheduler 1.37 accepts such a claim only with its GenericWorkload gate on, which gpu-gang runs with off (see the README), so the members that use it cannot start: create the claim yourself and name it in resourceClaimName instead",
		claim.Name)
}
