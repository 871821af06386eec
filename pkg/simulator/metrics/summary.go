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
		Spines: l.Spines, Leaves: len(l.Leaves), Cliques: len(l.Cliques),
		Nodes: len(l.Nodes), GPUs: l.TotalGPUs(), PrefilledGPUs: t.prefilled,
	}
	r.Fabric.DRANodes, r.Fabric.DRAGPUs = l.DRANodes()
	for _, n := range l.Nodes {
		r.Fabric.RDMANICs += len(n.NICs)
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
		if !js.submitted.IsZero() {
			s.SubmittedGangs++
		}
		switch {
		case !js.allBound.IsZero():
			g.AllBound = ptrTo(t.seconds(js.allBound))
			s.BoundGangs++
			latencies = append(latencies, js.allBound.Sub(js.submitted).Seconds())
			s.BindSpreadMaxSeconds = max(s.BindSpreadMaxSeconds, js.allBound.Sub(js.firstBound).Seconds())
			if js.allBound.After(lastGang) {
				lastGang = js.allBound
			}
		case !js.submitted.IsZero():
			// Censored: all we know is that the gang waited at least
			// until the run ended. Leaving it out would reward the
			// profile that leaves gangs unbound with better percentiles.
			s.CensoredGangs++
			latencies = append(latencies, end.Sub(js.submitted).Seconds())
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
	s.PeakOccupancy = peakOccupancy(r.Samples, l.TotalGPUs())
	t.advance(end)
	s.EndSeconds = t.seconds(end)
	s.UsefulGPUSeconds, s.EndUsefulGPUs = t.usefulSec, t.useful
	s.IdleHeldGPUSecondsToEnd, s.EndIdleHeldGPUs = t.idleHeldSec, t.idleHeld
	r.Levels = SummarizeLevels(r.Gangs)
	s.JointGangs, s.AtJointBound = judgeJoint(t.order, r.Gangs)
	CommonWindow([]*Result{r})
	return r
}

// CommonWindow takes every result's useful occupancy and idle-held
// GPU-seconds over one window, the same for all: from the first submission
// to the end of the longest run. A run that ended sooner keeps its end
// state for the rest of the window: pods that run until the end go on
// running, and a gang left bound in part goes on holding its GPUs. Comparing
// profiles over their own makespans would reward the one that stops
// earliest with work undone.
func CommonWindow(results []*Result) {
	window := 0.0
	for _, r := range results {
		window = max(window, r.Summary.EndSeconds)
	}
	for _, r := range results {
		s := &r.Summary
		rest := window - s.EndSeconds
		s.WindowSeconds = window
		s.IdleHeldGPUSeconds = s.IdleHeldGPUSecondsToEnd + float64(s.EndIdleHeldGPUs)*rest
		s.UsefulOccupancy = 0
		if window > 0 && r.Fabric.GPUs > 0 {
			s.UsefulOccupancy = (s.UsefulGPUSeconds + float64(s.EndUsefulGPUs)*rest) / window / float64(r.Fabric.GPUs)
		}
	}
}

// judgeJoint counts the gangs judged against the joint bound and those at
// it. Every submitted gang that requests GPUs is judged: one never bound
// by the end is not at the bound, so that a profile that leaves gangs
// unbound does not shrink the denominator. A bound gang whose bound could
// not be computed (no spans) is left out. jobs and gangs list the gangs in
// the same order.
func judgeJoint(jobs []*jobState, gangs []Gang) (judged, atBound int) {
	i := 0
	for _, js := range jobs {
		if !js.job.Gang {
			continue
		}
		g := gangs[i]
		i++
		if js.submitted.IsZero() || js.job.GPUsPerPod == 0 {
			continue
		}
		switch {
		case g.AllBound == nil:
			judged++
		case len(g.Spans) > 0:
			judged++
			if !worseThanJoint(g.Spans) {
				atBound++
			}
		}
	}
	return judged, atBound
}

// worseThanJoint reports whether spans, read loosest level first, compare
// worse than the joint bound.
func worseThanJoint(spans []Span) bool {
	for _, sp := range spans {
		if sp.Domains != sp.JointBound {
			return sp.Domains > sp.JointBound
		}
	}
	return false
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
		worse := worseThanJoint(g.Spans)
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
			ls.MeanJointBound += float64(sp.JointBound)
			if worse {
				ls.ExcessOverJoint += max(0, sp.Domains-sp.JointBound)
			}
		}
	}
	for i := range out {
		if n := float64(out[i].Gangs); n > 0 {
			out[i].MeanSpanned /= n
			out[i].MeanLowerBound /= n
			out[i].MeanJointBound /= n
		}
	}
	return out
}

// peakOccupancy returns the largest fraction of GPUs in use in any sample.
func peakOccupancy(samples []Sample, total int) float64 {
	if total == 0 {
		return 0
	}
	peak := 0
	for _, s := range samples {
		peak = max(peak, s.UsedGPUs)
	}
	return float64(peak) / float64(total)
}

func ptrTo[T any](v T) *T { return &v }
