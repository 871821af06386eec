package metrics

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/workload"
)

// t0 is the run's start in every test.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(seconds float64) time.Time { return t0.Add(time.Duration(seconds * float64(time.Second))) }

// smallLayout is 1 spine x 2 leaves x 4 nodes of 8 GPUs, cliques of 2:
// leaf s0-l0 holds n0..n3 (cliques c0: n0,n1 and c1: n2,n3), leaf s0-l1
// holds the next four.
func smallLayout(t *testing.T) *fabric.Layout {
	t.Helper()
	l, err := fabric.NewLayout(scenario.Fabric{Spines: 1, LeavesPerSpine: 2, NodesPerLeaf: 4, GPUsPerNode: 8, CliqueSize: 2, Preset: "nvidia"})
	require.NoError(t, err)
	return l
}

func member(job string, i, gpus int) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:   fmt.Sprintf("%s-%d", job, i),
			Labels: map[string]string{workload.JobLabel: job, workload.RoleLabel: workload.RoleWorkload},
		},
		Spec: v1.PodSpec{Containers: []v1.Container{{Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{fabric.GPU: *resource.NewQuantity(int64(gpus), resource.DecimalSI)},
		}}}},
	}
}

func bound(p *v1.Pod, node string) *v1.Pod {
	p = p.DeepCopy()
	p.Spec.NodeName = node
	return p
}

func finished(p *v1.Pod, node string) *v1.Pod {
	p = bound(p, node)
	p.Status.Phase = v1.PodSucceeded
	return p
}

func newTracker(t *testing.T, jobs ...scenario.Job) *Tracker {
	t.Helper()
	tr, err := NewTracker(smallLayout(t), Grace{Base: time.Second})
	require.NoError(t, err)
	tr.Expect(jobs)
	tr.Start(t0)
	for _, j := range jobs {
		tr.Submitted(j.Name, at(j.At.Seconds()))
	}
	return tr
}

func TestPartialGangSeconds(t *testing.T) {
	tests := []struct {
		name string
		// binds are the seconds at which members 0, 1, ... bind; a
		// negative value never binds.
		binds       []float64
		end         float64
		wantPartial float64
		wantRaw     float64
		wantAll     bool
	}{
		{name: "released together, within the grace", binds: []float64{1, 1.01, 1.02, 1.5}, end: 5, wantPartial: 0, wantRaw: 0.5, wantAll: true},
		{name: "half placed for 3s", binds: []float64{1, 1, 4, 4}, end: 5, wantPartial: 3, wantRaw: 3, wantAll: true},
		{name: "never completes: open span closes at the end", binds: []float64{2, 2, -1, -1}, end: 10, wantPartial: 8, wantRaw: 8},
		{name: "nothing bound is not partial", binds: []float64{-1, -1, -1, -1}, end: 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker(t, scenario.Job{Name: "g", Gang: true, Pods: 4, GPUsPerPod: 8})
			for i, s := range tc.binds {
				p := member("g", i, 8)
				tr.Observe(p, at(0))
				if s >= 0 {
					tr.Observe(bound(p, smallLayout(t).Nodes[i].Name), at(s))
				}
			}
			r := tr.Result(at(tc.end), false)
			require.InDelta(t, tc.wantPartial, r.Summary.PartialGangSeconds, 1e-9)
			require.InDelta(t, tc.wantRaw, r.Summary.RawPartialSeconds, 1e-9)
			require.Equal(t, tc.wantAll, r.Gangs[0].AllBound != nil)
			if tc.wantPartial > 0 {
				require.Equal(t, 1, r.Summary.PartialGangs)
			}
		})
	}
}

// Once every workload pod is bound nothing is kept from other work: a
// reading of the scheduler's holds taken before the last binds, or one that
// lags them, does not count on to the end of the window.
func TestNothingIsHeldOnceEveryPodIsBound(t *testing.T) {
	tr := newTracker(t, scenario.Job{Name: "g", Gang: true, Pods: 2, GPUsPerPod: 8})
	a, b := member("g", 0, 8), member("g", 1, 8)
	tr.ObserveHeld(nil, 16, at(1))
	tr.Observe(bound(a, "s0-l0-n0"), at(2))
	tr.Observe(bound(b, "s0-l0-n1"), at(2))
	tr.ObserveHeld(nil, 16, at(3))
	r := tr.Result(at(10), false)
	require.InDelta(t, 16, r.Summary.IdleHeldGPUSecondsToEnd, 1e-9, "16 planned GPUs from 1s to 2s only")
	require.Zero(t, r.Summary.EndIdleHeldGPUs)
}

// An elastic gang (segments, of which minCount must start together) is
// whole once its quorum is bound: members beyond it join a running gang, so
// they neither keep it part-bound nor count as idle-held.
func TestElasticGangCompletesAtItsQuorum(t *testing.T) {
	tr := newTracker(t, scenario.Job{Name: "g", Gang: true, Pods: 6, GPUsPerPod: 8,
		Segments: &scenario.Segments{Size: 2, Level: scenario.TierClique, MinCount: 2}})
	names := smallLayout(t).Nodes
	for i, s := range []float64{1, 1, 3, 3, 7, -1} {
		p := member("g", i, 8)
		tr.Observe(p, at(0))
		if s >= 0 {
			tr.Observe(bound(p, names[i].Name), at(s))
		}
	}
	r := tr.Result(at(10), false)
	require.NotNil(t, r.Gangs[0].AllBound, "4 of 6 members are the quorum")
	require.InDelta(t, 2, r.Summary.PartialGangSeconds, 1e-9, "part-bound from 1s until the quorum at 3s, never after")
	require.InDelta(t, 16*2, r.Summary.IdleHeldGPUSecondsToEnd, 1e-9, "two members' GPUs idle from 1s to 3s")
	require.InDelta(t, 32*4+40*3, r.Summary.UsefulGPUSeconds, 1e-9, "the quorum's GPUs from 3s, the fifth member's from 7s")
	require.Equal(t, 1, r.Summary.BoundGangs)
}

// TestDeletedMemberStillCountsAsBound: a member deleted after it bound does
// not reopen its gang's partial span.
func TestDeletedMemberStillCountsAsBound(t *testing.T) {
	tr := newTracker(t, scenario.Job{Name: "g", Gang: true, Pods: 2, GPUsPerPod: 8})
	a, b := member("g", 0, 8), member("g", 1, 8)
	tr.Observe(bound(a, "s0-l0-n0"), at(1))
	tr.Observe(bound(b, "s0-l0-n1"), at(1.1))
	tr.ObserveDelete(bound(a, "s0-l0-n0"), at(2))
	r := tr.Result(at(9), false)
	require.Zero(t, r.Summary.PartialGangSeconds)
	require.Equal(t, 2, r.Gangs[0].Bound)
}

func TestSpansAgainstLowerBound(t *testing.T) {
	tests := []struct {
		name  string
		nodes []string
		// prefill occupies whole nodes before the gang arrives.
		prefill []string
		want    []Span
	}{
		{
			name:  "one clique: at the bound",
			nodes: []string{"s0-l0-n0", "s0-l0-n1"},
			want: []Span{
				{Level: "spine", Domains: 1, LowerBound: 1, JointBound: 1}, {Level: "leaf", Domains: 1, LowerBound: 1, JointBound: 1},
				{Level: "NVLink domain", Domains: 1, LowerBound: 1, JointBound: 1}, {Level: "node", Domains: 2, LowerBound: 2, JointBound: 2},
			},
		},
		{
			name:  "split over two leaves when one clique was free",
			nodes: []string{"s0-l0-n0", "s0-l1-n0"},
			want: []Span{
				{Level: "spine", Domains: 1, LowerBound: 1, JointBound: 1}, {Level: "leaf", Domains: 2, LowerBound: 1, JointBound: 1},
				{Level: "NVLink domain", Domains: 2, LowerBound: 1, JointBound: 1}, {Level: "node", Domains: 2, LowerBound: 2, JointBound: 2},
			},
		},
		{
			name:    "fragmentation raises the bound",
			prefill: []string{"s0-l0-n1", "s0-l0-n3", "s0-l1-n1", "s0-l1-n3"},
			nodes:   []string{"s0-l0-n0", "s0-l0-n2"},
			want: []Span{
				{Level: "spine", Domains: 1, LowerBound: 1, JointBound: 1}, {Level: "leaf", Domains: 1, LowerBound: 1, JointBound: 1},
				{Level: "NVLink domain", Domains: 2, LowerBound: 2, JointBound: 2}, {Level: "node", Domains: 2, LowerBound: 2, JointBound: 2},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker(t, scenario.Job{Name: "g", Gang: true, Pods: 2, GPUsPerPod: 8})
			for i, n := range tc.prefill {
				p := workload.PrefillPod("sim", i, n, 8, false)
				tr.Observe(p, at(0))
			}
			for i, n := range tc.nodes {
				tr.Observe(bound(member("g", i, 8), n), at(1))
			}
			r := tr.Result(at(2), false)
			if diff := cmp.Diff(tc.want, r.Gangs[0].Spans); diff != "" {
				t.Errorf("spans (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestThroughputLatencyAndMakespan(t *testing.T) {
	jobs := []scenario.Job{
		{Name: "a", Gang: true, Pods: 2, GPUsPerPod: 8, Duration: 4 * time.Second},
		{Name: "b", Gang: true, Pods: 2, GPUsPerPod: 8, At: time.Second, Duration: 4 * time.Second},
		{Name: "p", Pods: 1, GPUsPerPod: 1, At: time.Second},
	}
	tr := newTracker(t, jobs...)
	l := smallLayout(t)
	tr.Observe(bound(member("a", 0, 8), l.Nodes[0].Name), at(1))
	tr.Observe(bound(member("a", 1, 8), l.Nodes[1].Name), at(1))
	tr.Observe(bound(member("b", 0, 8), l.Nodes[4].Name), at(3))
	tr.Observe(bound(member("b", 1, 8), l.Nodes[5].Name), at(4))
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{workload.JobLabel: "p", workload.RoleLabel: workload.RoleWorkload}}}
	tr.Observe(bound(p, l.Nodes[2].Name), at(2))
	tr.Sample(at(4))
	select {
	case <-tr.Done():
		t.Fatal("done before any pod with a duration finished")
	default:
	}
	for i, n := range []int{0, 1} {
		tr.Observe(finished(member("a", i, 8), l.Nodes[n].Name), at(5))
	}
	for i, n := range []int{4, 5} {
		tr.Observe(finished(member("b", i, 8), l.Nodes[n].Name), at(8))
	}
	tr.Observe(finished(p, l.Nodes[2].Name), at(6))
	<-tr.Done()
	r := tr.Result(at(9), false)
	s := r.Summary
	require.Equal(t, 3, s.Jobs)
	require.Equal(t, 2, s.Gangs)
	require.Equal(t, 5, s.BoundPods)
	require.Equal(t, 2, s.BoundGangs)
	require.InDelta(t, 4, s.LastBindSeconds, 1e-9)
	require.InDelta(t, 5.0/4, s.PodsPerSecond, 1e-9)
	require.InDelta(t, 2.0/4, s.GangsPerSecond, 1e-9)
	// Latencies: a 1s, b 3s.
	require.InDelta(t, 1, s.GangLatencyP50, 1e-9)
	require.InDelta(t, 3, s.GangLatencyP99, 1e-9)
	require.InDelta(t, 8, s.MakespanSeconds, 1e-9)
	require.InDelta(t, 1, s.BindSpreadMaxSeconds, 1e-9)
	require.Zero(t, s.PartialGangSeconds, "b was part-bound for exactly the 1s grace")
}

func TestGraceGrowsWithTheGang(t *testing.T) {
	g := Grace{Base: time.Second, PerMember: 20 * time.Millisecond}
	require.Equal(t, 1080*time.Millisecond, g.For(4))
	require.Equal(t, 6120*time.Millisecond, g.For(256))

	tr, err := NewTracker(smallLayout(t), Grace{Base: time.Second, PerMember: 500 * time.Millisecond})
	require.NoError(t, err)
	tr.Expect([]scenario.Job{{Name: "g", Gang: true, Pods: 4, GPUsPerPod: 8}})
	tr.Start(t0)
	for i, s := range []float64{1, 1.5, 2, 3.9} {
		tr.Observe(bound(member("g", i, 8), smallLayout(t).Nodes[i].Name), at(s))
	}
	r := tr.Result(at(5), false)
	require.Zero(t, r.Summary.PartialGangSeconds, "2.9s is within 1s + 4 x 0.5s")
	require.InDelta(t, 2.9, r.Summary.RawPartialSeconds, 1e-9)
}

func TestPercentile(t *testing.T) {
	vals := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	require.Equal(t, 5.0, Percentile(vals, 50))
	require.Equal(t, 10.0, Percentile(vals, 99))
	require.Equal(t, 1.0, Percentile(vals, 0))
	require.Equal(t, 0.0, Percentile(nil, 50))
}

func TestPeakOccupancy(t *testing.T) {
	samples := []Sample{{T: 0, UsedGPUs: 0}, {T: 1, UsedGPUs: 48}, {T: 3, UsedGPUs: 32}}
	require.InDelta(t, 0.75, peakOccupancy(samples, 64), 1e-9)
	require.Zero(t, peakOccupancy(nil, 64))
}

// GPUs of a gang bound in part are idle-held, not useful, until its last
// member binds; then all of them are useful. Plain pods are useful from
// their bind; pre-fill is neither. Both integrals are exact between
// events, whatever the sampling.
func TestUsefulAndIdleHeldGPUSeconds(t *testing.T) {
	jobs := []scenario.Job{
		{Name: "g", Gang: true, Pods: 2, GPUsPerPod: 8, Duration: 10 * time.Second},
		{Name: "p", Pods: 1, GPUsPerPod: 2},
	}
	tr := newTracker(t, jobs...)
	tr.Observe(workload.PrefillPod("sim", 0, "s0-l1-n3", 8, false), at(0))
	tr.Observe(bound(member("g", 0, 8), "s0-l0-n0"), at(1))
	tr.Sample(at(2))
	tr.Observe(bound(member("g", 1, 8), "s0-l0-n1"), at(4)) // g idle-held 8 GPUs for 3s
	tr.Observe(bound(member("p", 0, 2), "s0-l0-n2"), at(5))
	tr.Sample(at(5))
	tr.Observe(finished(member("g", 0, 8), "s0-l0-n0"), at(8))
	tr.Observe(finished(member("g", 1, 8), "s0-l0-n1"), at(9))
	r := tr.Result(at(10), false)
	s := r.Summary
	// Useful: g 16 GPUs 4s-8s, 8 GPUs 8s-9s; p 2 GPUs 5s-10s.
	require.InDelta(t, 16*4+8*1+2*5, s.UsefulGPUSeconds, 1e-9)
	require.InDelta(t, 8*3, s.IdleHeldGPUSecondsToEnd, 1e-9)
	require.Equal(t, 2, s.EndUsefulGPUs, "p runs on")
	require.Zero(t, s.EndIdleHeldGPUs)
	require.InDelta(t, 10, s.EndSeconds, 1e-9)
	require.InDelta(t, 10, s.WindowSeconds, 1e-9, "alone, a run's window is its own")
	require.InDelta(t, (16*4+8*1+2*5)/10.0/64, s.UsefulOccupancy, 1e-9)
	require.InDelta(t, 24, s.IdleHeldGPUSeconds, 1e-9)
	require.Equal(t, 8, r.Samples[0].IdleHeldGPUs)
	require.Zero(t, r.Samples[0].UsefulGPUs)
	require.Equal(t, 18, r.Samples[1].UsefulGPUs)
	require.Equal(t, 26, r.Samples[1].UsedGPUs, "used counts pre-fill too")
}

// A member that finishes while its gang is still incomplete stops holding
// its GPUs idle; the gang's later completion moves only what is still held.
func TestIdleHeldWhenAMemberFinishesBeforeItsGangCompletes(t *testing.T) {
	tr := newTracker(t, scenario.Job{Name: "g", Gang: true, Pods: 2, GPUsPerPod: 4, Duration: time.Second})
	tr.Observe(bound(member("g", 0, 4), "s0-l0-n0"), at(1))
	tr.Observe(finished(member("g", 0, 4), "s0-l0-n0"), at(2))
	tr.Observe(bound(member("g", 1, 4), "s0-l0-n1"), at(5))
	r := tr.Result(at(6), false)
	require.InDelta(t, 4, r.Summary.IdleHeldGPUSecondsToEnd, 1e-9)
	require.InDelta(t, 4, r.Summary.UsefulGPUSeconds, 1e-9)
	require.Equal(t, 4, r.Summary.EndUsefulGPUs)
}

// Every profile's figures are taken over the longest run's window; a run
// that ended sooner keeps its end state to the end of the window.
func TestCommonWindow(t *testing.T) {
	fast := &Result{Fabric: FabricSize{GPUs: 10}, Summary: Summary{EndSeconds: 10, UsefulGPUSeconds: 50, EndUsefulGPUs: 2, IdleHeldGPUSecondsToEnd: 0}}
	slow := &Result{Fabric: FabricSize{GPUs: 10}, Summary: Summary{EndSeconds: 20, UsefulGPUSeconds: 60, EndIdleHeldGPUs: 3, IdleHeldGPUSecondsToEnd: 40}}
	stuck := &Result{Fabric: FabricSize{GPUs: 10}, Summary: Summary{EndSeconds: 15, UsefulGPUSeconds: 30, EndIdleHeldGPUs: 4, IdleHeldGPUSecondsToEnd: 20}}
	CommonWindow([]*Result{fast, slow, stuck})
	for _, r := range []*Result{fast, slow, stuck} {
		require.InDelta(t, 20, r.Summary.WindowSeconds, 1e-9)
	}
	require.InDelta(t, (50+2*10)/20.0/10, fast.Summary.UsefulOccupancy, 1e-9)
	require.InDelta(t, 60/20.0/10, slow.Summary.UsefulOccupancy, 1e-9)
	require.InDelta(t, 40, slow.Summary.IdleHeldGPUSeconds, 1e-9, "its own end is the window's")
	require.InDelta(t, 20+4*5, stuck.Summary.IdleHeldGPUSeconds, 1e-9, "a stuck gang holds on to the window's end")
}

// A gang placed as well as it could be, though its levels miss their own
// bounds, is at the joint bound and charged nothing against it.
func TestJointBoundInTheSummary(t *testing.T) {
	gangs := []Gang{
		{Name: "best", Spans: []Span{{Level: "spine", Domains: 1, LowerBound: 1, JointBound: 1}, {Level: "leaf", Domains: 4, LowerBound: 3, JointBound: 4}}},
		{Name: "crossed", Spans: []Span{{Level: "spine", Domains: 2, LowerBound: 1, JointBound: 1}, {Level: "leaf", Domains: 3, LowerBound: 3, JointBound: 4}}},
		{Name: "loose", Spans: []Span{{Level: "spine", Domains: 1, LowerBound: 1, JointBound: 1}, {Level: "leaf", Domains: 6, LowerBound: 3, JointBound: 4}}},
	}
	levels := SummarizeLevels(gangs)
	require.Equal(t, 1, levels[0].ExcessOverJoint, "crossed: one extra spine")
	require.Equal(t, 2, levels[1].ExcessOverJoint, "loose: two leaves beyond four; crossed: none, it used fewer leaves")
	require.Equal(t, 1+0+3, levels[1].ExcessDomains, "per-level bounds charge the best placement a leaf")
	require.False(t, worseThanJoint(gangs[0].Spans))
	require.True(t, worseThanJoint(gangs[1].Spans))
	require.True(t, worseThanJoint(gangs[2].Spans))
}

func TestSampleCountsFreeLeavesAndCliques(t *testing.T) {
	tr := newTracker(t, scenario.Job{Name: "g", Gang: true, Pods: 1, GPUsPerPod: 1})
	tr.Sample(at(0))
	tr.Observe(bound(member("g", 0, 1), "s0-l1-n3"), at(1))
	tr.Sample(at(1))
	r := tr.Result(at(2), false)
	require.Equal(t, Sample{T: 0, FreeLeaves: 2, FreeCliques: 4}, r.Samples[0])
	require.Equal(t, Sample{T: 1, UsedGPUs: 1, UsefulGPUs: 1, FreeLeaves: 1, FreeCliques: 3, BoundPods: 1}, r.Samples[1])
	require.Equal(t, []PodSlice{{Job: "g", GPUs: 1}}, r.Placement.Nodes[7].Pods, "the snapshot is taken at the new peak")
}

// A member that finished, or was deleted, before its gang completed gave its
// GPUs back already: the bound must not count them free a second time. Here
// member 0 runs out on n0 before the others bind on n1..n3 of the same leaf.
// Counted twice, n0 would show 16 free GPUs, two members would fit on it,
// and the gang's four nodes would look one worse than a three-node bound.
func TestJointBoundCountsFreedMembersOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		gone func(tr *Tracker, p *v1.Pod)
	}{
		{"finished", func(tr *Tracker, p *v1.Pod) { tr.Observe(finished(p, "s0-l0-n0"), at(2)) }},
		{"deleted", func(tr *Tracker, p *v1.Pod) { tr.ObserveDelete(bound(p, "s0-l0-n0"), at(2)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker(t, scenario.Job{Name: "g", Gang: true, Pods: 4, GPUsPerPod: 8, Duration: time.Second})
			first := member("g", 0, 8)
			tr.Observe(bound(first, "s0-l0-n0"), at(1))
			tc.gone(tr, first)
			for i, n := range []string{"s0-l0-n1", "s0-l0-n2", "s0-l0-n3"} {
				tr.Observe(bound(member("g", i+1, 8), n), at(3))
			}
			r := tr.Result(at(4), false)
			want := []Span{
				{Level: "spine", Domains: 1, LowerBound: 1, JointBound: 1}, {Level: "leaf", Domains: 1, LowerBound: 1, JointBound: 1},
				{Level: "NVLink domain", Domains: 2, LowerBound: 2, JointBound: 2}, {Level: "node", Domains: 4, LowerBound: 4, JointBound: 4},
			}
			if diff := cmp.Diff(want, r.Gangs[0].Spans); diff != "" {
				t.Errorf("spans (-want,+got):\n%s", diff)
			}
			require.Equal(t, 1, r.Summary.AtJointBound)
		})
	}
}

// A gang never bound counts in the percentiles at its wait until the run's
// end (censored) and against the joint bound as not at it: a profile that
// leaves gangs unbound must not look faster or tighter for it. A gang due
// after the run ended was never submitted and counts nowhere.
func TestUnboundGangsAreCensored(t *testing.T) {
	tr, err := NewTracker(smallLayout(t), Grace{Base: time.Second})
	require.NoError(t, err)
	tr.Expect([]scenario.Job{
		{Name: "fast", Gang: true, Pods: 2, GPUsPerPod: 8},
		{Name: "stuck", Gang: true, Pods: 2, GPUsPerPod: 8},
		{Name: "late", Gang: true, Pods: 2, GPUsPerPod: 8, At: time.Hour},
	})
	tr.Start(t0)
	tr.Submitted("fast", at(0))
	tr.Submitted("stuck", at(1))
	tr.Observe(bound(member("fast", 0, 8), "s0-l0-n0"), at(1))
	tr.Observe(bound(member("fast", 1, 8), "s0-l0-n1"), at(1))
	tr.Observe(bound(member("stuck", 0, 8), "s0-l1-n0"), at(2))
	s := tr.Result(at(11), true).Summary
	require.Equal(t, 3, s.Gangs)
	require.Equal(t, 2, s.SubmittedGangs)
	require.Equal(t, 1, s.BoundGangs)
	require.Equal(t, 1, s.CensoredGangs)
	require.InDelta(t, 1, s.GangLatencyP50, 1e-9, "fast: 1s")
	require.InDelta(t, 10, s.GangLatencyP99, 1e-9, "stuck: submitted at 1s, still waiting at 11s")
	require.Equal(t, 2, s.JointGangs, "stuck is judged too")
	require.Equal(t, 1, s.AtJointBound)
}

// What the scheduler holds with no pod bound, members waiting in Permit and
// its own plans and holds, is idle-held like a part-bound gang's GPUs, from
// one reading to the next.
func TestObserveHeldCountsAsIdleHeld(t *testing.T) {
	tr := newTracker(t, scenario.Job{Name: "g", Gang: true, Pods: 2, GPUsPerPod: 8})
	waiting := bound(member("g", 0, 8), "s0-l0-n0")
	tr.ObserveHeld([]*v1.Pod{waiting}, 0, at(1))
	tr.ObserveHeld([]*v1.Pod{waiting, workload.PrefillPod("sim", 0, "s0-l0-n1", 8, false)}, 4, at(3))
	tr.Sample(at(4))
	tr.ObserveHeld(nil, 0, at(5))
	r := tr.Result(at(6), false)
	require.InDelta(t, 8*2+12*2, r.Summary.IdleHeldGPUSecondsToEnd, 1e-9, "8 GPUs 1s-3s, then 8 waiting + 4 planned 3s-5s; pre-fill is not the scheduler's")
	require.Zero(t, r.Summary.EndIdleHeldGPUs)
	require.Equal(t, 12, r.Samples[0].IdleHeldGPUs)
	require.Zero(t, r.Summary.UsefulGPUSeconds)
}
