package metrics

import (
	"math"
	"slices"
	"time"
)

// Result closes every open part-bound span at end and computes the run's
// numbers. Profile and Settings are left for the caller.
func (t *Tracker) Result(end time.Time, timedOut bool) *Result {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := &Result{Started: t.start, Samples: slices.Clone(t.samples), Placement: t.placement}
	l := t.layout
	r.Fabric = FabricSize{
		Spines: l.Spec.Spines, Leaves: len(l.Leaves), Cliques: len(l.Cliques),
		Nodes: len(l.Nodes), GPUs: l.TotalGPUs(), PrefilledGPUs: t.prefilled,
	}
	s := &r.Summary
	s.TimedOut = timedOut
	s.BoundPods = t.boundPods
	var latencies []float64
	var lastGang time.Time
	for _, js := range t.order {
		s.Jobs++
		s.Pods += js.job.Pods
		if !js.job.Gang {
			continue
		}
		s.Gangs++
		if !js.partialSince.IsZero() {
			t.closePartial(js, end)
		}
		g := Gang{
			Name: js.job.Name, Pods: js.job.Pods, GPUsPerPod: js.job.GPUsPerPod, Priority: js.job.Priority,
			Submitted: t.seconds(js.submitted), Bound: js.bound,
			PartialSeconds: js.partial.Seconds(), Spans: js.spans,
		}
		if tp := js.job.Topology; tp != nil {
			g.Topology = tp.Level
			if tp.Required {
				g.Topology += " (required)"
			}
		}
		if !js.firstBound.IsZero() {
			g.FirstBound = ptrTo(t.seconds(js.firstBound))
		}
		for _, n := range js.nodes {
			g.Nodes = append(g.Nodes, l.Nodes[n].Name)
		}
		if !js.allBound.IsZero() {
			g.AllBound = ptrTo(t.seconds(js.allBound))
			s.BoundGangs++
			latencies = append(latencies, js.allBound.Sub(js.submitted).Seconds())
			s.BindSpreadMaxSeconds = max(s.BindSpreadMaxSeconds, js.allBound.Sub(js.firstBound).Seconds())
			if js.allBound.After(lastGang) {
				lastGang = js.allBound
			}
		}
		if js.partial > 0 {
			s.PartialGangs++
		}
		s.PartialGangSeconds += js.partial.Seconds()
		s.RawPartialSeconds += js.raw.Seconds()
		r.Gangs = append(r.Gangs, g)
	}
	slices.Sort(latencies)
	s.GangLatencyP50 = Percentile(latencies, 50)
	s.GangLatencyP99 = Percentile(latencies, 99)
	s.LastBindSeconds = t.seconds(t.lastBind)
	if s.LastBindSeconds > 0 {
		s.PodsPerSecond = float64(s.BoundPods) / s.LastBindSeconds
	}
	if last := t.seconds(lastGang); last > 0 {
		s.GangsPerSecond = float64(s.BoundGangs) / last
	}
	s.MakespanSeconds = max(t.seconds(t.lastFinish), s.LastBindSeconds)
	if timedOut {
		s.MakespanSeconds = t.seconds(end)
	}
	s.PeakOccupancy, s.MeanOccupancy = occupancy(r.Samples, l.TotalGPUs(), s.MakespanSeconds)
	r.Levels = SummarizeLevels(r.Gangs)
	return r
}

// Percentile returns the p-th percentile of sorted by the nearest-rank
// method, or 0 for no values.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// SummarizeLevels adds up, per level, the gangs' spans against their lower
// bounds. Levels keep the order the gangs list them in (loosest first).
func SummarizeLevels(gangs []Gang) []LevelSummary {
	var out []LevelSummary
	index := map[string]int{}
	for _, g := range gangs {
		for _, sp := range g.Spans {
			i, ok := index[sp.Level]
			if !ok {
				i = len(out)
				index[sp.Level] = i
				out = append(out, LevelSummary{Level: sp.Level})
			}
			ls := &out[i]
			ls.Gangs++
			ls.MeanSpanned += float64(sp.Domains)
			ls.MeanLowerBound += float64(sp.LowerBound)
			if sp.Domains <= sp.LowerBound {
				ls.AtLowerBound++
			}
			ls.ExcessDomains += max(0, sp.Domains-sp.LowerBound)
		}
	}
	for i := range out {
		if n := float64(out[i].Gangs); n > 0 {
			out[i].MeanSpanned /= n
			out[i].MeanLowerBound /= n
		}
	}
	return out
}

// occupancy returns the peak and the time-weighted mean fraction of GPUs in
// use over [0, until], each sample holding until the next.
func occupancy(samples []Sample, total int, until float64) (peak, mean float64) {
	if total == 0 || len(samples) == 0 {
		return 0, 0
	}
	var area float64
	for i, s := range samples {
		peak = max(peak, float64(s.UsedGPUs))
		if s.T >= until {
			break
		}
		next := until
		if i+1 < len(samples) {
			next = min(samples[i+1].T, until)
		}
		area += float64(s.UsedGPUs) * (next - s.T)
	}
	if until > 0 {
		mean = area / until / float64(total)
	}
	return peak / float64(total), mean
}

func ptrTo[T any](v T) *T { return &v }
