package core

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/rails"
)

// railPass is a pass of a gang bound by rails: how it reads the nodes'
// rails, and what the plan chose.
type railPass struct {
	mode gang.RailAlignment
	gang *rails.Gang
	dims []v1.ResourceName
	// unit names the level of the rails' scalable unit, for Events.
	unit string
	// planned is each member's rail set in the last plan, 0 for members
	// it did not align (all of them for a plan without rails); why says
	// why a preferred gang went unaligned, in part or whole.
	planned []capacity.RailSet
	why     string
}

// railsOf reads the gang's rails for a pass: nil when no member is bound
// by them. Members are bound when they take part of a node's railed
// devices (railed), two or more alike; those that take a whole node's are
// aligned by construction.
func (pl *Planner) railsOf(ctx context.Context, spec *gang.Spec, d *dra.PassDemand, req *placement.Request) (*railPass, *fwk.Status) {
	if d.Devices == nil || d.Gang == nil {
		return nil, nil
	}
	mode, err := gang.RailAlignmentOf(spec)
	if err != nil {
		msg := fmt.Sprintf("gang %s: %v", spec.Key, err)
		pl.reporter.GangEvent(spec, nil, v1.EventTypeWarning, scheduling.ReasonInvalidPodGroup, "%s", msg)
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	if mode == scheduling.RailAlignmentNone {
		return nil, nil
	}
	if groups, _ := d.Sharers(); len(groups) > 0 {
		return nil, nil // members sharing a claim are placed together already
	}
	shape, ok := pl.railShape(ctx, d, req)
	if !ok {
		return nil, nil
	}
	p := &railPass{mode: mode, dims: shape.dims, unit: pl.railUnit.Name}
	g := &rails.Gang{Size: shape.size, Aligned: make([]bool, len(req.Members))}
	aligned := 0
	for i := range req.Members {
		if sameShape(pl.railed(d, i), shape) {
			g.Aligned[i] = true
			aligned++
		}
	}
	// One member alone is aligned with nobody, unless its siblings run.
	if aligned == 0 {
		return nil, nil
	}
	pl.railUnits(g, req)
	if g.Pinned = pl.runningRails(spec.Key, d.Devices, shape, g, req); aligned < 2 && g.Pinned == nil {
		return nil, nil
	}
	// Nodes read alike are kept once: most are wholly free or alike.
	g.Class = make([]int32, len(req.Nodes))
	g.Classes = []rails.Class{{}}
	index := map[rails.Class]int32{{}: 0}
	promised := pl.gangClaims.Fences().ChosenByOthers(spec.Key)
	inv := d.Devices.Matcher().Inventory()
	for n := range req.Nodes {
		name := req.Nodes[n].Name
		c, ok := nodeRailClass(ctx, d.Devices, name, shape)
		if !ok {
			continue
		}
		// Devices other plans chose for their fenced members are free
		// until those members' cycles take them: count them taken.
		for _, id := range promised[name] {
			if r := inv.RailOf(name, id.Device.String(), id.Driver.String(), id.Pool.String()); r >= 0 && c.Free[r] > 0 {
				c.Free[r]--
				c.Used = true
			}
		}
		k, seen := index[c]
		if !seen {
			k = int32(len(g.Classes))
			g.Classes = append(g.Classes, c)
			index[c] = k
		}
		g.Class[n] = k
	}
	p.gang = g
	return p, nil
}

// railed is what member i asks for of devices that may sit on rails: its
// own claims' devices and, when fences steer DynamicResources to the
// devices a plan chose (dra.Fences), those of the classes that serve its
// extended resources.
func (pl *Planner) railed(d *dra.PassDemand, i int) capacity.Amounts {
	var own capacity.Amounts
	if i < len(d.Gang.Extra) {
		own = d.Gang.Extra[i]
	}
	if i >= len(d.Pods) || d.Pods[i] == nil || len(d.Pods[i].Mapped) == 0 || !pl.gangClaims.Fencing() {
		return own
	}
	out := make(capacity.Amounts, len(own)+len(d.Pods[i].Mapped))
	maps.Copy(out, own)
	for _, m := range d.Pods[i].Mapped {
		out[m.Kind.Dimension] += m.Count
	}
	return out
}

// railUnits splits req's nodes into the rails' scalable units by their
// label of the unit level, units numbered in node order; nodes without the
// label are one unit together. Without a unit level the gang is one unit.
func (pl *Planner) railUnits(g *rails.Gang, req *placement.Request) {
	key := pl.railUnit.Key
	if key == "" {
		return
	}
	g.Unit = make([]int32, len(req.Nodes))
	index := map[string]int32{}
	for n := range req.Nodes {
		name := req.Nodes[n].Labels[key]
		u, ok := index[name]
		if !ok {
			u = int32(len(g.Units))
			g.Units = append(g.Units, name)
			index[name] = u
		}
		g.Unit[n] = u
	}
}

// runningRails is, per unit, the rail set the gang's placed members there
// use, so that a replacement joins its siblings' rails; nil when none uses
// one of the shape's size.
func (pl *Planner) runningRails(key gang.Key, devices *capacity.Devices, shape railShape, g *rails.Gang, req *placement.Request) []capacity.RailSet {
	if pl.devices == nil {
		return nil
	}
	placed := pl.placedMembers(key)
	if len(placed) == 0 {
		return nil
	}
	unitOf := map[string]int32{}
	for n := range req.Nodes {
		if g.Unit != nil {
			unitOf[req.Nodes[n].Name] = g.Unit[n]
		}
	}
	var pinned []capacity.RailSet
	inv := devices.Matcher().Inventory()
	for _, p := range placed {
		var set capacity.RailSet
		for _, id := range pl.devices.AllocatedDevices(p) {
			if rail := inv.RailOf(p.Spec.NodeName, id.Device.String(), id.Driver.String(), id.Pool.String()); rail >= 0 {
				set |= 1 << rail
			}
		}
		u, ok := unitOf[p.Spec.NodeName]
		if g.Unit != nil && !ok {
			continue // a node no longer planned on
		}
		if pinned == nil {
			pinned = make([]capacity.RailSet, max(1, len(g.Units)))
		}
		if set.Len() == shape.size && pinned[u] == 0 {
			pinned[u] = set
		}
	}
	if !slices.ContainsFunc(pinned, func(s capacity.RailSet) bool { return s != 0 }) {
		return nil
	}
	return pinned
}

// railShape is what an aligned member takes: size rails, one device of
// each of dims per rail.
type railShape struct {
	size int
	dims []v1.ResourceName
	// rails is how many rails a node of these devices has.
	rails int
}

// railShape finds the pass's aligned shape from its first member that
// takes railed devices: the dimension of its most devices that sit on
// rails (its GPUs) sets the size, and every railed dimension it takes as
// many of joins (its NICs). It is not ok when no member takes railed
// devices, or when they take a node's every rail.
func (pl *Planner) railShape(ctx context.Context, d *dra.PassDemand, req *placement.Request) (railShape, bool) {
	for i := range req.Members {
		extra := pl.railed(d, i)
		var dims []v1.ResourceName
		for _, dim := range extra.Names() {
			if extra[dim] > 0 && capacity.IsDeviceDimension(dim) && !d.IsUnion(dim) {
				dims = append(dims, dim)
			}
		}
		if len(dims) == 0 {
			continue
		}
		var out railShape
		type railed struct {
			dim   v1.ResourceName
			count int64
			nics  bool
		}
		var found []railed
		for _, dim := range dims {
			for n := range req.Nodes {
				if r, ok := d.Devices.Rails(ctx, req.Nodes[n].Name, dim); ok {
					found = append(found, railed{dim, extra[dim], r.NICs})
					out.rails = max(out.rails, r.Rails)
					break
				}
			}
		}
		for _, f := range found {
			if !f.nics || out.size == 0 {
				out.size = max(out.size, int(f.count))
			}
		}
		for _, f := range found {
			if int(f.count) == out.size {
				out.dims = append(out.dims, f.dim)
			}
		}
		if out.size == 0 || out.size >= out.rails {
			return railShape{}, false
		}
		return out, true
	}
	return railShape{}, false
}

// sameShape reports whether a member asks for shape: size devices of
// each of its dimensions.
func sameShape(extra capacity.Amounts, shape railShape) bool {
	for _, dim := range shape.dims {
		if extra[dim] != int64(shape.size) {
			return false
		}
	}
	return true
}

// nodeRailClass counts, per rail of node, the aligned members' devices
// free in every dimension of shape; the class is used when some are taken.
func nodeRailClass(ctx context.Context, devices *capacity.Devices, node string, shape railShape) (c rails.Class, ok bool) {
	for k, dim := range shape.dims {
		r, has := devices.Rails(ctx, node, dim)
		if !has {
			return rails.Class{}, false
		}
		c.Used = c.Used || r.Free != r.Total
		if k == 0 {
			c.Free = r.Free
			continue
		}
		for x := range c.Free {
			c.Free[x] = min(c.Free[x], r.Free[x])
		}
	}
	return c, true
}

// Plan is placement.Planner for a pass bound by rails: the aligned plan
// with the best rail set. A preferred gang that no set holds is planned
// with as many members as one set holds on it, or else without rails, the
// reason kept for its Event.
func (p *railPass) Plan(ctx context.Context, inner placement.Planner, req *placement.Request) (*placement.Plan, error) {
	plan, sets, err := p.gang.Plan(ctx, inner, req)
	var fit *placement.FitError
	if err == nil || !errors.As(err, &fit) || p.mode == scheduling.RailAlignmentRequired {
		p.planned, p.why = sets, ""
		return plan, err
	}
	p.why = fit.Reason
	if plan, sets, err := p.gang.Most(ctx, inner, req); err == nil {
		p.planned = sets
		return plan, nil
	}
	p.planned = nil
	return inner.Plan(ctx, req)
}

// planner returns the planner a pass plans with.
func (p *railPass) planner(inner placement.Planner) placement.Planner {
	if p == nil {
		return inner
	}
	return railPlanner{p, inner}
}

type railPlanner struct {
	pass  *railPass
	inner placement.Planner
}

func (r railPlanner) Plan(ctx context.Context, req *placement.Request) (*placement.Plan, error) {
	return r.pass.Plan(ctx, r.inner, req)
}

// aligned is what the allocation of the plan needs; nil when the plan is
// not aligned.
func (p *railPass) aligned() *dra.Aligned {
	if p == nil || !slices.ContainsFunc(p.planned, func(s capacity.RailSet) bool { return s != 0 }) {
		return nil
	}
	return &dra.Aligned{Sets: p.planned, Dims: p.dims}
}

// note is what the plan's Event says of its rails, given where the plan
// put the members.
func (p *railPass) note(plan *placement.Plan) string {
	if p == nil {
		return ""
	}
	all, some := 0, 0
	for i, a := range p.gang.Aligned {
		if a {
			all++
			if i < len(p.planned) && p.planned[i] != 0 {
				some++
			}
		}
	}
	switch {
	case some == all:
		return "; rail-aligned " + p.describe(plan)
	case some > 0:
		return fmt.Sprintf("; %d of %d members rail-aligned %s (%s=%s): %s", some, all, p.describe(plan), scheduling.AnnotationRailAlignment, p.mode, p.why)
	}
	return fmt.Sprintf("; not rail-aligned (%s=%s): %s", scheduling.AnnotationRailAlignment, p.mode, p.why)
}

// describe names the rails of the aligned members: "on rails 0-3" when
// they use one set, else the set of each unit, "per leaf: rails 0-3 in
// s1-l1, rails 4-7 in s1-l2", units in the order the nodes come.
func (p *railPass) describe(plan *placement.Plan) string {
	type used struct {
		unit int32
		set  capacity.RailSet
	}
	var seen []used
	one := true
	for i, s := range p.planned {
		if s == 0 {
			continue
		}
		u := int32(0)
		if p.gang.Unit != nil {
			u = p.gang.Unit[plan.NodeOf[i]]
		}
		if !slices.Contains(seen, used{u, s}) {
			seen = append(seen, used{u, s})
		}
		one = one && s == seen[0].set
	}
	if one {
		return "on rails " + seen[0].set.String()
	}
	slices.SortFunc(seen, func(a, b used) int { return cmp.Compare(a.unit, b.unit) })
	parts := make([]string, len(seen))
	for k, x := range seen {
		parts[k] = fmt.Sprintf("rails %s in %s", x.set, p.gang.Units[x.unit])
	}
	return fmt.Sprintf("per %s: %s", p.unit, strings.Join(parts, ", "))
}

// count counts the set entries of b.
func count(b []bool) int {
	n := 0
	for _, x := range b {
		if x {
			n++
		}
	}
	return n
}

// explainRails records why a gang that requires rail alignment waits:
// which nodes have which rails free.
func (pl *Planner) explainRails(spec *gang.Spec, p *railPass, req *placement.Request) *fwk.Status {
	const shown = 8
	var free, none []string
	for n, c := range p.gang.Class {
		switch s := p.gang.Classes[c].Free.Free(); {
		case s.Len() >= p.gang.Size:
			free = append(free, fmt.Sprintf("%s (rails %s)", req.Nodes[n].Name, s))
		default:
			none = append(none, req.Nodes[n].Name)
		}
	}
	list := func(l []string) string {
		if len(l) > shown {
			return strings.Join(l[:shown], ", ") + fmt.Sprintf(" and %d more", len(l)-shown)
		}
		if len(l) == 0 {
			return "none"
		}
		return strings.Join(l, ", ")
	}
	want := count(p.gang.Aligned)
	same := "on every node"
	if p.gang.Unit != nil {
		same = "on every node of a " + p.unit
	}
	slices.Sort(none)
	msg := fmt.Sprintf("gang %s requires rail alignment (%s=%s): its %d members need %d free rails each, the same %s, and no set of %d rails is free on enough nodes; nodes with %d or more rails free: %s; nodes without: %s. It starts when such a set frees up",
		spec.Key, scheduling.AnnotationRailAlignment, p.mode, want, p.gang.Size, same, p.gang.Size, p.gang.Size, list(free), list(none))
	pl.reporter.GangEvent(spec, nil, v1.EventTypeWarning, scheduling.ReasonRailsNotFree, "%s", msg)
	return fwk.NewStatus(fwk.Unschedulable, msg)
}

// blocks reports whether the rails alone keep a gang that requires them
// from a plan: without them, req would plan.
func (p *railPass) blocks(ctx context.Context, inner placement.Planner, req *placement.Request) bool {
	if p == nil || p.mode != scheduling.RailAlignmentRequired {
		return false
	}
	_, err := inner.Plan(ctx, req)
	return err == nil
}

// unalignedNote is what the plan's Event says, once per gang, of a gang
// that asks for rail alignment (the annotation set) while some member
// takes part of a node's GPUs in a way no scheduler's plan decides, so
// that nothing waits for it:
//   - on a device-plugin node the kubelet picks the GPUs when the pod
//     starts, after scheduling;
//   - an extended resource a DeviceClass serves (nvidia.com/gpu on a DRA
//     node) gets its claim from DynamicResources, its devices chosen first
//     fit, unless the profile runs RailFence ahead of DynamicResources
//     (dra.Fences); the pod's own ResourceClaim would be aligned too.
func (pl *Planner) unalignedNote(ctx context.Context, spec *gang.Spec, d *dra.PassDemand, req *placement.Request, plan *placement.Plan) string {
	mode, err := gang.RailAlignmentOf(spec)
	if _, set := spec.Annotations[scheduling.AnnotationRailAlignment]; !set || err != nil || mode == scheduling.RailAlignmentNone {
		return ""
	}
	note := pl.kubeletPicks(d, req, plan)
	if note == "" && !pl.gangClaims.Fencing() {
		note = mappedPicks(ctx, d, req, plan)
	}
	if note == "" {
		return ""
	}
	if _, told := pl.railNoted.LoadOrStore(spec.Key, true); told {
		return ""
	}
	return note
}

// kubeletPicks names a member that takes part of a device-plugin node's
// GPUs, "" if none does.
func (pl *Planner) kubeletPicks(d *dra.PassDemand, req *placement.Request, plan *placement.Plan) string {
	dim := slices.Index(req.Resources, scheduling.ResourceGPU)
	if dim < 0 {
		return ""
	}
	for i, n := range plan.NodeOf {
		asks := d.Requests[i][scheduling.ResourceGPU]
		if node := req.Nodes[n]; asks > 0 && node.Allocatable[dim] > asks && pl.advertises(node.Name, scheduling.ResourceGPU) {
			return fmt.Sprintf("; not rail-aligned: the device plugin on node %s picks the GPUs when the pod starts, after scheduling", node.Name)
		}
	}
	return ""
}

// mappedPicks names a member that takes part of a node's railed devices
// through an extended resource a DeviceClass serves, "" if none does: said
// when no RailFence plugin steers DynamicResources.
func mappedPicks(ctx context.Context, d *dra.PassDemand, req *placement.Request, plan *placement.Plan) string {
	if d.Devices == nil {
		return ""
	}
	for i, n := range plan.NodeOf {
		if i >= len(d.Pods) || d.Pods[i] == nil {
			continue
		}
		for _, m := range d.Pods[i].Mapped {
			r, ok := d.Devices.Rails(ctx, req.Nodes[n].Name, m.Kind.Dimension)
			if !ok || m.Count <= 0 || m.Count >= int64(r.Rails) {
				continue
			}
			return fmt.Sprintf("; not rail-aligned: member %s asks for %s, which DeviceClass %s serves, and DynamicResources picks those devices first fit; "+
				"enable the %s plugin in the profile (multiPoint, and first in preFilter) or ask for them with a ResourceClaim to have them rail-aligned",
				req.Members[i].Name, m.Resource, m.Kind.Class, config.RailFencePluginName)
		}
	}
	return ""
}

// advertises reports whether node advertises resource itself (a device
// plugin), rather than through a DeviceClass's mapping.
func (pl *Planner) advertises(name string, resource v1.ResourceName) bool {
	node, err := pl.nodeLister.Get(name)
	if err != nil {
		return false
	}
	q, ok := node.Status.Allocatable[resource]
	return ok && !q.IsZero()
}
