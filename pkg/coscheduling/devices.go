package coscheduling

import (
	"context"
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/eligibility"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// The device counting lives in pkg/coscheduling/dra (DeviceSource,
// PassDemand); what is left here ties it to the plugin: the gang's Events
// for bad claims and the templates the eligibility pass keeps.

// demandOf reads what members ask for (dra.DeviceSource.Demand). alt
// chooses the firstAvailable alternative to plan with. A claim that does
// not exist yet or names an unknown class fails the pass with a status
// (and, for bad input, an Event on the gang).
func (pl *Plugin) demandOf(ctx context.Context, spec *gang.Spec, members []*v1.Pod, alt int) (*dra.PassDemand, *fwk.Status) {
	return pl.devices.Demand(ctx, members, alt, demandReports{pl: pl, spec: spec})
}

// demandReports tells a gang what reading its pass found wrong with its
// members' claims.
type demandReports struct {
	pl   *Plugin
	spec *gang.Spec
}

// ClassConflicts warns the gang of members whose claims and extended
// resources ask the same class twice (reportClassConflicts).
func (r demandReports) ClassConflicts(pods []*capacity.PodDevices) {
	r.pl.reportClassConflicts(r.spec, pods)
}

// ClaimUnreadable turns a failure to read a member's claims into a status: a
// claim not created yet is worth waiting for, a claim that names an
// unknown DeviceClass is bad input that only its owner can fix.
func (r demandReports) ClaimUnreadable(pod *v1.Pod, err error) *fwk.Status {
	var missing *capacity.ClaimNotFoundError
	var class *capacity.ClassNotFoundError
	spec := r.spec
	if spec == nil {
		// A plain pod: DynamicResources reports its claims.
		return fwk.NewStatus(fwk.Unschedulable, err.Error())
	}
	switch {
	case errors.As(err, &missing):
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("gang %s waits for %v", spec.Key, missing))
	case errors.As(err, &class):
		r.pl.events.gang(spec, pod, v1.EventTypeWarning, ReasonInvalidResourceClaim, "member %s: %v", pod.Name, class)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gang %s: %v", spec.Key, class))
	}
	return fwk.AsStatus(fmt.Errorf("reading the device claims of %s/%s: %w", pod.Namespace, pod.Name, err))
}

// markCounted notes on each template what the pass knows of its members'
// devices (dra.PassDemand.ForTemplate): whether the model counts them
// exactly, so that DynamicResources' Filter may be skipped, and the
// allocated claims that pin the members, which the eligibility pass
// enforces either way.
func markCounted(d *dra.PassDemand, templates []*eligibility.Template, _ []int) {
	for _, t := range templates {
		td := d.ForTemplate(t.Members)
		t.DevicesCounted, t.Devices, t.Pins = td.Counted, td.Devices, td.Pins
	}
}

// onClaimDelete fails the attempt in flight of every gang with a member that
// reserved a node and uses the deleted claim: that member cannot bind as
// planned. Its siblings give back their nodes at once and the gang plans
// again when the claim is back (the claim controller recreates a claim from
// a template while the pod exists).
func (pl *Plugin) onClaimDelete(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	claim, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	pods, err := pl.podLister.Pods(claim.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	ctx := klog.NewContext(context.Background(), pl.logger)
	failed := map[gang.Key]bool{}
	for _, p := range pods {
		key, member := pl.unitOf(p)
		if !member || failed[key] || !usesClaim(p, claim.Name) {
			continue
		}
		if _, reserved := pl.ledger.Claims.Reservations(key)[p.UID]; !reserved || p.Spec.NodeName != "" {
			continue
		}
		failed[key] = true
		pl.failGang(ctx, key, ReasonClaimDeleted, fmt.Sprintf("ResourceClaim %s of member %s was deleted while the member waited for its gang; it plans again once the claim exists: the claim controller makes a template's claim again, a claim the pod names (resourceClaimName) must be created again", claim.Name, p.Name), false)
	}
}

// usesClaim reports whether pod names the claim, directly or through the
// claim made for it from a template.
func usesClaim(pod *v1.Pod, name string) bool {
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

// onClaimAdd tells a native PodGroup that the claim the claim controller
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
func (pl *Plugin) onClaimAdd(obj interface{}) {
	claim, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	ref := metav1.GetControllerOf(claim)
	if ref == nil || ref.Kind != "PodGroup" || !strings.HasPrefix(ref.APIVersion, schedulingv1beta1.GroupName+"/") {
		return
	}
	group := &v1.ObjectReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: claim.Namespace, Name: ref.Name, UID: ref.UID}
	pl.events.gangObject(group, nil, v1.EventTypeWarning, ReasonInvalidResourceClaim,
		"ResourceClaim %s was made for this PodGroup from a template (spec.resourceClaims[].resourceClaimTemplateName); kube-scheduler 1.37 accepts such a claim only with its GenericWorkload gate on, which gpu-gang runs with off (see the README), so the members that use it cannot start: create the claim yourself and name it in resourceClaimName instead",
		claim.Name)
}
