package podgroup

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	st "k8s.io/kubernetes/pkg/scheduler/testing"
	upstream "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling/v1alpha1"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

const (
	testNS = "ns"
	grace  = 5 * time.Minute
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// extended turns a PodGroup built with gangtest into the controller's type.
func extended(pg *upstream.PodGroup) *v1alpha1.PodGroup {
	return &v1alpha1.PodGroup{
		TypeMeta:   pg.TypeMeta,
		ObjectMeta: pg.ObjectMeta,
		Spec:       pg.Spec,
		Status:     v1alpha1.PodGroupStatus{PodGroupStatus: pg.Status},
	}
}

// member starts a pod of group "train", created at t0.
func member(name string) *st.PodWrapper {
	return st.MakePod().Namespace(testNS).Name(name).Label(scheduling.PodGroupLabel, "train").
		CreationTimestamp(metav1.NewTime(t0))
}

func pods(ws ...*st.PodWrapper) []v1.Pod {
	out := make([]v1.Pod, len(ws))
	for i, w := range ws {
		out[i] = *w.Obj()
	}
	return out
}

// repeat builds n members named <prefix>-0, <prefix>-1, ... with the same
// settings.
func repeat(n int, prefix string, set func(*st.PodWrapper) *st.PodWrapper) []*st.PodWrapper {
	out := make([]*st.PodWrapper, n)
	for i := range out {
		out[i] = set(member(fmt.Sprintf("%s-%d", prefix, i)))
	}
	return out
}

func pending(p *st.PodWrapper) *st.PodWrapper { return p.Phase(v1.PodPending) }
func bound(p *st.PodWrapper) *st.PodWrapper   { return p.Phase(v1.PodPending).Node("n") }
func running(p *st.PodWrapper) *st.PodWrapper { return p.Phase(v1.PodRunning).Node("n") }
func succeeded(p *st.PodWrapper) *st.PodWrapper {
	return p.Phase(v1.PodSucceeded).Node("n")
}
func failed(p *st.PodWrapper) *st.PodWrapper { return p.Phase(v1.PodFailed).Node("n") }

func concat(groups ...[]*st.PodWrapper) []*st.PodWrapper {
	var out []*st.PodWrapper
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// cond is the part of a condition a case checks.
type cond struct {
	Status metav1.ConditionStatus
	Reason string
}

type counts struct {
	Phase                      upstream.PodGroupPhase
	Running, Succeeded, Failed int32
}

// desired is a computed status and when to look again.
type desired struct {
	status       v1alpha1.PodGroupStatus
	recheckAfter time.Duration
}

// computeStatusAt computes pg's status from pods at now.
func computeStatusAt(pg *v1alpha1.PodGroup, ps []v1.Pod, lost []lostMember, now time.Time, grace time.Duration) desired {
	st, recheck := computeStatus(pg, observe(podGroups{}.spec(pg), ps, lost, now, grace))
	return desired{status: st, recheckAfter: recheck}
}

func TestComputeStatus(t *testing.T) {
	pg := func(min int32) *gangtest.PodGroupWrapper {
		return gangtest.MakePodGroup("train", testNS).MinMember(min).Generation(3)
	}
	tests := []struct {
		name  string
		pg    *gangtest.PodGroupWrapper
		pods  []*st.PodWrapper
		now   time.Time
		want  counts
		conds map[string]cond
		// notes are substrings the condition messages must contain.
		notes   map[string]string
		recheck time.Duration
	}{
		{
			name: "a new group without pods waits, with nothing to recheck",
			pg:   pg(4),
			now:  t0,
			want: counts{Phase: upstream.PodGroupPending},
			conds: map[string]cond{
				ConditionMembersCreated: {metav1.ConditionFalse, ReasonWaitingForMembers},
				ConditionScheduled:      {metav1.ConditionFalse, ReasonWaitingForMembers},
			},
			notes: map[string]string{ConditionMembersCreated: "0/4 present"},
		},
		{
			name:    "members still arriving are rechecked when the grace period ends",
			pg:      pg(4),
			pods:    repeat(3, "w", pending),
			now:     t0.Add(time.Minute),
			want:    counts{Phase: upstream.PodGroupPending},
			conds:   map[string]cond{ConditionMembersCreated: {metav1.ConditionFalse, ReasonWaitingForMembers}},
			notes:   map[string]string{ConditionMembersCreated: "3/4 present"},
			recheck: 4 * time.Minute,
		},
		{
			name:  "members waiting past the grace period for the rest are reported missing",
			pg:    pg(4).Owner("batch/v1", "Job", "train"),
			pods:  repeat(3, "w", pending),
			now:   t0.Add(grace),
			want:  counts{Phase: upstream.PodGroupPending},
			conds: map[string]cond{ConditionMembersCreated: {metav1.ConditionFalse, ReasonMembersMissing}},
			notes: map[string]string{ConditionMembersCreated: "Check Job train"},
		},
		{
			name: "an MPIJob whose launcher waits for ready workers is a deadlock the message names",
			pg:   pg(3).Owner("kubeflow.org/v2beta1", "MPIJob", "pi"),
			pods: repeat(2, "pi-worker", func(p *st.PodWrapper) *st.PodWrapper {
				return pending(p).Label(scheduling.KubeflowReplicaTypeLabel, "worker")
			}),
			now:   t0.Add(time.Hour),
			want:  counts{Phase: upstream.PodGroupPending},
			conds: map[string]cond{ConditionMembersCreated: {metav1.ConditionFalse, ReasonMembersMissing}},
			notes: map[string]string{ConditionMembersCreated: "spec.launcherCreationPolicy: AtStartup"},
		},
		{
			name: "a TrainJob whose initializers wait for nodes created after them is a deadlock the message names",
			pg:   pg(6).Owner("trainer.kubeflow.org/v1alpha1", "TrainJob", "llm"),
			pods: concat(
				repeat(1, "llm-dataset-initializer", func(p *st.PodWrapper) *st.PodWrapper {
					return pending(p).Label(jobSetReplicatedJobLabel, "dataset-initializer")
				}),
				repeat(1, "llm-model-initializer", func(p *st.PodWrapper) *st.PodWrapper {
					return pending(p).Label(trainerAncestorStepLabel, "model-initializer")
				})),
			now:   t0.Add(time.Hour),
			want:  counts{Phase: upstream.PodGroupPending},
			conds: map[string]cond{ConditionMembersCreated: {metav1.ConditionFalse, ReasonMembersMissing}},
			notes: map[string]string{ConditionMembersCreated: "initializer pods in minMember"},
		},
		{
			name: "a quorum of unbound members is being scheduled",
			pg:   pg(4),
			pods: repeat(4, "w", pending),
			now:  t0,
			want: counts{Phase: upstream.PodGroupScheduling},
			conds: map[string]cond{
				ConditionMembersCreated: {metav1.ConditionTrue, ReasonEnoughMembers},
				ConditionScheduled:      {metav1.ConditionFalse, ReasonNotScheduled},
			},
		},
		{
			name: "the scheduler's reason for a waiting member is passed on",
			pg:   pg(2),
			pods: []*st.PodWrapper{
				pending(member("w-0")),
				pending(member("w-1")).Conditions([]v1.PodCondition{{
					Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable,
					Message: "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
				}}),
			},
			now:   t0,
			want:  counts{Phase: upstream.PodGroupScheduling},
			conds: map[string]cond{ConditionScheduled: {metav1.ConditionFalse, ReasonUnschedulable}},
			notes: map[string]string{ConditionScheduled: "pod w-1: 0/4 nodes are available"},
		},
		{
			name:  "bound members that do not run yet are scheduled",
			pg:    pg(4),
			pods:  repeat(4, "w", bound),
			now:   t0,
			want:  counts{Phase: upstream.PodGroupScheduling},
			conds: map[string]cond{ConditionScheduled: {metav1.ConditionTrue, ReasonQuorumScheduled}},
		},
		{
			name: "a quorum running is Running",
			pg:   pg(4),
			pods: repeat(4, "w", running),
			now:  t0,
			want: counts{Phase: upstream.PodGroupRunning, Running: 4},
			conds: map[string]cond{
				ConditionMembersCreated: {metav1.ConditionTrue, ReasonEnoughMembers},
				ConditionScheduled:      {metav1.ConditionTrue, ReasonQuorumScheduled},
			},
		},
		{
			name: "an elastic gang runs once minMember of its members run",
			pg:   pg(2),
			pods: concat(repeat(2, "a", running), repeat(2, "b", pending)),
			now:  t0,
			want: counts{Phase: upstream.PodGroupRunning, Running: 2},
		},
		{
			name: "members that succeeded still count toward a running quorum",
			pg:   pg(4).Phase(upstream.PodGroupRunning),
			pods: concat(repeat(2, "a", running), repeat(2, "b", succeeded)),
			now:  t0,
			want: counts{Phase: upstream.PodGroupRunning, Running: 2, Succeeded: 2},
		},
		{
			name: "every member succeeded",
			pg:   pg(4).Phase(upstream.PodGroupRunning),
			pods: repeat(4, "w", succeeded),
			now:  t0,
			want: counts{Phase: upstream.PodGroupFinished, Succeeded: 4},
		},
		{
			name: "a started gang whose remaining members all succeeded finished, even below minMember",
			pg:   pg(4).Phase(upstream.PodGroupRunning),
			pods: repeat(1, "master", succeeded),
			now:  t0,
			want: counts{Phase: upstream.PodGroupFinished, Succeeded: 1},
		},
		{
			name: "every member finished and one failed",
			pg:   pg(4).Phase(upstream.PodGroupRunning),
			pods: concat(repeat(3, "a", succeeded), repeat(1, "b", failed)),
			now:  t0,
			want: counts{Phase: upstream.PodGroupFailed, Succeeded: 3, Failed: 1},
		},
		{
			name: "a failed member leaves a running gang short of minMember",
			pg:   pg(4).Phase(upstream.PodGroupRunning),
			pods: concat(repeat(3, "a", running), repeat(1, "b", failed)),
			now:  t0,
			want: counts{Phase: upstream.PodGroupFailed, Running: 3, Failed: 1},
		},
		{
			name: "a replacement for the failed member: the gang runs on below minMember",
			pg:   pg(4).Phase(upstream.PodGroupFailed),
			pods: concat(repeat(3, "a", running), repeat(1, "b", failed), repeat(1, "c", pending)),
			now:  t0,
			want: counts{Phase: upstream.PodGroupRunning, Running: 3, Failed: 1},
		},
		{
			name: "a finished gang whose pods were cleaned up stays finished",
			pg:   pg(4).Phase(upstream.PodGroupFinished),
			now:  t0,
			want: counts{Phase: upstream.PodGroupFinished},
		},
		{
			name: "a running gang whose members are all being deleted no longer runs",
			pg:   pg(2).Phase(upstream.PodGroupRunning),
			pods: []*st.PodWrapper{running(member("a")).Terminating(), running(member("b")).Terminating()},
			now:  t0,
			want: counts{Phase: upstream.PodGroupPending, Running: 2},
		},
		{
			name: "a finished gang whose members are being cleaned up stays finished",
			pg:   pg(2).Phase(upstream.PodGroupFinished),
			pods: []*st.PodWrapper{succeeded(member("a")).Terminating(), succeeded(member("b")).Terminating()},
			now:  t0,
			want: counts{Phase: upstream.PodGroupFinished, Succeeded: 2},
		},
		{
			name: "a failed gang whose failed member is cleaned up first stays failed",
			pg:   pg(4).Phase(upstream.PodGroupFailed),
			pods: concat(repeat(3, "a", succeeded), []*st.PodWrapper{failed(member("b")).Terminating()}),
			now:  t0,
			want: counts{Phase: upstream.PodGroupFailed, Succeeded: 3, Failed: 1},
		},
		{
			name: "members being deleted are counted by phase but are not members any more",
			pg:   pg(2),
			pods: []*st.PodWrapper{pending(member("a")), running(member("b")).Terminating()},
			now:  t0,
			want: counts{Phase: upstream.PodGroupPending, Running: 1},
			conds: map[string]cond{
				ConditionMembersCreated: {metav1.ConditionFalse, ReasonWaitingForMembers},
			},
			notes:   map[string]string{ConditionMembersCreated: "1/2 present"},
			recheck: grace,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pg := extended(tc.pg.Obj())
			got := computeStatusAt(pg, pods(tc.pods...), nil, tc.now, grace)
			s := got.status
			if diff := cmp.Diff(tc.want, counts{Phase: s.Phase, Running: s.Running, Succeeded: s.Succeeded, Failed: s.Failed}); diff != "" {
				t.Errorf("phase and counts (-want,+got):\n%s", diff)
			}
			if s.ObservedGeneration != 3 {
				t.Errorf("observedGeneration = %d, want the PodGroup's generation 3", s.ObservedGeneration)
			}
			for condType, want := range tc.conds {
				c := meta.FindStatusCondition(s.Conditions, condType)
				if c == nil {
					t.Errorf("no %s condition in %+v", condType, s.Conditions)
					continue
				}
				if diff := cmp.Diff(want, cond{Status: c.Status, Reason: c.Reason}); diff != "" {
					t.Errorf("condition %s (-want,+got):\n%s\nmessage: %s", condType, diff, c.Message)
				}
				if c.ObservedGeneration != 3 {
					t.Errorf("condition %s has observedGeneration %d, want 3", condType, c.ObservedGeneration)
				}
			}
			for condType, note := range tc.notes {
				if c := meta.FindStatusCondition(s.Conditions, condType); c == nil || !strings.Contains(c.Message, note) {
					t.Errorf("condition %s = %+v; want a message containing %q", condType, c, note)
				}
			}
			if got.recheckAfter != tc.recheck {
				t.Errorf("recheckAfter = %s, want %s", got.recheckAfter, tc.recheck)
			}
		})
	}
}

// scheduleStartTime is set when the gang first leaves Pending and is kept
// after that; a condition's lastTransitionTime moves only when its status
// does.
func TestComputeStatusKeepsTimes(t *testing.T) {
	pg := extended(gangtest.MakePodGroup("train", testNS).MinMember(2).Obj())

	first := computeStatusAt(pg, pods(repeat(2, "w", pending)...), nil, t0, grace).status
	if !first.ScheduleStartTime.Time.Equal(t0) {
		t.Fatalf("scheduleStartTime = %v, want %v", first.ScheduleStartTime, t0)
	}
	pg.Status = first

	later := t0.Add(time.Minute)
	second := computeStatusAt(pg, pods(repeat(2, "w", bound)...), nil, later, grace).status
	if !second.ScheduleStartTime.Time.Equal(t0) {
		t.Errorf("scheduleStartTime moved to %v; want it kept at %v", second.ScheduleStartTime, t0)
	}
	created := meta.FindStatusCondition(second.Conditions, ConditionMembersCreated)
	if created == nil || !created.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("MembersCreated = %+v; want it True since %v", created, t0)
	}
	scheduled := meta.FindStatusCondition(second.Conditions, ConditionScheduled)
	if scheduled == nil || scheduled.Status != metav1.ConditionTrue || !scheduled.LastTransitionTime.Time.Equal(later) {
		t.Errorf("Scheduled = %+v; want it True since %v", scheduled, later)
	}
}

// A condition kept as it was still records the generation it was checked
// against: deleting a PodGroup that has finalizers bumps its generation
// after it finished.
func TestComputeStatusKeptConditionsFollowTheGeneration(t *testing.T) {
	pg := extended(gangtest.MakePodGroup("train", testNS).MinMember(2).Generation(1).Obj())
	pg.Status = computeStatusAt(pg, pods(repeat(2, "w", running)...), nil, t0, grace).status
	pg.Status = computeStatusAt(pg, pods(repeat(2, "w", succeeded)...), nil, t0, grace).status
	pg.Generation = 2
	got := computeStatusAt(pg, pods(repeat(2, "w", succeeded)...), nil, t0.Add(time.Minute), grace).status
	for _, condType := range []string{ConditionMembersCreated, ConditionScheduled} {
		c := meta.FindStatusCondition(got.Conditions, condType)
		if c == nil || c.ObservedGeneration != 2 || !c.LastTransitionTime.Time.Equal(t0) {
			t.Errorf("condition %s = %+v; want it kept from %v, observed at generation 2", condType, c, t0)
		}
	}
}

// Conditions of types the controller does not own survive its updates.
func TestComputeStatusKeepsOtherConditions(t *testing.T) {
	pg := extended(gangtest.MakePodGroup("train", testNS).MinMember(1).Obj())
	other := metav1.Condition{Type: "example.com/Audited", Status: metav1.ConditionTrue, Reason: "Audited", LastTransitionTime: metav1.NewTime(t0)}
	pg.Status.Conditions = []metav1.Condition{other}
	got := computeStatusAt(pg, pods(running(member("w"))), nil, t0.Add(time.Hour), grace).status
	if c := meta.FindStatusCondition(got.Conditions, other.Type); c == nil || *c != other {
		t.Errorf("condition %s = %+v; want it unchanged: %+v", other.Type, c, other)
	}
}

func TestComputeStatusBelowMinMember(t *testing.T) {
	// ran is a gang of 4 whose last status says it was scheduled.
	ran := func() *v1alpha1.PodGroup {
		pg := extended(gangtest.MakePodGroup("train", testNS).MinMember(4).Generation(3).Obj())
		pg.Status.Phase = upstream.PodGroupRunning
		pg.Status.Conditions = []metav1.Condition{{Type: ConditionScheduled, Status: metav1.ConditionTrue, Reason: ReasonQuorumScheduled}}
		return pg
	}
	lostW3 := []lostMember{{name: "w-3", node: "n7", how: "evicted from node n7", at: t0}}
	tests := []struct {
		name     string
		pg       *v1alpha1.PodGroup
		pods     []*st.PodWrapper
		lost     []lostMember
		want     *cond
		wantNote string
	}{
		{
			name: "a gang that never ran has no such condition",
			pg:   extended(gangtest.MakePodGroup("train", testNS).MinMember(4).Obj()),
			pods: repeat(3, "w", running),
		},
		{
			name:     "a running gang with its quorum",
			pg:       ran(),
			pods:     repeat(4, "w", running),
			want:     &cond{metav1.ConditionFalse, ReasonAtLeastMinMember},
			wantNote: "4 of minMember 4 placed",
		},
		{
			name:     "a member lost and not replaced: named",
			pg:       ran(),
			pods:     repeat(3, "w", running),
			lost:     lostW3,
			want:     &cond{metav1.ConditionTrue, ReasonMembersLost},
			wantNote: "3 of minMember 4 placed (3 bound, 0 succeeded); 0 replacement(s) waiting for a node; missing: w-3 (evicted from node n7)",
		},
		{
			name:     "the replacement waits",
			pg:       ran(),
			pods:     concat(repeat(3, "w", running), []*st.PodWrapper{pending(member("w-3b"))}),
			lost:     lostW3,
			want:     &cond{metav1.ConditionTrue, ReasonReplacementsPending},
			wantNote: "1 replacement(s) waiting for a node; missing: w-3 (evicted from node n7)",
		},
		{
			name:     "a replacement of the same name brings it back",
			pg:       ran(),
			pods:     concat(repeat(3, "w", running), []*st.PodWrapper{running(member("w-3"))}),
			lost:     lostW3,
			want:     &cond{metav1.ConditionFalse, ReasonAtLeastMinMember},
			wantNote: "4 of minMember 4 placed",
		},
		{
			name:     "succeeded members count; failed ones are named; unknown ones are counted",
			pg:       ran(),
			pods:     concat(repeat(1, "s", succeeded), repeat(1, "r", running), []*st.PodWrapper{failed(member("f-0"))}),
			want:     &cond{metav1.ConditionTrue, ReasonMembersLost},
			wantNote: "2 of minMember 4 placed (1 bound, 1 succeeded); 0 replacement(s) waiting for a node; missing: f-0 (failed), 1 more whose names this controller did not see",
		},
		{
			name:     "nothing holds a node any more",
			pg:       ran(),
			pods:     repeat(4, "w", succeeded),
			want:     &cond{metav1.ConditionFalse, ReasonNotRunning},
			wantNote: "no member holds a node (4 succeeded, 0 failed)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := computeStatusAt(tc.pg, pods(tc.pods...), tc.lost, t0, grace).status
			c := meta.FindStatusCondition(got.Conditions, ConditionBelowMinMember)
			if tc.want == nil {
				if c != nil {
					t.Fatalf("unexpected condition %+v", c)
				}
				return
			}
			if c == nil {
				t.Fatalf("no %s condition in %+v", ConditionBelowMinMember, got.Conditions)
			}
			if diff := cmp.Diff(*tc.want, cond{Status: c.Status, Reason: c.Reason}); diff != "" {
				t.Errorf("condition (-want,+got):\n%s\nmessage: %s", diff, c.Message)
			}
			if !strings.Contains(c.Message, tc.wantNote) {
				t.Errorf("message %q does not contain %q", c.Message, tc.wantNote)
			}
		})
	}
}
