package core

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/eligibility"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// The device counting lives in pkg/coscheduling/dra (DeviceSource,
// PassDemand); what is left here ties it to a planning pass: the gang's
// Events for bad claims and the templates the eligibility pass keeps.

// DemandOf reads what members ask for (dra.DeviceSource.Demand). alt
// chooses the firstAvailable alternative to plan with. A claim that does
// not exist yet or names an unknown class fails the pass with a status
// (and, for bad input, an Event on the gang).
func (pl *Planner) DemandOf(ctx context.Context, spec *gang.Spec, members []*v1.Pod, alt int) (*dra.PassDemand, *fwk.Status) {
	return pl.devices.Demand(ctx, members, alt, demandReports{pl: pl, spec: spec})
}

// demandReports tells a gang what reading its pass found wrong with its
// members' claims.
type demandReports struct {
	pl   *Planner
	spec *gang.Spec
}

// ClassConflicts warns the gang of members whose claims and extended
// resources ask the same class twice (dra.GangClaims.ReportClassConflicts).
func (r demandReports) ClassConflicts(pods []*capacity.PodDevices) {
	r.pl.gangClaims.ReportClassConflicts(r.spec, pods)
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
		r.pl.reporter.GangEvent(spec, pod, v1.EventTypeWarning, dra.ReasonInvalidResourceClaim, "member %s: %v", pod.Name, class)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("gang %s: %v", spec.Key, class))
	}
	return fwk.AsStatus(fmt.Errorf("reading the device claims of %s/%s: %w", pod.Namespace, pod.Name, err))
}

// MarkCounted notes on each template what the pass knows of its members'
// devices (dra.PassDemand.ForTemplate): whether the model counts them
// exactly, so that DynamicResources' Filter may be skipped, and the
// allocated claims that pin the members, which the eligibility pass
// enforces either way.
func MarkCounted(d *dra.PassDemand, templates []*eligibility.Template, _ []int) {
	for _, t := range templates {
		td := d.ForTemplate(t.Members)
		t.DevicesCounted, t.Devices, t.Pins = td.Counted, td.Devices, td.Pins
	}
}
