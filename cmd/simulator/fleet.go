package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/gpu-gang/gpu-gang/pkg/fleet"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/metrics"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

// writeFleetCounts prints, for a scenario whose fabric labels GPUs as GPU
// feature discovery would, how many of a profile's gangs landed on nodes
// their GPU requirements refuse or across uniform groups, as
// metrics.CountFleet judges them. The fabric and the jobs are drawn from
// the scenario's seed, so they are the ones the child process ran.
func writeFleetCounts(w io.Writer, sc *scenario.Scenario, res *metrics.Result) error {
	if sc.Fabric.Fleet == nil || res.Error != "" {
		return nil
	}
	layout, err := fabric.NewLayout(sc.Fabric)
	if err != nil {
		return err
	}
	c, err := metrics.CountFleet(layout, scenario.Expand(sc), res.Gangs)
	if err != nil {
		return fmt.Errorf("[%s] counting GPU fleet placements: %w", res.Profile, err)
	}
	var rules []string
	for _, rule := range fleet.Rules { // fixed order, not the map's
		if n := c.ByRule[rule]; n > 0 {
			rules = append(rules, fmt.Sprintf("%s %d", rule, n))
		}
	}
	by := ""
	if len(rules) > 0 {
		by = " (" + strings.Join(rules, ", ") + ")"
	}
	fmt.Fprintf(w, "[%s] GPU fleet: %d gangs judged, %d on incompatible nodes%s, %d across uniform groups\n",
		res.Profile, c.Gangs, c.Incompatible, by, c.Mixed)
	for _, e := range c.Examples {
		fmt.Fprintf(w, "[%s]   %s\n", res.Profile, e)
	}
	return nil
}
