package metrics

import (
	"slices"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/workload"
)

// HierarchySummary judges a run's hierarchical jobs (those with segments),
// from pod events alone, so that every profile is judged alike whatever
// form it gave the hierarchy: a CompositePodGroup with a child per
// segment, segment annotations on one PodGroup, or nothing at all.
type HierarchySummary struct {
	// Composites counts the hierarchical jobs; Complete those of which at
	// least the composite's minimum of segments (minGroupCount) had every
	// member bound by the end.
	Composites int `json:"composites"`
	Complete   int `json:"complete"`
	// Segments counts every segment of every hierarchical job,
	// CompleteSegments those with every member bound, and InDomain those
	// of the latter whose members all landed inside one domain of the
	// segment's level.
	Segments         int `json:"segments"`
	CompleteSegments int `json:"completeSegments"`
	InDomain         int `json:"inDomain"`
	// PartialCompositeSeconds adds up every span in which a composite had
	// some member bound and fewer than its minimum of segments complete,
	// counting only spans longer than the grace for its quorum's members
	// (Grace, as for PartialGangSeconds); PartialComposites counts the
	// composites with such a span and RawPartialCompositeSeconds adds up
	// every span, within the grace or not.
	PartialCompositeSeconds    float64 `json:"partialCompositeSeconds"`
	PartialComposites          int     `json:"partialComposites"`
	RawPartialCompositeSeconds float64 `json:"rawPartialCompositeSeconds"`
	// Levels compares, per level, the domains the hierarchical jobs with
	// every member bound spanned with the lower bounds (SummarizeLevels
	// over their Gang records); ExcessOverJoint is the extra domains over
	// the joint bound. A segment's own domain only narrows where a job may
	// go, so the flat joint bound is still a bound for it.
	Levels []LevelSummary `json:"levels,omitempty"`
}

// HierarchyTracker follows the members of a run's segmented jobs. Feed it
// every pod event with Observe and ObserveDelete, in event order, like
// Tracker. Safe for concurrent use.
type HierarchyTracker struct {
	layout  *fabric.Layout
	nodeIdx map[string]int
	grace   Grace

	mu    sync.Mutex
	jobs  map[string]*hierJob
	order []*hierJob
	// bound holds the pods seen bound; a pod counts once, and stays bound
	// when deleted, as in Tracker.
	bound map[string]bool
}

type hierJob struct {
	job scenario.Job
	// tier indexes NodeInfo.Domain at the segments' level; min is how
	// many segments must be complete.
	tier, min int
	segs      []hierSegment
	bound     int
	complete  int
	// done is when the min-th segment completed.
	done         time.Time
	partialSince time.Time
	partial, raw time.Duration
}

type hierSegment struct {
	// domains lists the segment-level domain of each bound member.
	domains []int
}

// NewHierarchyTracker tracks the segmented jobs among jobs on layout; a
// composite part-bound for no longer than the grace for its quorum does
// not count as partial.
func NewHierarchyTracker(layout *fabric.Layout, jobs []scenario.Job, grace Grace) *HierarchyTracker {
	h := &HierarchyTracker{layout: layout, nodeIdx: layout.Index(), grace: grace, jobs: map[string]*hierJob{}, bound: map[string]bool{}}
	for _, j := range jobs {
		if j.Segments == nil {
			continue
		}
		hj := &hierJob{
			job: j, tier: scenario.TierIndex(j.Segments.Level), min: j.Segments.Min(j.Pods),
			segs: make([]hierSegment, j.Segments.Count(j.Pods)),
		}
		h.jobs[j.Name] = hj
		h.order = append(h.order, hj)
	}
	return h
}

// Any reports whether the run has segmented jobs at all.
func (h *HierarchyTracker) Any() bool { return len(h.order) > 0 }

// Observe records the state of pod as a watch delivered it at now.
func (h *HierarchyTracker) Observe(pod *v1.Pod, now time.Time) {
	if pod.Spec.NodeName == "" || pod.Labels[workload.RoleLabel] != workload.RoleWorkload {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	hj := h.jobs[pod.Labels[workload.JobLabel]]
	if hj == nil || h.bound[pod.Name] {
		return
	}
	n, ok := h.nodeIdx[pod.Spec.NodeName]
	s, err := strconv.Atoi(pod.Labels[workload.SegmentLabel])
	if !ok || err != nil || s < 0 || s >= len(hj.segs) {
		return
	}
	h.bound[pod.Name] = true
	seg := &hj.segs[s]
	seg.domains = append(seg.domains, h.layout.Nodes[n].Domain[hj.tier])
	hj.bound++
	if hj.bound == 1 && hj.done.IsZero() {
		hj.partialSince = now
	}
	if len(seg.domains) != hj.job.Segments.Size {
		return
	}
	hj.complete++
	if hj.complete == hj.min && hj.done.IsZero() {
		hj.done = now
		h.closePartial(hj, now)
	}
}

// ObserveDelete changes nothing: a bound member still counts as bound.
func (h *HierarchyTracker) ObserveDelete(*v1.Pod, time.Time) {}

func (h *HierarchyTracker) closePartial(hj *hierJob, now time.Time) {
	if hj.partialSince.IsZero() {
		return
	}
	d := now.Sub(hj.partialSince)
	hj.raw += d
	if d > h.grace.For(hj.job.Quorum()) {
		hj.partial += d
	}
	hj.partialSince = time.Time{}
}

// Summary closes every open part-bound span at end and judges the
// hierarchical jobs; gangs are the run's Gang records (Result.Gangs), for
// the spans. It returns nil when the run has no segmented job.
func (h *HierarchyTracker) Summary(end time.Time, gangs []Gang) *HierarchySummary {
	if !h.Any() {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &HierarchySummary{Composites: len(h.order)}
	for _, hj := range h.order {
		h.closePartial(hj, end)
		if !hj.done.IsZero() {
			s.Complete++
		}
		if hj.partial > 0 {
			s.PartialComposites++
		}
		s.PartialCompositeSeconds += hj.partial.Seconds()
		s.RawPartialCompositeSeconds += hj.raw.Seconds()
		s.Segments += len(hj.segs)
		for _, seg := range hj.segs {
			if len(seg.domains) != hj.job.Segments.Size {
				continue
			}
			s.CompleteSegments++
			if seg.domains[0] >= 0 && !slices.ContainsFunc(seg.domains, func(d int) bool { return d != seg.domains[0] }) {
				s.InDomain++
			}
		}
	}
	hierarchical := slices.DeleteFunc(slices.Clone(gangs), func(g Gang) bool { return h.jobs[g.Name] == nil })
	s.Levels = SummarizeLevels(hierarchical)
	return s
}
