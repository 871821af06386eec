package gang

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

func TestStartedAt(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	started := func(name string, after time.Duration) *v1.Pod {
		p := st.MakePod().Name(name).Obj()
		p.Status.StartTime = &metav1.Time{Time: t0.Add(after)}
		return p
	}
	// Listed out of start order, with one member not started.
	pods := []*v1.Pod{started("c", 2*time.Minute), st.MakePod().Name("waiting").Obj(), started("a", 0), started("b", time.Minute)}
	for _, tc := range []struct {
		name      string
		minMember int32
		want      time.Time
	}{
		{"quorum of 1: the first start", 1, t0},
		{"quorum of 2: the second start", 2, t0.Add(time.Minute)},
		{"quorum of 3: the member that completed it", 3, t0.Add(2 * time.Minute)},
		{"quorum of 4: not started, one member never did", 4, time.Time{}},
		{"invalid quorum 0: the first start", 0, t0},
		{"invalid negative quorum: the first start", -2, t0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := StartedAt(pods, tc.minMember); !got.Equal(tc.want) {
				t.Errorf("StartedAt(minMember %d) = %v, want %v", tc.minMember, got, tc.want)
			}
		})
	}
	if got := StartedAt(nil, 0); !got.IsZero() {
		t.Errorf("StartedAt of no pods = %v, want zero", got)
	}
}
