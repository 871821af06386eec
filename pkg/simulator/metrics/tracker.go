package metrics

import (
	"fmt"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/workload"
	"github.com/gpu-gang/gpu-gang/pkg/topology"
)

// Tracker follows every pod event of a run. Feed it with Observe and
// ObserveDelete from a watch, in event order, and call Sample periodically;
// Result turns what it saw into numbers. All methods are safe for
// concurrent use.
type Tracker struct {
	layout  *fabric.Layout
	nodeIdx map[string]int
	// tree is built once from the layout and only read: bounds and spans
	// are computed from it under mu.
	tree  *topology.Tree
	grace Grace
	// claimSpecs counts pods' GPUs; see KnowClaims.
	claimSpecs claimSpecs

	mu      sync.Mutex
	start   time.Time
	used    []int
	pods    map[string]*podState
	jobs    map[string]*jobState
	order   []*jobState
	expect  int
	settled int
	done    chan struct{}

	boundPods, finishedPods int
	lastBind, lastFinish    time.Time
	prefilled               int
	samples                 []Sample
	peakUsed                int
	placement               *Placement

	// useful counts the GPUs workload pods hold now in complete gangs and
	// as plain pods; idleHeld those held by members of gangs bound only in
	// part, which cannot start, plus schedHeld (see ObserveHeld). Their
	// time integrals since start run up to lastChange.
	useful, idleHeld       int
	usefulSec, idleHeldSec float64
	lastChange             time.Time
	schedHeld              int
}

type podState struct {
	job  *jobState // nil for pre-fill pods
	node int       // -1 until bound
	// gpus is counted when the pod binds (claimSpecs.podGPUs).
	gpus     int
	finished bool
}

type jobState struct {
	job       scenario.Job
	submitted time.Time
	bound     int
	// held is the GPUs the job's bound, unfinished members hold.
	held int
	// nodes[i] is the node of the i-th member to bind, and members[i] that
	// member.
	nodes      []int
	members    []*podState
	firstBound time.Time
	// allBound is when the gang reached its quorum (every member, or the
	// whole segments an elastic job needs: scenario.Job.Quorum); members
	// beyond it join a running gang.
	allBound time.Time
	// partialSince is when the gang became part-bound; zero when it is not.
	partialSince time.Time
	partial      time.Duration
	raw          time.Duration
	spans        []Span
}

// Grace is how long a gang may be part-bound without counting as partial:
// Base plus PerMember for each member. Once a gang scheduler releases a
// gang, every member binds through an API call of its own; the calls land
// over a time that grows with the gang (a 256-pod gang takes seconds on a
// small machine), and a watch sees the gang part-bound meanwhile. That is
// binding in flight, not a gang left half-placed.
type Grace struct {
	Base      time.Duration
	PerMember time.Duration
}

// For returns the grace for a gang of size members.
func (g Grace) For(size int) time.Duration { return g.Base + time.Duration(size)*g.PerMember }

// NewTracker tracks a run on layout. A gang part-bound for no longer than
// its grace does not count as partial (see Summary.PartialGangSeconds).
func NewTracker(layout *fabric.Layout, grace Grace) (*Tracker, error) {
	var levels []scheduling.Level
	for _, lv := range layout.Levels {
		if slices.Contains(layout.TierKeys[:], lv.Key) {
			levels = append(levels, lv)
		}
	}
	tree, err := topology.BuildTree(levels, placementNodes(layout, nil), 1)
	if err != nil {
		return nil, err
	}
	return &Tracker{
		layout:  layout,
		nodeIdx: layout.Index(),
		tree:    tree,
		grace:   grace,
		used:    make([]int, len(layout.Nodes)),
		pods:    map[string]*podState{},
		jobs:    map[string]*jobState{},
		done:    make(chan struct{}),
		claimSpecs: claimSpecs{
			templates: map[string]*resourceapi.ResourceClaimSpec{},
			claims:    map[string]*resourceapi.ResourceClaimSpec{},
		},
	}, nil
}

// Expect registers the run's jobs before any of them is submitted.
func (t *Tracker) Expect(jobs []scenario.Job) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, j := range jobs {
		js := &jobState{job: j}
		t.jobs[j.Name] = js
		t.order = append(t.order, js)
		t.expect += j.Pods
	}
	if t.expect == 0 {
		close(t.done)
	}
}

// Start sets the time the run's clock, and the GPU-time integrals, count
// from.
func (t *Tracker) Start(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.start = now
	t.lastChange = now
}

// advance adds the GPU-time since the last change to the integrals; call it
// before useful or idleHeld change, and at the end.
func (t *Tracker) advance(now time.Time) {
	if t.lastChange.IsZero() || !now.After(t.lastChange) {
		return
	}
	dt := now.Sub(t.lastChange).Seconds()
	t.usefulSec += float64(t.useful) * dt
	t.idleHeldSec += float64(t.idleHeld) * dt
	t.lastChange = now
}

// Submitted records when a job's first object was about to be created.
func (t *Tracker) Submitted(job string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if js := t.jobs[job]; js != nil {
		js.submitted = now
	}
}

// Done is closed once every workload pod has settled: finished, or bound
// if it has no duration.
func (t *Tracker) Done() <-chan struct{} { return t.done }

// Progress returns how many workload pods are bound and settled, of all.
func (t *Tracker) Progress() (bound, settled, expected int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.boundPods, t.settled, t.expect
}

// Observe records the state of pod as a watch delivered it at now.
func (t *Tracker) Observe(pod *v1.Pod, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ps := t.podFor(pod)
	if ps == nil {
		return
	}
	if pod.Spec.NodeName != "" && ps.node < 0 {
		n, ok := t.nodeIdx[pod.Spec.NodeName]
		if !ok {
			return
		}
		ps.gpus = t.claimSpecs.podGPUs(pod, t.layout.Nodes[n].GPUs)
		t.bind(ps, n, now)
	}
	if (pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed) && !ps.finished {
		t.finish(ps, now)
	}
}

// ObserveDelete records that pod is gone. A bound pod's GPUs are free again;
// it still counts as bound for its gang.
func (t *Tracker) ObserveDelete(pod *v1.Pod, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ps := t.pods[pod.Name]
	if ps == nil || ps.finished {
		return
	}
	if ps.node >= 0 {
		t.finish(ps, now)
	}
}

func (t *Tracker) podFor(pod *v1.Pod) *podState {
	if ps := t.pods[pod.Name]; ps != nil {
		return ps
	}
	ps := &podState{node: -1}
	switch pod.Labels[workload.RoleLabel] {
	case workload.RolePrefill:
	case workload.RoleWorkload:
		ps.job = t.jobs[pod.Labels[workload.JobLabel]]
		if ps.job == nil {
			return nil
		}
	default:
		return nil
	}
	t.pods[pod.Name] = ps
	return ps
}

func (t *Tracker) bind(ps *podState, n int, now time.Time) {
	ps.node = n
	t.used[n] += ps.gpus
	js := ps.job
	if js == nil {
		t.prefilled += ps.gpus
		return
	}
	t.boundPods++
	if now.After(t.lastBind) {
		t.lastBind = now
	}
	t.advance(now)
	if t.boundPods >= t.expect {
		t.setSchedHeld(0) // the last bind: see ObserveHeld
	}
	js.bound++
	js.held += ps.gpus
	need := js.job.Quorum()
	switch {
	case !js.job.Gang || js.bound > need:
		t.useful += ps.gpus
	case js.bound == need:
		// The member that completes the quorum: what the others held idle
		// becomes useful.
		t.idleHeld -= js.held - ps.gpus
		t.useful += js.held
	default:
		t.idleHeld += ps.gpus
	}
	js.nodes = append(js.nodes, n)
	js.members = append(js.members, ps)
	if js.bound == 1 {
		js.firstBound = now
		if need > 1 {
			js.partialSince = now
		}
	}
	if js.bound == need {
		js.allBound = now
		if !js.partialSince.IsZero() {
			t.closePartial(js, now)
		}
		if js.job.Gang {
			js.spans = t.spansOf(js)
		}
	}
	if js.job.Duration == 0 {
		t.settle()
	}
}

func (t *Tracker) finish(ps *podState, now time.Time) {
	ps.finished = true
	if ps.node >= 0 {
		t.used[ps.node] -= ps.gpus
	}
	if ps.job == nil {
		return
	}
	t.advance(now)
	js := ps.job
	if ps.node >= 0 {
		js.held -= ps.gpus
		if !js.job.Gang || js.bound >= js.job.Quorum() {
			t.useful -= ps.gpus
		} else {
			t.idleHeld -= ps.gpus
		}
	}
	t.finishedPods++
	if now.After(t.lastFinish) {
		t.lastFinish = now
	}
	if ps.job.job.Duration > 0 {
		t.settle()
	}
}

func (t *Tracker) settle() {
	t.settled++
	if t.settled == t.expect {
		close(t.done)
	}
}

func (t *Tracker) closePartial(js *jobState, now time.Time) {
	d := now.Sub(js.partialSince)
	js.raw += d
	if d > t.grace.For(js.job.Quorum()) {
		js.partial += d
	}
	js.partialSince = time.Time{}
}

// spansOf compares the domains the gang's members landed in with the fewest
// that could have held it, given what was free when it completed with its
// own members taken out again, on the nodes that can serve its GPUs (only
// DRA nodes for a gang that claims them): per level on its own
// (LowerBound), and jointly, loosest level first (JointLowerBound).
//
// Only members that still hold their GPUs are taken out: a member that
// finished or was deleted while its gang was incomplete gave its GPUs back
// in finish already, and taking them out again would show its node with
// more free GPUs than it has, and lower the bound.
func (t *Tracker) spansOf(js *jobState) []Span {
	if js.job.GPUsPerPod == 0 {
		return nil
	}
	used := slices.Clone(t.used)
	for _, ps := range js.members {
		if !ps.finished {
			used[ps.node] -= ps.gpus
		}
	}
	nodes := placementNodes(t.layout, used)
	for i := range nodes {
		if !t.layout.Nodes[i].CanServe(&js.job) {
			nodes[i].Free = placement.Vector{0}
		}
	}
	req := &placement.Request{
		Gang:      js.job.Name,
		Resources: []string{string(fabric.GPU)},
		Nodes:     nodes,
		Members:   make([]placement.Member, len(js.members)),
	}
	for i := range req.Members {
		req.Members[i] = placement.Member{
			Name:        fmt.Sprintf("%s-%d", js.job.Name, i),
			Rank:        i,
			Request:     placement.Vector{int64(js.job.GPUsPerPod)},
			Accelerated: true,
		}
	}
	bound, err := t.tree.LowerBound(req)
	if err != nil {
		return nil
	}
	joint, err := t.tree.JointLowerBound(req)
	if err != nil {
		return nil
	}
	spanned := t.tree.Spans(req, js.nodes)
	out := make([]Span, len(spanned))
	for i := range spanned {
		out[i] = Span{Level: spanned[i].Name, Domains: spanned[i].Domains, LowerBound: bound[i].Domains, JointBound: joint[i].Domains}
	}
	return out
}

// placementNodes describes the layout's nodes with used GPUs taken (none
// when used is nil).
func placementNodes(l *fabric.Layout, used []int) []placement.Node {
	nodes := make([]placement.Node, len(l.Nodes))
	for i, n := range l.Nodes {
		free := int64(n.GPUs)
		if used != nil {
			free -= int64(used[i])
		}
		nodes[i] = placement.Node{Name: n.Name, Labels: n.Labels, Allocatable: placement.Vector{int64(n.GPUs)}, Free: placement.Vector{free}}
	}
	return nodes
}

// Sample records the fabric's state at now, and keeps a placement snapshot
// when GPU use is at a new peak.
func (t *Tracker) Sample(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	used := 0
	for _, u := range t.used {
		used += u
	}
	t.samples = append(t.samples, Sample{
		T:            t.seconds(now),
		UsedGPUs:     used,
		UsefulGPUs:   t.useful,
		IdleHeldGPUs: t.idleHeld,
		FreeLeaves:   fabric.FreeWhole(t.layout.Leaves, t.used),
		FreeCliques:  fabric.FreeWhole(t.layout.Cliques, t.used),
		BoundPods:    t.boundPods,
		FinishedPods: t.finishedPods,
	})
	if used > t.peakUsed || t.placement == nil {
		t.peakUsed = used
		t.placement = t.snapshot(now)
	}
}

// snapshot lists, per node, the GPUs each job holds. Pods are visited in
// name order so that the picture does not depend on map order.
func (t *Tracker) snapshot(now time.Time) *Placement {
	p := &Placement{T: t.seconds(now), Nodes: make([]NodePlacement, len(t.layout.Nodes))}
	for i, n := range t.layout.Nodes {
		p.Nodes[i] = NodePlacement{Name: n.Name, Leaf: n.Domain[fabric.Leaf], Clique: n.Domain[fabric.Clique], LeafName: n.LeafName}
	}
	names := make([]string, 0, len(t.pods))
	for name, ps := range t.pods {
		if ps.node >= 0 && !ps.finished {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		ps := t.pods[name]
		job := workload.RolePrefill
		if ps.job != nil {
			job = ps.job.job.Name
		}
		np := &p.Nodes[ps.node]
		if k := slices.IndexFunc(np.Pods, func(s PodSlice) bool { return s.Job == job }); k >= 0 {
			np.Pods[k].GPUs += ps.gpus
		} else {
			np.Pods = append(np.Pods, PodSlice{Job: job, GPUs: ps.gpus})
		}
	}
	return p
}

func (t *Tracker) seconds(at time.Time) float64 {
	if at.IsZero() || t.start.IsZero() {
		return 0
	}
	return at.Sub(t.start).Seconds()
}

// Prefilled returns how many GPUs pre-fill pods hold.
func (t *Tracker) Prefilled() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.prefilled
}
