package metrics

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/workload"
)

// What preemption cost a run, judged from pod events alone, so that every
// profile is judged alike, whatever its scheduler says about itself:
//
//   - A victim is a workload pod deleted while it was bound and had not
//     finished: the simulator deletes nothing during a run, so only a
//     scheduler's preemption does that.
//   - The urgent jobs are those of more than the workload's lowest
//     priority. A victim is put down to the first job of higher priority
//     whose pod binds on the victim's node after it went: that job needed
//     the room.
//   - One preemption is what one urgent job evicted. kube-scheduler's
//     default preemption evicts for each pod of a gang on its own, so for
//     it this sums the preemptions of the gang's pods; it is the figure a
//     user of any scheduler pays for placing one gang.
//   - A gang is broken when it lost some but not all of its bound pods: it
//     runs on without the rest, which a training job cannot.

// PreemptionTracker follows a run's pod events for the figures above. Feed
// it like Tracker (Observe and ObserveDelete, in event order), tell it when
// jobs are submitted, and read Summary at the end. Safe for concurrent use.
type PreemptionTracker struct {
	layout  *fabric.Layout
	nodeIdx map[string]int

	mu   sync.Mutex
	jobs map[string]*preemptJob
	// order lists the jobs as the scenario does.
	order []*preemptJob
	// minPriority is the workload's lowest priority.
	minPriority int32
	pods        map[string]*preemptPod
	// freed lists, per node, the victims evicted there that no job has
	// been found to need yet.
	freed map[int][]*preemptPod
}

type preemptJob struct {
	job       scenario.Job
	submitted time.Time
	// bound maps each member seen bound to its node.
	bound    map[string]int
	allBound time.Time
	// evicted counts the job's own pods evicted.
	evicted int
	// victims are the pods evicted for this job.
	victims []*preemptPod
}

type preemptPod struct {
	name     string
	job      *preemptJob
	node     int
	finished bool
	// marked is set when the pod was seen with the DisruptionTarget
	// condition a scheduler sets on its preemption victims.
	marked bool
	// evicted is when the pod went; zero if it did not.
	evicted time.Time
}

// NewPreemptionTracker tracks preemption in a run of jobs on layout.
func NewPreemptionTracker(layout *fabric.Layout, jobs []scenario.Job) *PreemptionTracker {
	t := &PreemptionTracker{layout: layout, nodeIdx: layout.Index(), jobs: map[string]*preemptJob{},
		pods: map[string]*preemptPod{}, freed: map[int][]*preemptPod{}}
	for i, j := range jobs {
		pj := &preemptJob{job: j, bound: map[string]int{}}
		t.jobs[j.Name] = pj
		t.order = append(t.order, pj)
		if i == 0 || j.Priority < t.minPriority {
			t.minPriority = j.Priority
		}
	}
	return t
}

// Submitted records when a job's first object was about to be created.
func (t *PreemptionTracker) Submitted(job string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if pj := t.jobs[job]; pj != nil {
		pj.submitted = now
	}
}

// Observe records the state of a pod as a watch delivered it at now.
func (t *PreemptionTracker) Observe(pod *v1.Pod, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pp := t.podFor(pod)
	if pp == nil {
		return
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue {
			pp.marked = true
		}
	}
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		pp.finished = true
	}
	if pod.Spec.NodeName == "" || pp.node >= 0 {
		return
	}
	n, ok := t.nodeIdx[pod.Spec.NodeName]
	if !ok {
		return
	}
	pp.node = n
	pj := pp.job
	pj.bound[pp.name] = n
	if len(pj.bound) == pj.job.Pods && pj.allBound.IsZero() {
		pj.allBound = now
	}
	// The job needed the room of the victims evicted here before it came.
	kept := t.freed[n][:0]
	for _, v := range t.freed[n] {
		if v.job.job.Priority < pj.job.Priority {
			pj.victims = append(pj.victims, v)
		} else {
			kept = append(kept, v)
		}
	}
	t.freed[n] = kept
}

// ObserveDelete records that a pod is gone at now. A bound workload pod
// that had not finished was evicted.
func (t *PreemptionTracker) ObserveDelete(pod *v1.Pod, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pp := t.pods[pod.Name]
	if pp == nil || pp.node < 0 || pp.finished || !pp.evicted.IsZero() {
		return
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue {
			pp.marked = true
		}
	}
	pp.evicted = now
	pp.job.evicted++
	t.freed[pp.node] = append(t.freed[pp.node], pp)
}

func (t *PreemptionTracker) podFor(pod *v1.Pod) *preemptPod {
	if pp := t.pods[pod.Name]; pp != nil {
		return pp
	}
	if pod.Labels[workload.RoleLabel] != workload.RoleWorkload {
		return nil
	}
	pj := t.jobs[pod.Labels[workload.JobLabel]]
	if pj == nil {
		return nil
	}
	pp := &preemptPod{name: pod.Name, job: pj, node: -1}
	t.pods[pod.Name] = pp
	return pp
}

// PreemptionSummary is what preemption cost one profile's run.
type PreemptionSummary struct {
	// Profile names the scheduler profile.
	Profile string `json:"profile"`
	// UrgentJobs counts the jobs above the workload's lowest priority;
	// UrgentUnbound those of them not wholly bound when the run ended.
	UrgentJobs    int `json:"urgentJobs"`
	UrgentUnbound int `json:"urgentUnbound"`
	// Preemptions counts the urgent jobs that evicted pods (see the
	// comment at the top of preemption.go).
	Preemptions int `json:"preemptions"`
	// VictimPods and VictimGangs count every evicted pod and every gang
	// that lost any; BrokenGangs those that lost some but not all of
	// their bound pods.
	VictimPods  int `json:"victimPods"`
	VictimGangs int `json:"victimGangs"`
	BrokenGangs int `json:"brokenGangs"`
	// UnmarkedVictims counts victims never seen with the DisruptionTarget
	// condition; UnattributedVictims those no urgent job bound in the place
	// of.
	UnmarkedVictims     int `json:"unmarkedVictims"`
	UnattributedVictims int `json:"unattributedVictims"`
	// VictimPodsPerPreemption and VictimGangsPerPreemption are means over
	// preemptions; MaxVictimPods is the most one preemption evicted.
	VictimPodsPerPreemption  float64 `json:"victimPodsPerPreemption"`
	VictimGangsPerPreemption float64 `json:"victimGangsPerPreemption"`
	MaxVictimPods            int     `json:"maxVictimPods"`
	// TimeToBoundP50/Max are the urgent jobs' times from submission to
	// the last member bound, over those that bound, in seconds.
	TimeToBoundP50 float64 `json:"timeToBoundP50Seconds"`
	TimeToBoundMax float64 `json:"timeToBoundMaxSeconds"`
	// LeavesSpanned and SpinesSpanned sum the leaves and spines the bound
	// urgent gangs span; ExtraLeaves the leaves beyond the fewest that
	// could hold each on an empty fabric.
	LeavesSpanned int `json:"leavesSpanned"`
	SpinesSpanned int `json:"spinesSpanned"`
	ExtraLeaves   int `json:"extraLeaves"`
	// Jobs has one line per urgent job, in scenario order.
	Jobs []UrgentJob `json:"jobs,omitempty"`
}

// UrgentJob is how one urgent job fared.
type UrgentJob struct {
	Name     string `json:"name"`
	Priority int32  `json:"priority"`
	Pods     int    `json:"pods"`
	// TimeToBound is from submission to the last member bound, in
	// seconds; negative when it never bound.
	TimeToBound float64 `json:"timeToBoundSeconds"`
	// VictimPods and VictimGangs are what it evicted: the pods, and the
	// jobs they belonged to, by name.
	VictimPods  int      `json:"victimPods"`
	VictimGangs []string `json:"victimGangs,omitempty"`
	// Leaves and Spines are the domains its bound members span.
	Leaves int `json:"leaves"`
	Spines int `json:"spines"`
}

// Summary turns what the tracker saw into figures for profile.
func (t *PreemptionTracker) Summary(profile string) PreemptionSummary {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := PreemptionSummary{Profile: profile}
	attributed := 0
	var times []float64
	for _, pj := range t.order {
		if pj.evicted > 0 {
			s.VictimGangs++
			if pj.evicted < len(pj.bound) {
				s.BrokenGangs++
			}
			s.VictimPods += pj.evicted
		}
		if pj.job.Priority <= t.minPriority {
			continue
		}
		s.UrgentJobs++
		u := UrgentJob{Name: pj.job.Name, Priority: pj.job.Priority, Pods: pj.job.Pods, TimeToBound: -1, VictimPods: len(pj.victims)}
		victimJobs := map[string]bool{}
		for _, v := range pj.victims {
			victimJobs[v.job.job.Name] = true
		}
		for name := range victimJobs {
			u.VictimGangs = append(u.VictimGangs, name)
		}
		sort.Strings(u.VictimGangs)
		leaves, spines := map[int]bool{}, map[int]bool{}
		for _, n := range pj.bound {
			leaves[t.layout.Nodes[n].Domain[fabric.Leaf]] = true
			spines[t.layout.Nodes[n].Domain[fabric.Spine]] = true
		}
		u.Leaves, u.Spines = len(leaves), len(spines)
		if !pj.allBound.IsZero() && !pj.submitted.IsZero() {
			u.TimeToBound = pj.allBound.Sub(pj.submitted).Seconds()
			times = append(times, u.TimeToBound)
			s.LeavesSpanned += u.Leaves
			s.SpinesSpanned += u.Spines
			s.ExtraLeaves += u.Leaves - t.fewestLeaves(pj.job)
		} else {
			s.UrgentUnbound++
		}
		if u.VictimPods > 0 {
			s.Preemptions++
			attributed += u.VictimPods
			s.VictimGangsPerPreemption += float64(len(u.VictimGangs))
			s.MaxVictimPods = max(s.MaxVictimPods, u.VictimPods)
		}
		s.Jobs = append(s.Jobs, u)
	}
	for _, pp := range t.pods {
		if !pp.evicted.IsZero() && !pp.marked {
			s.UnmarkedVictims++
		}
	}
	s.UnattributedVictims = s.VictimPods - attributed
	if s.Preemptions > 0 {
		s.VictimPodsPerPreemption = float64(attributed) / float64(s.Preemptions)
		s.VictimGangsPerPreemption /= float64(s.Preemptions)
	}
	if len(times) > 0 {
		slices.Sort(times)
		s.TimeToBoundP50 = times[(len(times)-1)/2]
		s.TimeToBoundMax = times[len(times)-1]
	}
	return s
}

// fewestLeaves is how many leaves a job needs at least on an empty fabric:
// the fewest leaves, largest first, whose nodes hold its pods (only DRA
// nodes for a job that claims its GPUs). It reads the layout's own leaves,
// so it holds for a cluster snapshot's uneven ones as for a generated
// fabric; a job no set of leaves holds needs them all.
func (t *PreemptionTracker) fewestLeaves(j scenario.Job) int {
	if j.GPUsPerPod <= 0 {
		return 1
	}
	holds := make([]int, 0, len(t.layout.Leaves))
	for _, leaf := range t.layout.Leaves {
		pods := 0
		for _, n := range leaf {
			if t.layout.Nodes[n].CanServe(&j) {
				pods += t.layout.Nodes[n].GPUs / j.GPUsPerPod
			}
		}
		holds = append(holds, pods)
	}
	slices.Sort(holds)
	leaves, pods := 0, 0
	for i := len(holds) - 1; i >= 0 && pods < j.Pods; i-- {
		pods += holds[i]
		leaves++
	}
	return max(1, leaves)
}

// WritePreemption prints the profiles' preemption figures side by side,
// then each profile's urgent jobs.
func WritePreemption(w io.Writer, sums []PreemptionSummary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "preemption\turgent bound\tpreemptions\tvictim pods/preemption (max)\tvictim gangs/preemption\tgangs broken\tvictims unmarked\ttime to bound p50 / max\tleaves (extra) / spines")
	for _, s := range sums {
		fmt.Fprintf(tw, "%s\t%d/%d\t%d\t%.1f (%d)\t%.1f\t%d of %d\t%d\t%.1fs / %.1fs\t%d (%d) / %d\n", s.Profile,
			s.UrgentJobs-s.UrgentUnbound, s.UrgentJobs, s.Preemptions, s.VictimPodsPerPreemption, s.MaxVictimPods,
			s.VictimGangsPerPreemption, s.BrokenGangs, s.VictimGangs, s.UnmarkedVictims,
			s.TimeToBoundP50, s.TimeToBoundMax, s.LeavesSpanned, s.ExtraLeaves, s.SpinesSpanned)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range sums {
		for _, j := range s.Jobs {
			bound := "never bound"
			if j.TimeToBound >= 0 {
				bound = fmt.Sprintf("bound after %.1fs", j.TimeToBound)
			}
			victims := "evicted nothing"
			if j.VictimPods > 0 {
				victims = fmt.Sprintf("evicted %d pod(s) of %s", j.VictimPods, strings.Join(j.VictimGangs, ", "))
			}
			if _, err := fmt.Fprintf(w, "  [%s] %s (priority %d, %d pods): %s, %s; %d leaves, %d spines\n",
				s.Profile, j.Name, j.Priority, j.Pods, bound, victims, j.Leaves, j.Spines); err != nil {
				return err
			}
		}
	}
	return nil
}
