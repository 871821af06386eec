package coscheduling

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

func TestPreEnqueue(t *testing.T) {
	pg := gangtest.MakePodGroup("job", testNS).MinMember(3).Obj()
	tests := []struct {
		name      string
		pod       *v1.Pod
		pods      []*v1.Pod
		pgs       []*v1alpha1.PodGroup
		wantCode  fwk.Code
		wantMsg   string
		wantEvent string // "Reason substring"
	}{
		{
			name:     "pod without a group is not held",
			pod:      st.MakePod().Namespace(testNS).Name("plain").SchedulerName(testScheduler).Obj(),
			wantCode: fwk.Success,
		},
		{
			name:      "missing PodGroup holds the pod with an Event on it",
			pod:       member("ghost", "ghost-0", "8"),
			pods:      []*v1.Pod{member("ghost", "ghost-0", "8")},
			wantCode:  fwk.UnschedulableAndUnresolvable,
			wantMsg:   "PodGroup team-a/ghost not found",
			wantEvent: ReasonPodGroupNotFound + " PodGroup team-a/ghost does not exist: create it",
		},
		{
			name:      "minMember below 1 is invalid",
			pod:       member("zero", "zero-0", "8"),
			pods:      []*v1.Pod{member("zero", "zero-0", "8")},
			pgs:       []*v1alpha1.PodGroup{gangtest.MakePodGroup("zero", testNS).MinMember(0).Obj()},
			wantCode:  fwk.UnschedulableAndUnresolvable,
			wantMsg:   "minMember 0",
			wantEvent: ReasonInvalidPodGroup + " spec.minMember is 0",
		},
		{
			name:      "fewer members than minMember wait",
			pod:       member("job", "job-0", "8"),
			pods:      members("job", 2, "8"),
			pgs:       []*v1alpha1.PodGroup{pg},
			wantCode:  fwk.UnschedulableAndUnresolvable,
			wantMsg:   "2/3 present",
			wantEvent: ReasonWaitingForMembers + " waiting for members: 2/3 present",
		},
		{
			// A job restarted under its PodGroup: the last run's members
			// succeeded and none is bound, so they count neither towards
			// the quorum nor in what the message says is present.
			name:      "succeeded members of a run that is over are not present",
			pod:       member("job", "job-3", "8"),
			pods:      append(finished(members("job", 2, "8")...), member("job", "job-3", "8")),
			pgs:       []*v1alpha1.PodGroup{pg},
			wantCode:  fwk.UnschedulableAndUnresolvable,
			wantMsg:   "1/3 present",
			wantEvent: ReasonWaitingForMembers + " waiting for members: 1/3 present",
		},
		{
			name: "members in another namespace do not count",
			pod:  member("job", "job-0", "8"),
			pods: append(members("job", 2, "8"),
				st.MakePod().Namespace("team-b").Name("job-9").UID("team-b/job-9").SchedulerName(testScheduler).Label(scheduling.PodGroupLabel, "job").Obj()),
			pgs:      []*v1alpha1.PodGroup{pg},
			wantCode: fwk.UnschedulableAndUnresolvable,
			wantMsg:  "2/3 present",
		},
		{
			name:     "quorum of members releases the pod",
			pod:      member("job", "job-0", "8"),
			pods:     members("job", 3, "8"),
			pgs:      []*v1alpha1.PodGroup{pg},
			wantCode: fwk.Success,
		},
		{
			name: "members naming different schedulers are held with an Event",
			pod:  member("job", "job-0", "8"),
			pods: append(members("job", 2, "8"),
				st.MakePod().Namespace(testNS).Name("job-2").UID("team-a/job-2").SchedulerName("default-scheduler").Label(scheduling.PodGroupLabel, "job").Obj()),
			pgs:       []*v1alpha1.PodGroup{pg},
			wantCode:  fwk.UnschedulableAndUnresolvable,
			wantMsg:   "different schedulers [default-scheduler gpu-gang]",
			wantEvent: ReasonMixedSchedulerNames + " members name different schedulers [default-scheduler gpu-gang]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newTestEnv(t, gpuNodes(4), tt.pods, tt.pgs)
			got := env.preEnqueue(tt.pod)
			require.Equal(t, tt.wantCode, got.Code(), "status: %v", got)
			if tt.wantMsg != "" {
				require.Contains(t, got.Message(), tt.wantMsg)
			}
			evs := env.recorded()
			if tt.wantEvent != "" {
				reason, note, _ := strings.Cut(tt.wantEvent, " ")
				require.True(t, hasEvent(evs, reason, note), "want event %q, got %q", tt.wantEvent, evs)
			}
			// The same problem seen again is not recorded again.
			env.preEnqueue(tt.pod)
			require.Empty(t, env.recorded(), "a repeated PreEnqueue recorded the same Event again")
		})
	}
}

// finished marks pods as succeeded, as members of a finished run.
func finished(pods ...*v1.Pod) []*v1.Pod {
	for _, p := range pods {
		p.Status.Phase = v1.PodSucceeded
	}
	return pods
}

func TestLess(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	old := gangtest.MakePodGroup("old", testNS).Created(t0).Obj()
	young := gangtest.MakePodGroup("young", testNS).Created(t0.Add(time.Minute)).Obj()
	twin := gangtest.MakePodGroup("twin", testNS).Created(t0.Add(time.Minute)).Obj()
	env := newTestEnv(t, nil, nil, []*v1alpha1.PodGroup{old, young, twin})

	queued := func(p *v1.Pod, ts time.Time) fwk.QueuedEntityInfo {
		pi, err := framework.NewPodInfo(p)
		require.NoError(t, err)
		return &framework.QueuedPodInfo{PodInfo: pi, QueueingParams: framework.QueueingParams{Timestamp: ts}}
	}
	withPrio := func(p *v1.Pod, prio int32) *v1.Pod { p.Spec.Priority = &prio; return p }
	ranked := func(group, name string, rank int) *v1.Pod {
		p := member(group, name, "8")
		p.Labels[scheduling.RankLabel] = fmt.Sprint(rank)
		return p
	}
	tests := []struct {
		name string
		a, b fwk.QueuedEntityInfo
		want bool
	}{
		{"higher priority first", queued(withPrio(member("young", "y", "8"), 10), t0), queued(member("old", "o", "8"), t0), true},
		{"older gang first, whatever the queue time", queued(member("old", "o", "8"), t0.Add(time.Hour)), queued(member("young", "y", "8"), t0), true},
		{"same creation time: gang key decides", queued(member("twin", "t", "8"), t0.Add(time.Hour)), queued(member("young", "y", "8"), t0), true},
		{"same gang: rank decides", queued(ranked("old", "b", 0), t0.Add(time.Hour)), queued(ranked("old", "a", 1), t0), true},
		{"same gang and rank: queue time decides", queued(member("old", "o", "8"), t0), queued(member("old", "o", "8"), t0.Add(time.Second)), true},
		{"a pod outside gangs is dated by its creation", queued(st.MakePod().Namespace(testNS).Name("plain").CreationTimestamp(metav1.NewTime(t0.Add(30*time.Second))).Obj(), t0.Add(time.Hour)),
			queued(member("young", "y", "8"), t0), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, env.pl.Less(tt.a, tt.b)); diff != "" {
				t.Errorf("Less(a, b) (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(!tt.want, env.pl.Less(tt.b, tt.a)); diff != "" {
				t.Errorf("Less(b, a) (-want,+got):\n%s", diff)
			}
		})
	}
}
