package report

import (
	"bytes"
	"html"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/simulator/metrics"
)

func sampleRun() *Run {
	all := 2.5
	first := 2.0
	mk := func(profile string, pps, partial float64) *metrics.Result {
		return &metrics.Result{
			Profile:  profile,
			Scenario: "tiny",
			Fabric:   metrics.FabricSize{Spines: 1, Leaves: 2, Cliques: 4, Nodes: 8, GPUs: 64},
			Summary: metrics.Summary{Jobs: 3, Gangs: 2, Pods: 5, BoundPods: 3, BoundGangs: 1, SubmittedGangs: 2, CensoredGangs: 1, PodsPerSecond: pps,
				GangLatencyP50: 1, GangLatencyP99: 2, PartialGangSeconds: partial, MakespanSeconds: 10, UsefulOccupancy: 0.5,
				IdleHeldGPUSeconds: partial * 8, WindowSeconds: 10, JointGangs: 1, AtJointBound: 1},
			Levels: []metrics.LevelSummary{{Level: "leaf", Gangs: 1, AtLowerBound: 1, MeanSpanned: 1, MeanLowerBound: 1, MeanJointBound: 1}},
			Gangs: []metrics.Gang{{Name: `<evil>&"gang"`, Pods: 2, GPUsPerPod: 8, Submitted: 0.5, FirstBound: &first, AllBound: &all,
				Spans: []metrics.Span{{Level: "leaf", Domains: 1, LowerBound: 1, JointBound: 1}}}},
			Samples: []metrics.Sample{{T: 0}, {T: 1, UsedGPUs: 16, FreeLeaves: 1, FreeCliques: 2, BoundPods: 2}},
			Placement: &metrics.Placement{T: 1, Nodes: []metrics.NodePlacement{
				{Name: "s0-l0-n0", Leaf: 0, Clique: 0, Pods: []metrics.PodSlice{{Job: `<evil>&"gang"`, GPUs: 8}}},
				{Name: "s0-l1-n0", Leaf: 1, Clique: 2, Pods: []metrics.PodSlice{{Job: "prefill", GPUs: 4}}},
			}},
		}
	}
	return &Run{Scenario: "tiny", Description: "a <small> test", Results: []*metrics.Result{mk("gpu-gang", 10, 0), mk("default", 5, 3.5)}}
}

func TestWriteHTML(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteHTML(&b, sampleRun()))
	html := b.String()
	for _, want := range []string{
		"<svg", "class=\"map\"", "All GPUs in use", "Free whole leaves", "Free whole NVLink cliques",
		"a &lt;small&gt; test", "&lt;evil&gt;&amp;", "(×0.50)", "gangs at the joint lower bound", "fill=\"#9e9e9e\"",
		"extra leaf domains vs the joint bound", "useful GPU occupancy", "idle-held GPU-seconds", "Useful GPU occupancy (%)",
		"gangs censored",
	} {
		require.Contains(t, html, want)
	}
	require.NotContains(t, html, "<evil>", "job names are escaped")
	require.NotContains(t, html, "<script", "the report runs no script")
}

func TestWriteSummary(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteSummary(&b, sampleRun()))
	out := b.String()
	require.Contains(t, out, "scenario tiny: 8 nodes")
	require.Contains(t, out, "gpu-gang vs default: pods/s x2.00")
	require.Contains(t, out, "50.0%", "useful GPU use")
	require.Contains(t, out, "same 10.0s window")
	require.Regexp(t, `(?m)^ *gpu-gang +3/5 +1/2 +1 `, out, "gangs bound of submitted, then the censored count")
	require.Contains(t, out, "(censored)")
	lines := strings.Split(out, "\n")
	require.GreaterOrEqual(t, len(lines), 4)
}

func TestWriteGangs(t *testing.T) {
	var b bytes.Buffer
	r := sampleRun().Results[0]
	require.NoError(t, WriteGangs(&b, r, 10))
	require.Contains(t, b.String(), "all bound 2.50s (+2.00s)")
	require.Contains(t, b.String(), "leaves 1/1")
	b.Reset()
	require.NoError(t, WriteGangs(&b, r, 0))
	require.Contains(t, b.String(), "1 more gangs")
}

func TestWriteSummaryDRA(t *testing.T) {
	run := sampleRun()
	var b bytes.Buffer
	require.NoError(t, WriteSummary(&b, run))
	require.NotContains(t, b.String(), "DRA", "a run without DRA says nothing of it")
	require.NotContains(t, b.String(), "ResourceClaims")

	for _, r := range run.Results {
		r.Fabric.DRANodes, r.Fabric.DRAGPUs = 4, 32
	}
	run.Results[1].Claims = &metrics.ClaimSummary{Claims: 5, ExtendedResource: 2, Allocated: 4, AllocatedDevices: 26, Released: 3}
	b.Reset()
	require.NoError(t, WriteSummary(&b, run))
	out := b.String()
	require.Contains(t, out, "64 GPUs (32 of them on 4 nodes that publish them through DRA, one ResourceSlice each)")
	require.Contains(t, out, "  gpu-gang: none\n")
	require.Contains(t, out, "  default: 4 allocated (26 devices), 2 of them for nvidia.com/gpu; 3 released by the end of the run; 5 made in all\n")
	b.Reset()
	require.NoError(t, WriteHTML(&b, run))
	require.Contains(t, b.String(), "32 GPUs on 4 nodes published through DRA")
}

// TestWriteSummaryHierarchy: a run with segmented jobs gets a table of how
// each profile placed them; a profile without figures shows dashes, and a
// run without segmented jobs gets no table.
func TestWriteSummaryHierarchy(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteSummary(&b, sampleRun()))
	require.NotContains(t, b.String(), "Hierarchical jobs")

	run := sampleRun()
	run.Results[0].Hierarchy = &metrics.HierarchySummary{Composites: 3, Complete: 3, Segments: 6, CompleteSegments: 6, InDomain: 6,
		Levels: []metrics.LevelSummary{{Level: "spine"}, {Level: "leaf", ExcessOverJoint: 1}}}
	b.Reset()
	require.NoError(t, WriteSummary(&b, run))
	out := b.String()
	require.Contains(t, out, "Hierarchical jobs")
	var rows []string
	for _, line := range strings.Split(out[strings.Index(out, "Hierarchical jobs"):], "\n") {
		if f := strings.Fields(line); len(f) > 0 && (f[0] == "gpu-gang" || f[0] == "default") {
			rows = append(rows, strings.Join(f, " "))
		}
	}
	require.Equal(t, []string{"gpu-gang 3/3 6/6 0.0 0 0/1", "default - - - - -"}, rows)
}

// TestWriteHTMLHierarchy: the comparison gets the hierarchy's rows only
// when some profile has segmented jobs.
func TestWriteHTMLHierarchy(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteHTML(&b, sampleRun()))
	require.NotContains(t, b.String(), "partial-composite seconds")

	run := sampleRun()
	run.Results[0].Hierarchy = &metrics.HierarchySummary{Composites: 2, Complete: 2, InDomain: 4, PartialCompositeSeconds: 1.5,
		Levels: []metrics.LevelSummary{{Level: "leaf", ExcessOverJoint: 3}}}
	b.Reset()
	require.NoError(t, WriteHTML(&b, run))
	html := b.String()
	for _, want := range []string{"composites complete", "segments inside one domain", "partial-composite seconds", "1.50",
		"composites: extra leaf domains vs the joint bound"} {
		require.Contains(t, html, want)
	}
}

// The summary names the rules a configured baseline could not be given,
// and each scheduler's peak memory where it was read, and says neither
// where nothing was recorded.
func TestWriteSummaryNotExpressedAndPeakRSS(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteSummary(&b, sampleRun()))
	require.NotContains(t, b.String(), "not expressible")
	require.NotContains(t, b.String(), "peak RSS")

	run := sampleRun()
	run.Results[0].Summary.SchedulerPeakRSSBytes = 1536 << 20
	run.Results[1].Profile = "default-affinity"
	run.Results[1].Summary.NotExpressed = []string{"one product/driver per gang (uniform)", "one capacity type per gang (capacity-type: uniform)"}
	b.Reset()
	require.NoError(t, WriteSummary(&b, run))
	out := b.String()
	require.Contains(t, out, "scheduler peak RSS (VmHWM of its own process): gpu-gang 1536 MiB\n")
	require.Contains(t, out, "default-affinity: each gang member has the required node affinity of its gang's GPU fleet policy; not expressible as node affinity, so not given: one product/driver per gang (uniform); one capacity type per gang (capacity-type: uniform).\n")
}

// The HTML report shows the same: a peak-RSS row where some profile has
// one, and the rules a configured baseline could not be given.
func TestWriteHTMLNotExpressedAndPeakRSS(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteHTML(&b, sampleRun()))
	require.NotContains(t, b.String(), "not expressible")
	require.NotContains(t, b.String(), "peak RSS")

	run := sampleRun()
	run.Results[0].Summary.SchedulerPeakRSSBytes = 1536 << 20
	run.Results[1].Profile = "default-affinity"
	run.Results[1].Summary.NotExpressed = []string{"one product/driver per gang (uniform)", "one capacity type per gang"}
	b.Reset()
	require.NoError(t, WriteHTML(&b, run))
	page := b.String()
	require.Regexp(t, `scheduler peak RSS \(MiB, VmHWM of its own process\)</td><td class="muted">lower</td><td>1536</td><td>-</td>`, page)
	require.Contains(t, html.UnescapeString(page), "default-affinity: each gang member has the required node affinity of its gang's GPU fleet policy; not expressible as node affinity, so not given: one product/driver per gang (uniform); one capacity type per gang.")
}
