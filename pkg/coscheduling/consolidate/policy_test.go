package consolidate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

func testPolicy(c *testingclock.FakeClock) *Policy {
	return NewPolicy(config.ConsolidationArgs{Enabled: true, WaitingFor: 2 * time.Minute, MaxEvictionsPerHour: 3,
		Cooldown: 30 * time.Minute, MinRunTime: 10 * time.Minute, MovablePriorityClasses: []string{"batch"}}, c)
}

func TestPolicyBudgetSlidesOverTheHour(t *testing.T) {
	c := testingclock.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	p := testPolicy(c)
	require.Equal(t, 3, p.Budget())
	p.Moved([]gang.Key{{Namespace: "ns", Name: "a"}, {Namespace: "ns", Name: "b"}})
	require.Equal(t, 1, p.Budget())
	c.Step(40 * time.Minute)
	p.Moved([]gang.Key{{Namespace: "ns", Name: "c"}})
	require.Equal(t, 0, p.Budget(), "three gangs moved within the hour")
	c.Step(20 * time.Minute)
	require.Equal(t, 2, p.Budget(), "the first two moves left the window")
	c.Step(40 * time.Minute)
	require.Equal(t, 3, p.Budget())
}

func TestPolicySettled(t *testing.T) {
	c := testingclock.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	p := testPolicy(c)
	key := gang.Key{Namespace: "ns", Name: "a"}
	require.Contains(t, p.Settled(key, c.Now().Add(-9*time.Minute)), "minRunTime")
	require.Contains(t, p.Settled(key, time.Time{}), "minRunTime", "a gang that has not started is not moved")
	require.Empty(t, p.Settled(key, c.Now().Add(-10*time.Minute)))
	p.Moved([]gang.Key{key})
	c.Step(29 * time.Minute)
	require.Contains(t, p.Settled(key, c.Now().Add(-time.Hour)), "cooldown")
	require.Empty(t, p.Settled(gang.Key{Namespace: "ns", Name: "b"}, c.Now().Add(-time.Hour)), "the cooldown is per gang")
	c.Step(time.Minute)
	require.Empty(t, p.Settled(key, c.Now().Add(-time.Hour)))
}

func TestPolicyUnwaited(t *testing.T) {
	c := testingclock.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	p := testPolicy(c)
	require.Equal(t, time.Minute, p.Unwaited(c.Now().Add(-time.Minute)))
	require.LessOrEqual(t, p.Unwaited(c.Now().Add(-2*time.Minute)), time.Duration(0))
}

func TestPolicyMovable(t *testing.T) {
	pod := func(class string) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{PriorityClassName: class}}
	}
	tests := []struct {
		name        string
		annotations map[string]string
		specClass   string
		pods        []*v1.Pod
		want        bool
		wantErr     string
	}{
		{name: "annotated", annotations: map[string]string{scheduling.AnnotationMovable: "true"}, pods: []*v1.Pod{pod("")}, want: true},
		{name: "not annotated, no class", pods: []*v1.Pod{pod("")}},
		{name: "every pod in a movable class", pods: []*v1.Pod{pod("batch"), pod("batch")}, want: true},
		{name: "one pod outside the class", pods: []*v1.Pod{pod("batch"), pod("prod")}},
		{name: "the PodGroup's own class wins", specClass: "prod", pods: []*v1.Pod{pod("batch")}},
		{name: "the PodGroup's own class is movable", specClass: "batch", pods: []*v1.Pod{pod("")}, want: true},
		{name: "false is the absent annotation: the class still makes the gang movable", annotations: map[string]string{scheduling.AnnotationMovable: "false"},
			pods: []*v1.Pod{pod("batch")}, want: true},
		{name: "malformed", annotations: map[string]string{scheduling.AnnotationMovable: "yes"}, pods: []*v1.Pod{pod("batch")},
			wantErr: `annotation gpu-gang.x-k8s.io/movable="yes" is not "true" or "false"`},
	}
	p := testPolicy(testingclock.NewFakeClock(time.Now()))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.Movable(&gang.Spec{Annotations: tt.annotations, PriorityClassName: tt.specClass}, tt.pods)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}
