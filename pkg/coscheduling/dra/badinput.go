package dra

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// DRA input that only the gang's owner can fix, told on the gang with the
// object at fault and the fix: a kind of device no node publishes, a CEL
// selector that fails on the devices, two DeviceClasses that map one
// extended resource. (A claim naming a class that does not exist is
// DemandReports.ClaimUnreadable's, as the reader meets it.)

// ExplainUnpublished fails a gang some of whose members ask for a kind of
// device that no node publishes at all, naming the kind: no capacity will
// ever free up for it. Nil when every kind asked for exists somewhere.
func (c *GangClaims) ExplainUnpublished(spec *gang.Spec, req *placement.Request, d *PassDemand) *fwk.Status {
	if d.Gang == nil {
		return nil
	}
	for dimIndex, name := range req.Resources {
		dim := v1.ResourceName(name)
		if !capacity.IsDeviceDimension(dim) || d.IsUnion(dim) {
			continue
		}
		var total, want int64
		for i := range req.Nodes {
			total += req.Nodes[i].Allocatable[dimIndex]
		}
		for i := range req.Members {
			want = max(want, req.Members[i].Request[dimIndex])
		}
		if total > 0 || want == 0 {
			continue
		}
		msg := fmt.Sprintf("gang %s: a member needs %d %s; no node publishes one", spec.Key, want, d.Describe(name))
		c.gangs.Event(spec.Ref, nil, v1.EventTypeWarning, ReasonDevicesUnavailable,
			"%s: correct the claim's device class or selectors, or add nodes whose driver publishes such devices", msg)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	return nil
}

// ExplainSelectorError fails a gang that does not fit while a CEL selector
// of a kind its members ask for fails on devices, naming the class, the
// expression and the error: the model leaves such devices out, as the
// allocator refuses them, so the gang would otherwise be told that no node
// publishes its devices, or that they are too few. Nil when no selector
// failed.
func (c *GangClaims) ExplainSelectorError(spec *gang.Spec, d *PassDemand) *fwk.Status {
	if d.Gang == nil {
		return nil
	}
	serr := d.Devices.SelectorError(d.Pods)
	if serr == nil {
		return nil
	}
	msg := fmt.Sprintf("gang %s: %v", spec.Key, serr)
	fix := "correct the selector in the member's ResourceClaim (or its template)"
	if serr.OfClass {
		fix = fmt.Sprintf("correct the selector of DeviceClass %s", serr.Class)
	}
	c.gangs.Event(spec.Ref, nil, v1.EventTypeWarning, ReasonDeviceClassSelectorError,
		"%s; the devices it fails on are left out, as the allocator refuses them, so the gang cannot be placed: %s", msg, fix)
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg+"; "+fix)
}

// ReportClassConflicts says, on the gang, when two DeviceClasses map an
// extended resource its members ask for: kube-scheduler serves it from the
// newer class (the name breaks ties), which may not be the one meant.
func (c *GangClaims) ReportClassConflicts(spec *gang.Spec, pods []*capacity.PodDevices) {
	if spec == nil {
		return
	}
	asked := sets.New[v1.ResourceName]()
	for _, pd := range pods {
		for _, m := range pd.Mapped {
			asked.Insert(m.Resource)
		}
	}
	if asked.Len() == 0 {
		return
	}
	classes, err := c.source.Manager().DeviceClasses().List()
	if err != nil {
		return
	}
	byResource := map[v1.ResourceName][]string{}
	for _, c := range classes {
		if r := c.Spec.ExtendedResourceName; r != nil && asked.Has(v1.ResourceName(*r)) {
			byResource[v1.ResourceName(*r)] = append(byResource[v1.ResourceName(*r)], c.Name)
		}
	}
	for _, r := range sets.List(asked) {
		names := byResource[r]
		if len(names) < 2 {
			continue
		}
		slices.Sort(names)
		used := ""
		if c := c.source.Manager().DeviceClassResolver().GetDeviceClass(r); c != nil {
			used = c.Name
		}
		c.gangs.Event(spec.Ref, nil, v1.EventTypeWarning, ReasonDeviceClassConflict,
			"DeviceClasses %s all map the extended resource %s; kube-scheduler serves it from %s (the newest); remove extendedResourceName from the others",
			strings.Join(names, ", "), r, used)
	}
}
