package metrics

import (
	"fmt"
	"strings"

	"github.com/gpu-gang/gpu-gang/pkg/fleet"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

// maxFleetExamples bounds FleetCounts.Examples.
const maxFleetExamples = 5

// FleetCounts counts the gangs a profile placed against gpu-gang's GPU
// fleet policy, judged by pkg/fleet with the plugin's default args, so the
// rule has one owner whichever scheduler placed the gang. gpu-gang must
// show zero; the baselines cannot see the policy at all.
type FleetCounts struct {
	// Gangs counts the gangs judged: gangs whose members request GPUs and
	// of which at least one member was bound.
	Gangs int `json:"gangs"`
	// Incompatible counts gangs with a member on a node that member's
	// requirements refuse: a CUDA version or compute capability below the
	// gang's minimum (or unlabelled), a driver upgrade in progress, the
	// wrong forced capacity type, or whole GPUs on a node that shares
	// them.
	Incompatible int `json:"incompatible"`
	// Mixed counts gangs whose members span more than one uniform group:
	// by default, more than one GPU product, driver major.minor or
	// capacity type.
	Mixed int `json:"mixed"`
	// ByRule counts incompatible gangs per rule broken; a gang that
	// breaks two rules counts under each.
	ByRule map[fleet.Rule]int `json:"byRule,omitempty"`
	// Examples describe the first few offending gangs, in submission order.
	Examples []string `json:"examples,omitempty"`
}

// CountFleet judges where gangs' members were bound (gangs as the tracker
// reports them, Nodes in bind order) against the requirements of their
// jobs and the labels of the layout's nodes. The simulator never changes a
// node's labels during a run, so the final labels are those the scheduler
// saw.
func CountFleet(layout *fabric.Layout, jobs []scenario.Job, gangs []Gang) (FleetCounts, error) {
	c := FleetCounts{ByRule: map[fleet.Rule]int{}}
	fl := LayoutFleet(layout)
	index := layout.Index()
	byName := make(map[string]*scenario.Job, len(jobs))
	for i := range jobs {
		byName[jobs[i].Name] = &jobs[i]
	}
	example := func(format string, args ...any) {
		if len(c.Examples) < maxFleetExamples {
			c.Examples = append(c.Examples, fmt.Sprintf(format, args...))
		}
	}
	for _, g := range gangs {
		job, ok := byName[g.Name]
		if !ok {
			return c, fmt.Errorf("gang %s is not one of the scenario's jobs", g.Name)
		}
		if !job.Gang || job.GPUsPerPod == 0 || len(g.Nodes) == 0 {
			continue
		}
		req, demand, err := FleetPolicy(job)
		if err != nil {
			return c, fmt.Errorf("gang %s: %w", g.Name, err)
		}
		c.Gangs++

		broken := map[fleet.Rule]string{}
		var groups []fleet.GroupKey
		for _, name := range g.Nodes {
			n, ok := index[name]
			if !ok {
				return c, fmt.Errorf("gang %s: node %s is not in the fabric", g.Name, name)
			}
			if ok, why := fl.Admits(n, req, demand); !ok {
				if _, seen := broken[why.Rule]; !seen {
					broken[why.Rule] = name + ": " + why.Reason
				}
			}
			if k := fl.GroupKey(n, req); !containsKey(groups, k) {
				groups = append(groups, k)
			}
		}
		if len(broken) > 0 {
			c.Incompatible++
			for _, rule := range fleet.Rules { // fixed order, not the map's
				if why, ok := broken[rule]; ok {
					c.ByRule[rule]++
					example("%s incompatible (%s): %s", g.Name, rule, why)
				}
			}
		}
		if len(groups) > 1 {
			c.Mixed++
			names := make([]string, len(groups))
			for i, k := range groups {
				names[i] = k.String()
			}
			example("%s mixed: %s", g.Name, strings.Join(names, " | "))
		}
	}
	return c, nil
}

// LayoutFleet reads the GPU facts of the layout's nodes from their labels,
// with the GPUFleet plugin's default args: the fleet every profile is
// judged on, and the one the default-affinity baseline's node affinity is
// written for.
func LayoutFleet(layout *fabric.Layout) *fleet.Fleet {
	return fleet.New(placementNodes(layout, nil), fleet.DefaultOptions())
}

// FleetPolicy is what gpu-gang reads of job's GPU policy and what its
// members demand, as the judge of every profile sees them.
func FleetPolicy(job *scenario.Job) (fleet.Requirements, fleet.Demand, error) {
	req, err := job.GPU.Requirements()
	// Simulated members are judged as asking for whole nvidia.com/gpu.
	return req, fleet.Demand{Whole: true}, err
}

func containsKey(keys []fleet.GroupKey, k fleet.GroupKey) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}
