package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpu-gang/gpu-gang/pkg/simulator/metrics"
)

//go:embed report.html.tmpl
var pageTemplate string

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"f2":           func(v float64) string { return fmt.Sprintf("%.2f", v) },
	"join":         strings.Join,
	"notExpressed": notExpressed,
	"latency": func(g metrics.Gang) string {
		if g.AllBound == nil {
			return "-"
		}
		return fmt.Sprintf("%.2f", *g.AllBound-g.Submitted)
	},
}).Parse(pageTemplate))

// profileColors tell profiles apart in the time-series charts.
var profileColors = []string{"#1b7837", "#b2182b", "#2166ac", "#e08214", "#762a83"}

// WriteHTML writes a self-contained HTML report: the comparison table,
// occupancy and free leaves and cliques over time, spans against the lower
// bound, and a placement map per profile. It needs no network and no script.
func WriteHTML(w io.Writer, run *Run) error {
	colors := jobColors(run)
	data := pageData{Run: run, Generated: time.Now().UTC().Format(time.RFC3339)}
	if len(run.Results) > 0 {
		data.Fabric = run.Results[0].Fabric
		data.Settings = run.Results[0].Settings
	}
	data.Rows = comparisonRows(run)
	for i, r := range run.Results {
		data.Profiles = append(data.Profiles, profileView{
			Result:    r,
			Color:     profileColors[i%len(profileColors)],
			Placement: placementSVG(r, colors),
			TopGangs:  topGangs(r.Gangs, 200),
		})
	}
	total := float64(data.Fabric.GPUs)
	percent := func(n int) float64 {
		if total == 0 {
			return 0
		}
		return 100 * float64(n) / total
	}
	data.Charts = []template.HTML{
		lineChart("Useful GPU occupancy (%)", run.Results, 100, func(s metrics.Sample) float64 { return percent(s.UsefulGPUs) }),
		lineChart("GPUs held idle by part-bound gangs (%)", run.Results, 10, func(s metrics.Sample) float64 { return percent(s.IdleHeldGPUs) }),
		lineChart("All GPUs in use, pre-fill too (%)", run.Results, 100, func(s metrics.Sample) float64 { return percent(s.UsedGPUs) }),
		lineChart("Free whole leaves", run.Results, float64(data.Fabric.Leaves), func(s metrics.Sample) float64 { return float64(s.FreeLeaves) }),
	}
	if data.Fabric.Cliques > 0 {
		data.Charts = append(data.Charts, lineChart("Free whole NVLink cliques", run.Results, float64(data.Fabric.Cliques), func(s metrics.Sample) float64 { return float64(s.FreeCliques) }))
	}
	data.Charts = append(data.Charts, lineChart("Workload pods bound", run.Results, float64(maxPods(run)), func(s metrics.Sample) float64 { return float64(s.BoundPods) }))
	return page.Execute(w, data)
}

type pageData struct {
	Run       *Run
	Generated string
	Fabric    metrics.FabricSize
	Settings  metrics.Settings
	Rows      []comparisonRow
	Profiles  []profileView
	Charts    []template.HTML
}

type profileView struct {
	*metrics.Result
	Color     string
	Placement template.HTML
	TopGangs  []metrics.Gang
}

// comparisonRow is one metric across profiles, with the ratio of each
// profile's value to the first profile's.
type comparisonRow struct {
	Name   string
	Better string
	Cells  []string
}

// metric is one row of the comparison table.
type metric struct {
	name, better, format string
	get                  func(*metrics.Result) float64
}

func comparisonRows(run *Run) []comparisonRow {
	ms := []metric{
		{"pods bound", "higher", "%.0f", func(r *metrics.Result) float64 { return float64(r.Summary.BoundPods) }},
		{"gangs with every member bound", "higher", "%.0f", func(r *metrics.Result) float64 { return float64(r.Summary.BoundGangs) }},
		{"gangs submitted", "", "%.0f", func(r *metrics.Result) float64 { return float64(r.Summary.SubmittedGangs) }},
		{"gangs censored (submitted, never bound; in p50/p99 at the run's end)", "lower", "%.0f", func(r *metrics.Result) float64 { return float64(r.Summary.CensoredGangs) }},
		{"pods/s (bound / time to last bind)", "higher", "%.2f", func(r *metrics.Result) float64 { return r.Summary.PodsPerSecond }},
		{"gangs/s", "higher", "%.3f", func(r *metrics.Result) float64 { return r.Summary.GangsPerSecond }},
		{"gang submit→all-bound p50 (s)", "lower", "%.2f", func(r *metrics.Result) float64 { return r.Summary.GangLatencyP50 }},
		{"gang submit→all-bound p99 (s)", "lower", "%.2f", func(r *metrics.Result) float64 { return r.Summary.GangLatencyP99 }},
		{"partial-gang seconds", "lower", "%.2f", func(r *metrics.Result) float64 { return r.Summary.PartialGangSeconds }},
		{"gangs ever partially bound", "lower", "%.0f", func(r *metrics.Result) float64 { return float64(r.Summary.PartialGangs) }},
		{"longest first→last bind of a gang (s)", "lower", "%.3f", func(r *metrics.Result) float64 { return r.Summary.BindSpreadMaxSeconds }},
		{"makespan (s)", "lower", "%.1f", func(r *metrics.Result) float64 { return r.Summary.MakespanSeconds }},
		{"useful GPU occupancy (complete gangs and plain pods, same window)", "higher", "%.1f%%", func(r *metrics.Result) float64 { return 100 * r.Summary.UsefulOccupancy }},
		{"idle-held GPU-seconds (part-bound gangs, Permit waits, holds; same window)", "lower", "%.0f", func(r *metrics.Result) float64 { return r.Summary.IdleHeldGPUSeconds }},
		{"gangs at the joint lower bound", "higher", "%.0f%%", func(r *metrics.Result) float64 {
			if r.Summary.JointGangs == 0 {
				return math.NaN()
			}
			return 100 * float64(r.Summary.AtJointBound) / float64(r.Summary.JointGangs)
		}},
	}
	for _, name := range levelNames(run) {
		ms = append(ms,
			metric{"extra " + name + " domains vs the joint bound (sum over gangs)", "lower", "%.0f", func(r *metrics.Result) float64 {
				if l := findLevel(r, name); l != nil {
					return float64(l.ExcessOverJoint)
				}
				return math.NaN()
			}},
			metric{"extra " + name + " domains vs the " + name + " level's own bound", "lower", "%.0f", func(r *metrics.Result) float64 {
				if l := findLevel(r, name); l != nil {
					return float64(l.ExcessDomains)
				}
				return math.NaN()
			}})
	}
	ms = append(ms, hierarchyMetrics(run)...)
	if slices.ContainsFunc(run.Results, func(r *metrics.Result) bool { return r.Summary.SchedulerPeakRSSBytes > 0 }) {
		ms = append(ms, metric{"scheduler peak RSS (MiB, VmHWM of its own process)", "lower", "%.0f", func(r *metrics.Result) float64 {
			if b := r.Summary.SchedulerPeakRSSBytes; b > 0 {
				return float64(b) / (1 << 20)
			}
			return math.NaN()
		}})
	}
	var rows []comparisonRow
	for _, m := range ms {
		row := comparisonRow{Name: m.name, Better: m.better}
		var ref float64
		for i, r := range run.Results {
			v := m.get(r)
			cell := "-"
			if !math.IsNaN(v) {
				cell = fmt.Sprintf(m.format, v)
			}
			if i == 0 {
				ref = v
			} else if ref != 0 && v != 0 && !math.IsNaN(v) && !math.IsNaN(ref) {
				cell += fmt.Sprintf(" (×%.2f)", v/ref)
			}
			row.Cells = append(row.Cells, cell)
		}
		rows = append(rows, row)
	}
	return rows
}

// hierarchyMetrics are the rows for segmented jobs, when the run has any
// (metrics.HierarchySummary); a profile without figures shows "-".
func hierarchyMetrics(run *Run) []metric {
	if !slices.ContainsFunc(run.Results, func(r *metrics.Result) bool { return r.Hierarchy != nil }) {
		return nil
	}
	of := func(get func(h *metrics.HierarchySummary) float64) func(*metrics.Result) float64 {
		return func(r *metrics.Result) float64 {
			if r.Hierarchy == nil {
				return math.NaN()
			}
			return get(r.Hierarchy)
		}
	}
	ms := []metric{
		{"composites complete (minGroupCount segments bound whole)", "higher", "%.0f", of(func(h *metrics.HierarchySummary) float64 { return float64(h.Complete) })},
		{"segments inside one domain of their level", "higher", "%.0f", of(func(h *metrics.HierarchySummary) float64 { return float64(h.InDomain) })},
		{"partial-composite seconds", "lower", "%.2f", of(func(h *metrics.HierarchySummary) float64 { return h.PartialCompositeSeconds })},
	}
	for _, name := range levelNames(run) {
		ms = append(ms, metric{"composites: extra " + name + " domains vs the joint bound", "lower", "%.0f", of(func(h *metrics.HierarchySummary) float64 {
			for _, l := range h.Levels {
				if l.Level == name {
					return float64(l.ExcessOverJoint)
				}
			}
			return math.NaN()
		})})
	}
	return ms
}

// levelNames lists the levels any profile reports, in first-seen order.
func levelNames(run *Run) []string {
	seen := map[string]bool{}
	var names []string
	for _, r := range run.Results {
		for _, l := range r.Levels {
			if !seen[l.Level] {
				seen[l.Level] = true
				names = append(names, l.Level)
			}
		}
	}
	return names
}

func findLevel(r *metrics.Result, name string) *metrics.LevelSummary {
	for i := range r.Levels {
		if r.Levels[i].Level == name {
			return &r.Levels[i]
		}
	}
	return nil
}

// jobColors gives every job one colour in every profile's map: hues a golden
// angle apart in submission order, so neighbours differ.
func jobColors(run *Run) map[string]string {
	colors := map[string]string{"prefill": "#9e9e9e"}
	i := 0
	for _, r := range run.Results {
		for _, g := range r.Gangs {
			if _, ok := colors[g.Name]; ok {
				continue
			}
			colors[g.Name] = fmt.Sprintf("hsl(%.0f,70%%,%d%%)", math.Mod(float64(i)*137.508, 360), 45+10*(i%2))
			i++
		}
	}
	return colors
}

// placementSVG draws the fabric at peak occupancy: one row per leaf, one
// cell per node, one square per GPU, coloured by the job holding it. Plain
// pods are light blue, pre-fill grey, free GPUs white. Cliques are set
// apart by wider gaps.
func placementSVG(r *metrics.Result, colors map[string]string) template.HTML {
	p := r.Placement
	if p == nil || len(p.Nodes) == 0 {
		return template.HTML("<p>No placement was recorded.</p>")
	}
	perNode := 1
	if r.Fabric.Nodes > 0 {
		perNode = max(1, r.Fabric.GPUs/r.Fabric.Nodes)
	}
	var rows [][]metrics.NodePlacement
	for _, n := range p.Nodes {
		for len(rows) <= n.Leaf {
			rows = append(rows, nil)
		}
		rows[n.Leaf] = append(rows[n.Leaf], n)
	}
	widest := 0
	for _, row := range rows {
		widest = max(widest, len(row))
	}
	// Square GPUs, as large as fit 1100 pixels, between 2 and 10 pixels.
	cols := int(math.Ceil(math.Sqrt(float64(perNode))))
	lines := (perNode + cols - 1) / cols
	gpu := math.Min(10, math.Max(2, math.Floor(1100/float64(widest*(cols+1)))))
	nodeW, nodeH := float64(cols)*gpu+2, float64(lines)*gpu+2
	label := 70.0
	var b strings.Builder
	width := label + float64(widest)*(nodeW+2) + 8
	height := float64(len(rows))*(nodeH+4) + 4
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" class="map" data-profile="%s">`, width, height, template.HTMLEscapeString(r.Profile))
	for li, row := range rows {
		y := 4 + float64(li)*(nodeH+4)
		name := ""
		if len(row) > 0 {
			name = row[0].LeafName
			if name == "" {
				name = leafName(row[0].Name)
			}
		}
		fmt.Fprintf(&b, `<text x="0" y="%.1f" class="lbl">%s</text>`, y+nodeH-1, template.HTMLEscapeString(name))
		x := label
		lastClique := -2
		for _, n := range row {
			if lastClique != -2 && n.Clique != lastClique {
				x += 3
			}
			lastClique = n.Clique
			fmt.Fprintf(&b, `<g class="node-cell" data-node="%s"><title>%s</title><rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" class="node"/>`,
				template.HTMLEscapeString(n.Name), template.HTMLEscapeString(nodeTitle(n)), x, y, nodeW, nodeH)
			slot := 0
			for _, pod := range n.Pods {
				color, ok := colors[pod.Job]
				if !ok {
					color = "#8ecae6"
				}
				for range pod.GPUs {
					if slot >= perNode {
						break
					}
					gx, gy := x+1+float64(slot%cols)*gpu, y+1+float64(slot/cols)*gpu
					fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`, gx, gy, gpu-0.5, gpu-0.5, color)
					slot++
				}
			}
			b.WriteString("</g>")
			x += nodeW + 2
		}
	}
	b.WriteString("</svg>")
	return template.HTML(b.String()) //nolint:gosec // every name in it is escaped above
}

func nodeTitle(n metrics.NodePlacement) string {
	var parts []string
	for _, p := range n.Pods {
		parts = append(parts, fmt.Sprintf("%s: %d GPU", p.Job, p.GPUs))
	}
	if len(parts) == 0 {
		return n.Name + ": free"
	}
	return n.Name + ": " + strings.Join(parts, ", ")
}

// leafName is the node name without its node part: "s0-l1-n03" → "s0-l1".
func leafName(node string) string {
	if i := strings.LastIndex(node, "-n"); i > 0 {
		return node[:i]
	}
	return node
}

// lineChart draws one value of the samples over time, one line per profile,
// each sample holding until the next.
func lineChart(title string, results []*metrics.Result, top float64, value func(metrics.Sample) float64) template.HTML {
	const w, h, left, bottom, right, topPad = 560.0, 220.0, 44.0, 28.0, 24.0, 30.0
	end := 0.0
	for _, r := range results {
		if n := len(r.Samples); n > 0 {
			end = max(end, r.Samples[n-1].T)
		}
		for _, s := range r.Samples {
			top = max(top, value(s))
		}
	}
	if end == 0 {
		end = 1
	}
	if top == 0 {
		top = 1
	}
	px := func(t float64) float64 { return left + t/end*(w-left-right) }
	py := func(v float64) float64 { return h - bottom - v/top*(h-bottom-topPad) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" class="chart">`, w, h)
	fmt.Fprintf(&b, `<text x="%.0f" y="15" class="title">%s</text>`, left, template.HTMLEscapeString(title))
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		y := py(v)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" class="grid"/><text x="%.1f" y="%.1f" class="axis" text-anchor="end">%s</text>`,
			left, w-right, y, y, left-4, y+4, trimFloat(v))
	}
	for i := 0; i <= 5; i++ {
		t := end * float64(i) / 5
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="axis" text-anchor="middle">%ss</text>`, px(t), h-bottom+16, trimFloat(t))
	}
	for i, r := range results {
		if len(r.Samples) == 0 {
			continue
		}
		var pts strings.Builder
		prev := 0.0
		for k, s := range r.Samples {
			v := value(s)
			if k > 0 {
				fmt.Fprintf(&pts, "%.1f,%.1f ", px(s.T), py(prev))
			}
			fmt.Fprintf(&pts, "%.1f,%.1f ", px(s.T), py(v))
			prev = v
		}
		color := profileColors[i%len(profileColors)]
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"/>`, color, strings.TrimSpace(pts.String()))
		fmt.Fprintf(&b, `<text x="%.1f" y="15" class="legend" fill="%s">%s</text>`, w-right-230+80*float64(i), color, template.HTMLEscapeString(r.Profile))
	}
	b.WriteString("</svg>")
	return template.HTML(b.String()) //nolint:gosec // titles and names are escaped above
}

func trimFloat(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// topGangs returns the first n gangs, for the per-gang table.
func topGangs(gangs []metrics.Gang, n int) []metrics.Gang {
	if len(gangs) > n {
		return gangs[:n]
	}
	return gangs
}

func maxPods(run *Run) int {
	most := 0
	for _, r := range run.Results {
		most = max(most, r.Summary.Pods)
	}
	return most
}
