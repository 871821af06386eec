package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/gpu-gang/gpu-gang/pkg/fleet"
	"github.com/gpu-gang/gpu-gang/pkg/simulator"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/metrics"
)

// writeFleetCounts prints, for a scenario whose fabric labels GPUs as GPU
// feature discovery would, how many of a profile's gangs landed on nodes
// their GPU requirements refuse or across uniform groups, as
// metrics.CountFleet judges them. The input's fabric and jobs are the ones
// the child process ran.
func writeFleetCounts(w io.Writer, in *simulator.Input, res *metrics.Result) error {
	if in.Layout.Spec.Fleet == nil || res.Error != "" {
		return nil
	}
	c, err := metrics.CountFleet(in.Layout, in.Jobs, res.Gangs)
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
