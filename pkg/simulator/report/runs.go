package report

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/gpu-gang/gpu-gang/pkg/simulator/metrics"
)

// Machine is where and when repeated runs were measured; a figure means
// little without it.
type Machine struct {
	Host     string `json:"host"`
	CPUs     int    `json:"cpus"`
	CPUModel string `json:"cpuModel"`
	// Date is when the first run started, in UTC, RFC 3339.
	Date string `json:"date"`
}

// runFigure is one figure WriteRuns summarizes over runs.
type runFigure struct {
	name, format string
	get          func(*metrics.Summary) float64
}

var runFigures = []runFigure{
	{"pods/s", "%.1f", func(s *metrics.Summary) float64 { return s.PodsPerSecond }},
	{"gangs/s", "%.3f", func(s *metrics.Summary) float64 { return s.GangsPerSecond }},
	{"gangs bound", "%.0f", func(s *metrics.Summary) float64 { return float64(s.BoundGangs) }},
	{"censored", "%.0f", func(s *metrics.Summary) float64 { return float64(s.CensoredGangs) }},
	{"p50 s", "%.2f", func(s *metrics.Summary) float64 { return s.GangLatencyP50 }},
	{"p99 s", "%.2f", func(s *metrics.Summary) float64 { return s.GangLatencyP99 }},
	{"makespan s", "%.1f", func(s *metrics.Summary) float64 { return s.MakespanSeconds }},
	{"useful %", "%.1f", func(s *metrics.Summary) float64 { return 100 * s.UsefulOccupancy }},
	{"idle-held GPU·s", "%.0f", func(s *metrics.Summary) float64 { return s.IdleHeldGPUSeconds }},
}

// WriteRuns writes, per profile in the order the first run lists them, the
// median of each figure over runs and its range (min–max), with the
// machine and date. A profile's failed runs are left out of its figures
// and counted.
func WriteRuns(w io.Writer, runs []*Run, m Machine) error {
	if len(runs) == 0 {
		return nil
	}
	fmt.Fprintf(w, "scenario %s: %d runs on %s (%d CPUs, %s), %s; median [min–max]\n", runs[0].Scenario, len(runs), m.Host, m.CPUs, m.CPUModel, m.Date)
	var profiles []string
	byProfile := map[string][]*metrics.Summary{}
	failed := map[string]int{}
	for _, run := range runs {
		for _, r := range run.Results {
			if !slices.Contains(profiles, r.Profile) {
				profiles = append(profiles, r.Profile)
			}
			if r.Error != "" {
				failed[r.Profile]++
				continue
			}
			byProfile[r.Profile] = append(byProfile[r.Profile], &r.Summary)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "profile\truns\t"
	for _, f := range runFigures {
		header += f.name + "\t"
	}
	fmt.Fprintln(tw, header)
	for _, p := range profiles {
		sums := byProfile[p]
		line := fmt.Sprintf("%s\t%d", p, len(sums))
		if failed[p] > 0 {
			line += fmt.Sprintf(" (+%d failed)", failed[p])
		}
		line += "\t"
		for _, f := range runFigures {
			vals := make([]float64, len(sums))
			for i, s := range sums {
				vals[i] = f.get(s)
			}
			line += spread(f.format, vals) + "\t"
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

// spread renders the median of vals and their range; "-" for none.
func spread(format string, vals []float64) string {
	if len(vals) == 0 {
		return "-"
	}
	slices.Sort(vals)
	if len(vals) == 1 {
		return fmt.Sprintf(format, vals[0])
	}
	return fmt.Sprintf(format+" ["+format+"–"+format+"]", median(vals), vals[0], vals[len(vals)-1])
}

// median of sorted vals: the middle one, or the mean of the two middle ones.
func median(vals []float64) float64 {
	n := len(vals)
	if n%2 == 1 {
		return vals[n/2]
	}
	return (vals[n/2-1] + vals[n/2]) / 2
}
