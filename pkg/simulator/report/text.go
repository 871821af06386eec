// Package report renders a run's results: a short text summary for the
// terminal and a self-contained HTML report with SVG charts.
package report

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/gpu-gang/gpu-gang/pkg/simulator/metrics"
)

// Run is what a report covers: one scenario's results, one per profile, in
// the order they ran.
type Run struct {
	// Scenario and Description name and describe the scenario.
	Scenario    string `json:"scenario"`
	Description string `json:"description,omitempty"`
	// Results are the profiles' results; the first is the reference that
	// ratios are taken against.
	Results []*metrics.Result `json:"results"`
}

// WriteSummary writes the comparison table and the ratios against the first
// profile.
func WriteSummary(w io.Writer, run *Run) error {
	if len(run.Results) == 0 {
		_, err := fmt.Fprintf(w, "scenario %s: no results\n", run.Scenario)
		return err
	}
	f := run.Results[0].Fabric
	fmt.Fprintf(w, "scenario %s: %d nodes (%d spines, %d leaves, %d cliques), %d GPUs", run.Scenario, f.Nodes, f.Spines, f.Leaves, f.Cliques, f.GPUs)
	switch {
	case f.RDMANICs > 0:
		fmt.Fprintf(w, " (%d of them on %d nodes that publish them through DRA, rail-optimized: a ResourceSlice of GPUs and one of RDMA NICs each, %d NICs)", f.DRAGPUs, f.DRANodes, f.RDMANICs)
	case f.DRANodes > 0:
		fmt.Fprintf(w, " (%d of them on %d nodes that publish them through DRA, one ResourceSlice each)", f.DRAGPUs, f.DRANodes)
	}
	if f.PrefilledGPUs > 0 {
		fmt.Fprintf(w, ", %d pre-filled", f.PrefilledGPUs)
	}
	s := run.Results[0].Summary
	fmt.Fprintf(w, "; %d gangs and %d plain pods, %d pods in all\n", s.Gangs, s.Jobs-s.Gangs, s.Pods)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "profile\tbound pods\tgangs bound/submitted\tcensored\tpods/s\tgangs/s\tp50 s\tp99 s\tpartial-gang s\tmakespan s\tuseful GPU use\tidle-held GPU·s\textra domains\t")
	for _, r := range run.Results {
		s := r.Summary
		status := ""
		switch {
		case r.Error != "":
			status = "  (failed: " + firstLine(r.Error) + ")"
		case s.TimedOut:
			status = "  (timed out)"
		}
		if s.HoldsUnread {
			status += "  (scheduler's holds not read)"
		}
		fmt.Fprintf(tw, "%s\t%d/%d\t%d/%d\t%d\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t%.1f%%\t%.0f\t%s\t%s\n",
			r.Profile, s.BoundPods, s.Pods, s.BoundGangs, s.SubmittedGangs, s.CensoredGangs, s.PodsPerSecond, s.GangsPerSecond,
			s.GangLatencyP50, s.GangLatencyP99, s.PartialGangSeconds, s.MakespanSeconds, 100*s.UsefulOccupancy,
			s.IdleHeldGPUSeconds, excess(r.Levels), status)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(run.Results) > 1 {
		ref := run.Results[0]
		var parts []string
		for _, r := range run.Results[1:] {
			parts = append(parts, fmt.Sprintf("vs %s: pods/s x%s, gang p99 x%s, makespan x%s",
				r.Profile,
				ratio(ref.Summary.PodsPerSecond, r.Summary.PodsPerSecond),
				ratio(ref.Summary.GangLatencyP99, r.Summary.GangLatencyP99),
				ratio(ref.Summary.MakespanSeconds, r.Summary.MakespanSeconds)))
		}
		fmt.Fprintf(w, "%s %s\n", ref.Profile, strings.Join(parts, "; "))
	}
	var rss []string
	for _, r := range run.Results {
		if b := r.Summary.SchedulerPeakRSSBytes; b > 0 {
			rss = append(rss, fmt.Sprintf("%s %.0f MiB", r.Profile, float64(b)/(1<<20)))
		}
	}
	if len(rss) > 0 {
		fmt.Fprintf(w, "scheduler peak RSS (VmHWM of its own process): %s\n", strings.Join(rss, ", "))
	}
	for _, r := range run.Results {
		if s := notExpressed(r.Profile, r.Summary.NotExpressed); s != "" {
			fmt.Fprintln(w, s)
		}
	}
	writeClaims(w, run.Results)
	if err := writeRails(w, run.Results); err != nil {
		return err
	}
	if err := writeHierarchy(w, run.Results); err != nil {
		return err
	}
	if err := writeDomains(w, run.Results); err != nil {
		return err
	}
	window := run.Results[0].Summary.WindowSeconds
	fmt.Fprintf(w, "useful GPU use: GPUs of complete gangs and plain pods, mean over the same %.1fs window for every profile, of all GPUs (pre-fill left out);\n", window)
	fmt.Fprintln(w, "p50/p99: submit→all-bound of every submitted gang; a gang not bound by the run's end counts its wait until then (censored);")
	fmt.Fprintln(w, "idle-held GPU·s: GPUs kept from other work with nothing running, over that window: gangs bound only in part, members reserved and waiting in Permit, and plan and head holds;")
	_, err := fmt.Fprintln(w, "extra domains: per level (spine/leaf/NVLink domain/node), domains spanned beyond the joint lower bound (fewest spines, then leaves inside them, ...), summed over gangs.")
	return err
}

// writeClaims writes, when some profile's pods took GPUs through DRA, what
// became of each profile's ResourceClaims.
func writeClaims(w io.Writer, results []*metrics.Result) {
	if !slices.ContainsFunc(results, func(r *metrics.Result) bool { return r.Claims != nil }) {
		return
	}
	fmt.Fprintln(w, "ResourceClaims of the workload (made from templates or, for nvidia.com/gpu served through DRA, by the scheduler):")
	for _, r := range results {
		c := r.Claims
		if c == nil {
			fmt.Fprintf(w, "  %s: none\n", r.Profile)
			continue
		}
		fmt.Fprintf(w, "  %s: %d allocated (%d devices), %d of them for nvidia.com/gpu; %d released by the end of the run; %d made in all\n",
			r.Profile, c.Allocated, c.AllocatedDevices, c.ExtendedResource, c.Released, c.Claims)
	}
	fmt.Fprintln(w, "  (a claim is released when its pods are done; one made but never allocated was given up first, such as the claim the controller makes again for a pod already done)")
}

// writeRails writes, on a rail-optimized fabric, how each profile's
// allocations sit on the rails: member pairs of one gang whose k-th GPUs
// are on different rails, and GPUs paired with NICs across PCIe roots.
func writeRails(w io.Writer, results []*metrics.Result) error {
	if !slices.ContainsFunc(results, func(r *metrics.Result) bool { return r.Rails != nil }) {
		return nil
	}
	fmt.Fprintln(w, "Rails (gangs of 2+ members bound whole, read from their claims' allocations and the ResourceSlices):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "profile	gangs judged	misaligned gangs	misaligned member pairs	cross-leaf pairs on other rail numbers	members with NICs	GPU-NIC pairs across roots	NIC rails != GPU rails	")
	for _, r := range results {
		x := r.Rails
		if x == nil {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t-\t\n", r.Profile)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d/%d\t%d/%d\t%d\t%d/%d\t%d\t\n", r.Profile, x.Gangs, x.MisalignedGangs,
			x.MisalignedPairs, x.MemberPairs, x.CrossUnitRailsDiffer, x.CrossUnitPairs, x.MembersWithNICs, x.CrossRootPairs, x.GPUNICPairs, x.NICRailMismatches)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "  two members in one leaf (rail k of its nodes is one switch) are misaligned when, for some k, their k-th GPUs (by GPU index) are on different rails; a GPU's rail is that of the NIC on its PCIe root (rail k: the k-th NIC by PCI address). Members in different leaves meet at the spine whatever their rails: their pairs are counted apart.")
	return err
}

// writeHierarchy writes, when the workload has segmented jobs, how each
// profile placed them: composites complete, segments inside their domain,
// partial-composite seconds and extra domains over the joint bound.
func writeHierarchy(w io.Writer, results []*metrics.Result) error {
	if !slices.ContainsFunc(results, func(r *metrics.Result) bool { return r.Hierarchy != nil }) {
		return nil
	}
	fmt.Fprintln(w, "Hierarchical jobs (segments; CompositePodGroups in the native profiles):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "profile\tcomposites complete\tsegments in domain\tpartial-composite s\tpartial composites\textra domains\t")
	for _, r := range results {
		h := r.Hierarchy
		if h == nil {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t\n", r.Profile)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d/%d\t%d/%d\t%.1f\t%d\t%s\t\n", r.Profile, h.Complete, h.Composites,
			h.InDomain, h.CompleteSegments, h.PartialCompositeSeconds, h.PartialComposites, excess(h.Levels))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "  composites complete: at least minGroupCount segments with every member bound; segments in domain: of the segments with every member bound, those inside one domain of their level;\n"+
		"  partial-composite s: time a composite had members bound but fewer than minGroupCount segments complete, beyond the grace; extra domains: as above, over the hierarchical jobs bound whole.")
	return err
}

// writeDomains writes, when the workload marks big or movable gangs, how
// each profile kept whole domains free for the big gangs and what
// evictions and moves cost.
func writeDomains(w io.Writer, results []*metrics.Result) error {
	i := slices.IndexFunc(results, func(r *metrics.Result) bool { return r.Domains != nil })
	if i < 0 {
		return nil
	}
	fmt.Fprintln(w, "Whole domains and big gangs:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "profile\t"
	for _, l := range results[i].Domains.WholeFree {
		head += fmt.Sprintf("whole-free %s mean/min (of %d)\t", plural(l.Level), l.Domains)
	}
	head += "fragmentation GPU·h\tbig gangs bound\tbig wait p50/p99 s\tevictions/big gang\tvictim domains/big gang (max)\tgangs broken\tmoves (pods)\tGPU·h lost: moves/evictions\t"
	fmt.Fprintln(tw, head)
	for _, r := range results {
		d := r.Domains
		if d == nil {
			fmt.Fprintf(tw, "%s\t-\n", r.Profile)
			continue
		}
		line := r.Profile + "\t"
		for _, l := range d.WholeFree {
			line += fmt.Sprintf("%.1f/%d\t", l.Mean, l.Min)
		}
		line += fmt.Sprintf("%.3f\t%d/%d\t%.1f/%.1f\t%.1f\t%.1f (%d)\t%d\t%d (%d)\t%.3f/%.3f\t",
			d.FragmentationGPUHours, d.BigGangsBound, d.BigGangs, d.BigWaitP50, d.BigWaitP99, d.EvictionsPerBigGang,
			d.VictimDomainsPerBigGang, d.MaxVictimDomains, d.BrokenGangs, d.Moves, d.MovedPods,
			d.GPUHoursLostToMoves, d.GPUHoursLostToEvictions)
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "  whole-free: no GPU of the domain bound or reserved in Permit, sampled; fragmentation: free GPUs no waiting gang that requires a domain could use (least over those gangs), integrated (GPU·h of the run's clock);\n"+
		"  evictions/big gang: pods evicted while a big gang waited, over big gangs bound; victim domains: domains of the big gang's level its evictions touched;\n"+
		"  gangs broken: a member evicted while another kept running; moves: movable gangs evicted; GPU·h lost: GPUs times run time of evicted pods.")
	return err
}

// WriteGangs writes one line per gang of r, at most limit lines: when it
// was submitted, when all members were bound, and what it spans.
func WriteGangs(w io.Writer, r *metrics.Result, limit int) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, g := range r.Gangs {
		if i == limit {
			fmt.Fprintf(tw, "[%s] ... %d more gangs in the JSON result\n", r.Profile, len(r.Gangs)-limit)
			break
		}
		landed := "never all bound"
		if g.AllBound != nil {
			landed = fmt.Sprintf("all bound %.2fs (+%.2fs)", *g.AllBound, *g.AllBound-g.Submitted)
		} else if g.Bound > 0 {
			landed = fmt.Sprintf("only %d/%d bound", g.Bound, g.Pods)
		}
		var spans []string
		for _, sp := range g.Spans {
			spans = append(spans, fmt.Sprintf("%s %d/%d", plural(sp.Level), sp.Domains, sp.JointBound))
		}
		where := "-"
		if len(spans) > 0 {
			where = strings.Join(spans, ", ") + " (spanned/joint lower bound)"
		}
		if g.PartialSeconds > 0 {
			where += fmt.Sprintf("; part-bound %.1fs", g.PartialSeconds)
		}
		if len(g.Rails) > 0 {
			aligned := "aligned"
			if g.RailMisaligned {
				aligned = "misaligned"
			}
			where += fmt.Sprintf("; rails %s (%s)", strings.Join(g.Rails, " | "), aligned)
		}
		fmt.Fprintf(tw, "[%s] %s\t%dx%d GPU\tsubmitted %.2fs\t%s\t%s\n", r.Profile, g.Name, g.Pods, g.GPUsPerPod, g.Submitted, landed, where)
	}
	return tw.Flush()
}

// excess renders the extra domains per level against the joint bound,
// loosest first.
func excess(levels []metrics.LevelSummary) string {
	if len(levels) == 0 {
		return "-"
	}
	parts := make([]string, len(levels))
	for i, l := range levels {
		parts[i] = fmt.Sprint(l.ExcessOverJoint)
	}
	return strings.Join(parts, "/")
}

// ratio renders a/b for a throughput-like number and b/a-like readings
// alike: it is just a over b, or "-" when either is zero.
// notExpressed says which of a gang's GPU fleet rules a configured baseline
// profile could not be given as node affinity; "" when it was given all.
func notExpressed(profile string, rules []string) string {
	if len(rules) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: each gang member has the required node affinity of its gang's GPU fleet policy; not expressible as node affinity, so not given: %s.",
		profile, strings.Join(rules, "; "))
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func plural(level string) string {
	switch {
	case strings.HasSuffix(level, "leaf"):
		return strings.TrimSuffix(level, "f") + "ves"
	case strings.HasSuffix(level, "s"):
		return level + "es"
	}
	return level + "s"
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
