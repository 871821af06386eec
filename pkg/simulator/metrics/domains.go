package metrics

import (
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/workload"
)

// Whether a scheduler keeps whole NVLink cliques and leaves free for the
// big gangs that need them, judged from pod events alone so that every
// profile is judged alike:
//
//   - A domain (clique, leaf, spine) is whole-free when no GPU of any of its
//     nodes is taken: no pod bound and unfinished there, and none reserved
//     there and waiting in Permit (ObserveWaiting). Counted per level at
//     every sample.
//   - Fragmentation cost: at each instant at which some gang that requires
//     a domain (topology required) waits (submitted, quorum not bound), the
//     free GPUs that could not serve it because they are scattered. For one
//     waiting gang: all free GPUs it can use, minus the free GPUs of the
//     domains of its required level that could hold its unbound members
//     whole (nothing when none can). The instant's cost is the least over
//     the waiting gangs, so that a GPU counts once, and never below 0; it
//     is integrated over the run.
//   - Big gangs are those of a family marked big (scenario.GangClass.Big).
//     An eviction is a workload pod deleted while bound and unfinished (the
//     simulator deletes nothing during a run). An eviction is put down to
//     the first big gang, waiting when it happened, whose member binds on
//     the victim's node afterwards; the victims' domains of that gang's
//     level are the domains its evictions touched.
//   - A gang is broken when one of its members was evicted while another,
//     running at that moment, was not evicted: it ran on without the rest.
//   - A move is the eviction of a movable gang (GangClass.Movable), which
//     its owner starts again elsewhere; the work its members had done since
//     they started is lost, as it is for any other eviction.

// DomainTracker follows a run's pod events for the figures above. Feed it
// like Tracker (Observe and ObserveDelete, in event order), tell it when jobs
// are submitted, call Sample on the occupancy cadence, and read Summary at
// the end. Safe for concurrent use.
type DomainTracker struct {
	layout  *fabric.Layout
	nodeIdx map[string]int
	// podGPUs counts a pod's GPUs on a node of nodeGPUs GPUs.
	podGPUs func(pod *v1.Pod, nodeGPUs int) int
	// levels are the fabric's domain levels, tightest first, built once.
	levels []domainLevel

	mu    sync.Mutex
	start time.Time
	jobs  map[string]*domJob
	order []*domJob
	pods  map[string]*domPod
	// taken counts, per node, the GPUs of pods bound and unfinished plus
	// those of members waiting in Permit there and not yet seen bound
	// (waiting).
	taken   []int
	waiting map[string]waitingPod
	// last is when the integrals below were brought up to date; cost is the
	// fragmentation cost since then, and costGPUSec and costSec its
	// integral and the time some required gang waited.
	last       time.Time
	cost       int
	required   int
	costGPUSec float64
	costSec    float64
	samples    []DomainSample
	// freed lists, per node, the evictions there not yet put down to a big
	// gang.
	freed map[int][]*domPod
}

// domainLevel is one level of the fabric: its name and its domains' nodes.
type domainLevel struct {
	name    string
	tier    int
	domains [][]int
}

type domJob struct {
	job       scenario.Job
	submitted time.Time
	allBound  time.Time
	bound     int
	members   []*domPod
	// evicted counts members evicted; running, taken at the first
	// eviction, are the members then bound and unfinished.
	evicted int
	running []*domPod
	// victims are the evictions put down to this (big) gang.
	victims []*domPod
}

type domPod struct {
	job  *domJob // nil for pre-fill pods
	gpus int
	node int // -1 until bound
	// started is when the pod was first seen running (seenRunning), or its
	// bind until then.
	started     time.Time
	seenRunning bool
	finished    bool
	evicted     time.Time
}

type waitingPod struct{ node, gpus int }

// NewDomainTracker tracks jobs on layout. podGPUs counts a pod's GPUs on a
// node of nodeGPUs GPUs (Tracker.PodGPUs); nil counts its nvidia.com/gpu
// requests.
func NewDomainTracker(layout *fabric.Layout, jobs []scenario.Job, podGPUs func(pod *v1.Pod, nodeGPUs int) int) *DomainTracker {
	if podGPUs == nil {
		podGPUs = func(pod *v1.Pod, _ int) int { return fabric.GPUsOf(pod) }
	}
	t := &DomainTracker{
		layout: layout, nodeIdx: layout.Index(), podGPUs: podGPUs,
		levels: domainLevels(layout),
		jobs:   map[string]*domJob{}, pods: map[string]*domPod{},
		taken: make([]int, len(layout.Nodes)), waiting: map[string]waitingPod{},
		freed: map[int][]*domPod{},
	}
	for _, j := range jobs {
		dj := &domJob{job: j}
		t.jobs[j.Name] = dj
		t.order = append(t.order, dj)
	}
	return t
}

// WantsDomains reports whether jobs ask for the domain figures: some gang is
// marked big or movable.
func WantsDomains(jobs []scenario.Job) bool {
	return slices.ContainsFunc(jobs, func(j scenario.Job) bool { return j.Gang && (j.Big || j.Movable) })
}

// domainLevels lists the layout's cliques (if any), leaves and, when there
// are several, spines.
func domainLevels(l *fabric.Layout) []domainLevel {
	var out []domainLevel
	if len(l.Cliques) > 0 {
		out = append(out, domainLevel{name: scenario.TierClique, tier: fabric.Clique, domains: l.Cliques})
	}
	out = append(out, domainLevel{name: scenario.TierLeaf, tier: fabric.Leaf, domains: l.Leaves})
	if l.Spines > 1 {
		spines := make([][]int, l.Spines)
		for i, n := range l.Nodes {
			if s := n.Domain[fabric.Spine]; s >= 0 && s < l.Spines {
				spines[s] = append(spines[s], i)
			}
		}
		out = append(out, domainLevel{name: scenario.TierSpine, tier: fabric.Spine, domains: spines})
	}
	return out
}

// Start sets the time the run's clock and the integrals count from.
func (t *DomainTracker) Start(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.start, t.last = now, now
}

// Submitted records when a job's first object was about to be created.
func (t *DomainTracker) Submitted(job string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if dj := t.jobs[job]; dj != nil {
		t.advance(now)
		dj.submitted = now
		t.recompute()
	}
}

// Observe records the state of pod as a watch delivered it at now.
func (t *DomainTracker) Observe(pod *v1.Pod, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	dp := t.podFor(pod)
	if dp == nil {
		return
	}
	if pod.Spec.NodeName != "" && dp.node < 0 {
		n, ok := t.nodeIdx[pod.Spec.NodeName]
		if !ok {
			return
		}
		t.advance(now)
		t.bind(pod, dp, n, now)
		t.recompute()
	}
	if pod.Status.Phase == v1.PodRunning && dp.node >= 0 && !dp.seenRunning && !dp.finished {
		dp.seenRunning = true
		dp.started = now
	}
	if (pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed) && !dp.finished {
		t.advance(now)
		t.release(dp)
		t.recompute()
	}
}

// ObserveDelete records that pod is gone at now. A bound workload pod that
// had not finished was evicted.
func (t *DomainTracker) ObserveDelete(pod *v1.Pod, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	dp := t.pods[pod.Name]
	if dp == nil || dp.finished {
		return
	}
	delete(t.waiting, pod.Name)
	if dp.node < 0 {
		return
	}
	t.advance(now)
	t.release(dp)
	if dj := dp.job; dj != nil {
		dp.evicted = now
		if dj.evicted == 0 {
			for _, m := range dj.members {
				if !m.finished || m == dp {
					dj.running = append(dj.running, m)
				}
			}
		}
		dj.evicted++
		t.freed[dp.node] = append(t.freed[dp.node], dp)
	}
	t.recompute()
}

// ObserveWaiting records the workload members a scheduler has reserved and
// keeps waiting in Permit at now, each on the node its spec.nodeName names:
// until they bind, their GPUs are taken. It replaces the previous reading.
func (t *DomainTracker) ObserveWaiting(pods []*v1.Pod, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance(now)
	for _, w := range t.waiting {
		t.taken[w.node] -= w.gpus
	}
	clear(t.waiting)
	for _, p := range pods {
		if p.Labels[workload.RoleLabel] != workload.RoleWorkload {
			continue
		}
		n, ok := t.nodeIdx[p.Spec.NodeName]
		if !ok {
			continue
		}
		if dp := t.pods[p.Name]; dp != nil && (dp.node >= 0 || dp.finished) {
			continue
		}
		w := waitingPod{node: n, gpus: t.podGPUs(p, t.layout.Nodes[n].GPUs)}
		t.waiting[p.Name] = w
		t.taken[n] += w.gpus
	}
	t.recompute()
}

func (t *DomainTracker) podFor(pod *v1.Pod) *domPod {
	if dp := t.pods[pod.Name]; dp != nil {
		return dp
	}
	dp := &domPod{node: -1}
	switch pod.Labels[workload.RoleLabel] {
	case workload.RolePrefill:
	case workload.RoleWorkload:
		dp.job = t.jobs[pod.Labels[workload.JobLabel]]
		if dp.job == nil {
			return nil
		}
	default:
		return nil
	}
	t.pods[pod.Name] = dp
	return dp
}

func (t *DomainTracker) bind(pod *v1.Pod, dp *domPod, n int, now time.Time) {
	if w, ok := t.waiting[pod.Name]; ok {
		t.taken[w.node] -= w.gpus
		delete(t.waiting, pod.Name)
	}
	dp.node = n
	dp.gpus = t.podGPUs(pod, t.layout.Nodes[n].GPUs)
	dp.started = now
	t.taken[n] += dp.gpus
	dj := dp.job
	if dj == nil {
		return
	}
	dj.bound++
	dj.members = append(dj.members, dp)
	if dj.bound == dj.job.Quorum() && dj.allBound.IsZero() {
		dj.allBound = now
	}
	if !dj.job.Big {
		return
	}
	// The big gang needed the room of the evictions made here while it
	// waited.
	kept := t.freed[n][:0]
	for _, v := range t.freed[n] {
		if !dj.submitted.IsZero() && !v.evicted.Before(dj.submitted) {
			dj.victims = append(dj.victims, v)
		} else {
			kept = append(kept, v)
		}
	}
	t.freed[n] = kept
}

// release gives a bound pod's GPUs back.
func (t *DomainTracker) release(dp *domPod) {
	dp.finished = true
	if dp.node >= 0 {
		t.taken[dp.node] -= dp.gpus
	}
}

// advance adds the cost since the last change to the integrals; call it
// before anything the cost depends on changes.
func (t *DomainTracker) advance(now time.Time) {
	if t.last.IsZero() || !now.After(t.last) {
		return
	}
	dt := now.Sub(t.last).Seconds()
	t.costGPUSec += float64(t.cost) * dt
	if t.required > 0 {
		t.costSec += dt
	}
	t.last = now
}

// recompute sets the fragmentation cost of the state just reached.
func (t *DomainTracker) recompute() {
	t.cost, t.required = fragmentation(t.layout, t.levels, t.taken, t.waitingRequired())
}

// waitingRequired lists the jobs, in scenario order, that require a domain
// and wait: submitted, quorum not bound.
func (t *DomainTracker) waitingRequired() []waitingGang {
	var out []waitingGang
	for _, dj := range t.order {
		tp := dj.job.Topology
		if !dj.job.Gang || tp == nil || !tp.Required || dj.job.GPUsPerPod <= 0 || dj.submitted.IsZero() || !dj.allBound.IsZero() {
			continue
		}
		out = append(out, waitingGang{job: &dj.job, members: max(1, dj.job.Quorum()-dj.bound)})
	}
	return out
}

// waitingGang is a gang that requires a domain and waits; members is how
// many of its quorum are not bound yet.
type waitingGang struct {
	job     *scenario.Job
	members int
}

// fragmentation returns the fragmentation cost, in GPUs, of the fabric with
// taken GPUs per node for the waiting gangs (see the comment at the top of
// domains.go), and how many gangs wait. A gang whose level the fabric lacks
// can use no domain: all free GPUs count for it.
func fragmentation(l *fabric.Layout, levels []domainLevel, taken []int, gangs []waitingGang) (cost, waiting int) {
	if len(gangs) == 0 {
		return 0, 0
	}
	best := -1
	for _, g := range gangs {
		free, usable := 0, 0
		for i, n := range l.Nodes {
			if n.CanServe(g.job) {
				free += max(0, n.GPUs-taken[i])
			}
		}
		if k := slices.IndexFunc(levels, func(lv domainLevel) bool { return lv.name == g.job.Topology.Level }); k >= 0 {
			for _, d := range levels[k].domains {
				dFree, slots := 0, 0
				for _, i := range d {
					n := &l.Nodes[i]
					if !n.CanServe(g.job) {
						continue
					}
					f := max(0, n.GPUs-taken[i])
					dFree += f
					slots += f / g.job.GPUsPerPod
				}
				if slots >= g.members {
					usable += dFree
				}
			}
		}
		if c := max(0, free-usable); best < 0 || c < best {
			best = c
		}
	}
	return best, len(gangs)
}

// Sample records, at now, how many domains of each level are whole-free.
func (t *DomainTracker) Sample(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := DomainSample{T: t.seconds(now), WholeFree: make([]int, len(t.levels))}
	for k, lv := range t.levels {
		s.WholeFree[k] = fabric.FreeWhole(lv.domains, t.taken)
	}
	t.samples = append(t.samples, s)
}

func (t *DomainTracker) seconds(at time.Time) float64 {
	if at.IsZero() || t.start.IsZero() {
		return 0
	}
	return at.Sub(t.start).Seconds()
}

// DomainSummary is what the domain figures of one profile's run came to
// (see the comment at the top of domains.go). Times are seconds of the
// run's clock; GPU-hours are of the same clock.
type DomainSummary struct {
	// WholeFree has one entry per level, tightest first.
	WholeFree []WholeFreeLevel `json:"wholeFree"`
	// FragmentationGPUHours integrates the fragmentation cost over the
	// run; RequiredWaitSeconds is the time during which some gang that
	// requires a domain waited (the cost is 0 outside it).
	FragmentationGPUHours float64 `json:"fragmentationGPUHours"`
	RequiredWaitSeconds   float64 `json:"requiredWaitSeconds"`
	// BigGangs counts the submitted big gangs, BigGangsBound those whose
	// quorum bound. BigWaitP50 and BigWaitP99 are their times from
	// submission to the quorum bound; one never bound counts its wait to
	// the end of the run (censored), as for every gang.
	BigGangs      int     `json:"bigGangs"`
	BigGangsBound int     `json:"bigGangsBound"`
	BigWaitP50    float64 `json:"bigWaitP50Seconds"`
	BigWaitP99    float64 `json:"bigWaitP99Seconds"`
	// Evictions counts every workload pod evicted; EvictionsWhileBigWaited
	// those evicted while some big gang waited, and EvictionsPerBigGang
	// the latter over BigGangsBound.
	Evictions               int     `json:"evictions"`
	EvictionsWhileBigWaited int     `json:"evictionsWhileBigWaited"`
	EvictionsPerBigGang     float64 `json:"evictionsPerBigGang"`
	// VictimDomainsPerBigGang is the mean, over the bound big gangs, of the
	// domains of its level that the evictions put down to it touched;
	// MaxVictimDomains the most for one gang.
	VictimDomainsPerBigGang float64 `json:"victimDomainsPerBigGang"`
	MaxVictimDomains        int     `json:"maxVictimDomains"`
	// BrokenGangs counts gangs one of whose members was evicted while
	// another, running then, was not. A gang scheduler must show 0.
	BrokenGangs int `json:"brokenGangs"`
	// Moves counts the movable gangs evicted, MovedPods their members
	// evicted.
	Moves     int `json:"moves"`
	MovedPods int `json:"movedPods"`
	// GPUHoursLostToMoves and GPUHoursLostToEvictions add up, over the
	// evicted members of movable gangs and over the other evicted pods,
	// their GPUs times the time they had run since they started: work to
	// be done again.
	GPUHoursLostToMoves     float64 `json:"gpuHoursLostToMoves"`
	GPUHoursLostToEvictions float64 `json:"gpuHoursLostToEvictions"`
	// Samples are the whole-free counts over time, levels as in WholeFree.
	Samples []DomainSample `json:"samples,omitempty"`
}

// WholeFreeLevel is how many domains of one level were whole-free over a
// run: the mean over time (each sample holding until the next) and the
// least at any sample.
type WholeFreeLevel struct {
	Level   string  `json:"level"`
	Domains int     `json:"domains"`
	Mean    float64 `json:"mean"`
	Min     int     `json:"min"`
}

// DomainSample is the whole-free domains at one moment.
type DomainSample struct {
	// T is seconds from the run's start.
	T float64 `json:"t"`
	// WholeFree counts whole-free domains per level, tightest first.
	WholeFree []int `json:"wholeFree"`
}

// Summary closes the integrals at end and returns the run's figures.
func (t *DomainTracker) Summary(end time.Time) *DomainSummary {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance(end)
	s := &DomainSummary{
		FragmentationGPUHours: t.costGPUSec / 3600,
		RequiredWaitSeconds:   t.costSec,
		Samples:               slices.Clone(t.samples),
	}
	s.WholeFree = wholeFree(t.levels, t.samples, t.seconds(end))
	var waits []float64
	spread := 0
	for _, dj := range t.order {
		if dj.evicted > 0 {
			if brokenGang(dj) {
				s.BrokenGangs++
			}
			if dj.job.Movable && dj.job.Gang {
				s.Moves++
			}
		}
		for _, m := range dj.members {
			if m.evicted.IsZero() {
				continue
			}
			s.Evictions++
			lost := float64(m.gpus) * m.evicted.Sub(m.started).Seconds() / 3600
			if dj.job.Movable && dj.job.Gang {
				s.MovedPods++
				s.GPUHoursLostToMoves += lost
			} else {
				s.GPUHoursLostToEvictions += lost
			}
			if t.bigWaiting(m.evicted) {
				s.EvictionsWhileBigWaited++
			}
		}
		if !dj.job.Big || !dj.job.Gang || dj.submitted.IsZero() {
			continue
		}
		s.BigGangs++
		if dj.allBound.IsZero() {
			waits = append(waits, end.Sub(dj.submitted).Seconds())
			continue
		}
		s.BigGangsBound++
		waits = append(waits, dj.allBound.Sub(dj.submitted).Seconds())
		d := t.victimDomains(dj)
		spread += d
		s.MaxVictimDomains = max(s.MaxVictimDomains, d)
	}
	slices.Sort(waits)
	s.BigWaitP50, s.BigWaitP99 = Percentile(waits, 50), Percentile(waits, 99)
	if s.BigGangsBound > 0 {
		s.EvictionsPerBigGang = float64(s.EvictionsWhileBigWaited) / float64(s.BigGangsBound)
		s.VictimDomainsPerBigGang = float64(spread) / float64(s.BigGangsBound)
	}
	return s
}

// bigWaiting reports whether some big gang waited at at: submitted by
// then, quorum not bound before.
func (t *DomainTracker) bigWaiting(at time.Time) bool {
	return slices.ContainsFunc(t.order, func(dj *domJob) bool {
		return dj.job.Big && dj.job.Gang && !dj.submitted.IsZero() && !dj.submitted.After(at) &&
			(dj.allBound.IsZero() || dj.allBound.After(at))
	})
}

// victimDomains counts the domains of a big gang's level (its topology
// level; leaf without one) that the evictions put down to it touched.
func (t *DomainTracker) victimDomains(dj *domJob) int {
	level := scenario.TierLeaf
	if tp := dj.job.Topology; tp != nil {
		level = tp.Level
	}
	k := slices.IndexFunc(t.levels, func(lv domainLevel) bool { return lv.name == level })
	if k < 0 {
		return 0
	}
	var domains []int
	for _, v := range dj.victims {
		domains = append(domains, t.layout.Nodes[v.node].Domain[t.levels[k].tier])
	}
	slices.Sort(domains)
	return len(slices.Compact(domains))
}

// brokenGang reports whether one of a gang's members running at its first
// eviction was not evicted.
func brokenGang(dj *domJob) bool {
	if !dj.job.Gang {
		return false
	}
	return slices.ContainsFunc(dj.running, func(m *domPod) bool { return m.evicted.IsZero() })
}

// wholeFree turns the samples into each level's mean over time, each
// sample's counts holding until the next (the last until end), and least
// count.
func wholeFree(levels []domainLevel, samples []DomainSample, end float64) []WholeFreeLevel {
	out := make([]WholeFreeLevel, len(levels))
	for k, lv := range levels {
		out[k] = WholeFreeLevel{Level: lv.name, Domains: len(lv.domains)}
	}
	if len(samples) == 0 {
		return out
	}
	span := max(end, samples[len(samples)-1].T) - samples[0].T
	for k := range out {
		out[k].Min = samples[0].WholeFree[k]
		sum := 0.0
		for i, s := range samples {
			out[k].Min = min(out[k].Min, s.WholeFree[k])
			next := max(end, s.T)
			if i+1 < len(samples) {
				next = samples[i+1].T
			}
			sum += float64(s.WholeFree[k]) * (next - s.T)
		}
		if span > 0 {
			out[k].Mean = sum / span
		} else {
			out[k].Mean = float64(out[k].Min)
		}
	}
	return out
}
