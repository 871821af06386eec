package simulator

import (
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/fleet"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/metrics"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

// fleetAffinity returns, for the layout's nodes, the node affinity
// (fleet.Fleet.NodeAffinity) of a job's fleet policy, read as the metrics
// judge it (metrics.FleetPolicy) on the fleet they judge (LayoutFleet): the
// default-affinity baseline is given exactly the rules it is judged by,
// where node affinity can state them.
func fleetAffinity(layout *fabric.Layout) func(job *scenario.Job) (fleet.Affinity, error) {
	fl := metrics.LayoutFleet(layout)
	return func(job *scenario.Job) (fleet.Affinity, error) {
		req, demand, err := metrics.FleetPolicy(job)
		if err != nil {
			return fleet.Affinity{}, err
		}
		return fl.NodeAffinity(req, demand), nil
	}
}

// nodeAffinity is the workload builder's NodeAffinity for the profile on
// the layout's nodes; nil for profiles without FleetAffinity.
func (p Profile) nodeAffinity(layout *fabric.Layout) func(job *scenario.Job) (*v1.NodeSelector, error) {
	if !p.FleetAffinity {
		return nil
	}
	affinity := fleetAffinity(layout)
	return func(job *scenario.Job) (*v1.NodeSelector, error) {
		a, err := affinity(job)
		return a.Required, err
	}
}

// notExpressed lists, in fleet's order, the rules of the jobs' GPU gangs'
// policies that the default-affinity baseline could not be given.
func notExpressed(layout *fabric.Layout, jobs []scenario.Job) ([]string, error) {
	affinity := fleetAffinity(layout)
	var found []fleet.Inexpressible
	for i := range jobs {
		if !jobs[i].Gang || jobs[i].GPUsPerPod == 0 {
			continue
		}
		a, err := affinity(&jobs[i])
		if err != nil {
			return nil, err
		}
		for _, x := range a.Inexpressible {
			if !slices.Contains(found, x) {
				found = append(found, x)
			}
		}
	}
	var out []string
	for _, x := range fleet.InexpressibleRules { // fixed order
		if slices.Contains(found, x) {
			out = append(out, string(x))
		}
	}
	return out, nil
}
