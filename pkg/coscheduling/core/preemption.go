package core

import (
	"context"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/eligibility"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/preempt"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// A preemptor is described to package preempt's engine as PreFilter
// describes its members to the planner: the same live nodes, demand,
// eligibility, per-node caps, policy and anchors. The Planner is the
// plugin's preempt.Planning.
var _ preempt.Planning = &Planner{}

// Demand reads what a preemptor's members ask of nodes (live nodes,
// LiveNodes) and where each may run: a gang's eligibility is its own
// (gangEligibility), a plain pod's is eligible, one entry per node.
func (pl *Planner) Demand(ctx context.Context, spec *gang.Spec, members []*v1.Pod, nodes []fwk.NodeInfo, eligible []bool) (preempt.Demand, *fwk.Status) {
	d, status := pl.DemandOf(ctx, spec, members, 0)
	if status != nil {
		return nil, status
	}
	templates, of := eligibility.TemplatesOf(members, d.Requests)
	MarkCounted(d, templates, of)
	if spec != nil {
		pl.gangEligibility(ctx, spec, members, templates, nodes) // a bad gang leaves no node eligible
	} else {
		templates[0].Eligible = eligible
	}
	return &preemptDemand{pl: pl, spec: spec, members: members, nodes: nodes, d: d, templates: templates, of: of}, nil
}

// preemptDemand is a preemptor's demand as one planning pass reads it
// (DemandOf), with its members' templates and eligibility.
type preemptDemand struct {
	pl        *Planner
	spec      *gang.Spec
	members   []*v1.Pod
	nodes     []fwk.NodeInfo
	d         *dra.PassDemand
	templates []*eligibility.Template
	of        []int
	// rails is the rail set the last request described a preemptor that
	// requires rail alignment with (alignRequest); nil for others.
	rails *railDemand
}

func (pd *preemptDemand) Unplaceable() *v1.Pod {
	for _, t := range pd.templates {
		if !anyTrue(t.Eligible) {
			return t.Pod
		}
	}
	return nil
}

func (pd *preemptDemand) Request(ctx context.Context, key gang.Key, taken map[string]capacity.Amounts) (*placement.Request, *fwk.Status) {
	req := pd.pl.buildRequest(ctx, key, pd.members, pd.d, pd.nodes, taken, pd.templates, pd.of)
	if pd.spec != nil {
		if status := pd.pl.shapeRequest(pd.spec, pd.members, pd.d, req, pd.nodes); status != nil {
			return nil, status
		}
	}
	rails, status := pd.alignRequest(ctx, req)
	if status != nil {
		return nil, status
	}
	pd.rails = rails
	return req, nil
}

func (pd *preemptDemand) PerMember() []capacity.Amounts { return pd.d.Requests }

func (pd *preemptDemand) VictimCounter(dims []v1.ResourceName) preempt.VictimCounter {
	d := pd.d
	// The rail dimensions come after the request's own (alignRequest).
	var added []railDim
	if pd.rails != nil && describes(dims, pd.rails.added) {
		added = pd.rails.added
	}
	own := dims[:len(dims)-len(added)]
	cols := d.Columns(own)
	return func(ctx context.Context, victim *v1.Pod, requests capacity.Amounts, ni fwk.NodeInfo) (placement.Vector, int64) {
		freed := append(toVector(own, requests), make(placement.Vector, len(added))...)
		if d.Devices == nil || ni == nil {
			return freed, 0
		}
		taken := pd.pl.devices.AllocatedPositions(d.Devices, victim.Spec.NodeName, []*v1.Pod{victim})
		for c := range cols {
			if cols[c].MayUseDevices && cols[c].Devices.ServedByDevices(ctx, dra.NodeCapacity{Info: ni}) {
				freed[c] = cols[c].Devices.Counted(ctx, dra.NodeCapacity{Info: ni}, taken)
			}
		}
		for k, a := range added {
			if on, ok := d.Devices.RailsAt(ctx, victim.Spec.NodeName, a.dim, taken); ok {
				freed[len(own)+k] = int64(on[a.rail])
			}
		}
		return freed, int64(taken.Count())
	}
}

func (pd *preemptDemand) Explain(req *placement.Request, text string) string {
	return pd.d.DescribeText(req, text)
}
