package gang

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

func pod(name string) *st.PodWrapper { return st.MakePod().Namespace("ns").Name(name) }

func TestCount(t *testing.T) {
	deleting := pod("d").Node("n1").Obj()
	deleting.DeletionTimestamp = &metav1.Time{}
	pods := []*v1.Pod{
		pod("w").Obj(),
		pod("b").Node("n1").Obj(),
		pod("r").Node("n1").Phase(v1.PodRunning).Obj(),
		pod("s").Node("n2").Phase(v1.PodSucceeded).Obj(),
		pod("f").Node("n2").Phase(v1.PodFailed).Obj(),
		deleting,
	}
	want := Census{Waiting: 1, Bound: 2, Succeeded: 1, Failed: 1, Deleting: 1}
	if diff := cmp.Diff(want, Count(pods)); diff != "" {
		t.Errorf("Count (-want,+got):\n%s", diff)
	}
}

func TestQuorumOf(t *testing.T) {
	tests := []struct {
		name      string
		minMember int32
		census    Census
		want      Quorum
	}{
		{name: "nothing yet", minMember: 4, census: Census{}, want: Quorum{Missing: 4, Absent: 4}},
		{name: "gathered, none placed", minMember: 4, census: Census{Waiting: 4}, want: Quorum{Gathered: true, Missing: 4}},
		{name: "reserved count as placed", minMember: 4, census: Census{Waiting: 1, Reserved: 3}, want: Quorum{Gathered: true, Missing: 1}},
		{name: "placed", minMember: 4, census: Census{Reserved: 1, Bound: 3}, want: Quorum{Gathered: true, Placed: true}},
		{name: "succeeded members count while the run goes on", minMember: 8, census: Census{Waiting: 1, Bound: 6, Succeeded: 1},
			want: Quorum{Gathered: true, Missing: 1}},
		{name: "a finished run's members do not count for the next", minMember: 3, census: Census{Waiting: 3, Succeeded: 3},
			want: Quorum{Gathered: true, Missing: 3}},
		{name: "failed and deleting members do not count", minMember: 4, census: Census{Bound: 2, Failed: 1, Deleting: 1},
			want: Quorum{Missing: 2, Absent: 2}},
		{name: "elastic: more than minMember", minMember: 2, census: Census{Waiting: 3, Bound: 2},
			want: Quorum{Gathered: true, Placed: true, Bound: true}},
		{name: "bound: reserved members do not count, succeeded ones do", minMember: 3, census: Census{Reserved: 1, Bound: 1, Succeeded: 1},
			want: Quorum{Gathered: true, Placed: true}},
		{name: "bound with a succeeded member", minMember: 3, census: Census{Reserved: 1, Bound: 2, Succeeded: 1},
			want: Quorum{Gathered: true, Placed: true, Bound: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, QuorumOf(tt.minMember, tt.census)); diff != "" {
				t.Errorf("QuorumOf (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestSurplusOf(t *testing.T) {
	tests := []struct {
		name      string
		minMember int32
		census    Census
		want      int32
	}{
		{name: "at quorum", minMember: 4, census: Census{Bound: 4}, want: 0},
		{name: "below quorum", minMember: 4, census: Census{Bound: 2, Waiting: 2}, want: 0},
		{name: "elastic: the members placed above minMember", minMember: 2, census: Census{Bound: 3, Reserved: 1}, want: 2},
		{name: "waiting, failed and deleting members are no surplus", minMember: 2, census: Census{Bound: 2, Waiting: 3, Failed: 1, Deleting: 1}, want: 0},
		{name: "succeeded members count while the run goes on", minMember: 2, census: Census{Bound: 2, Succeeded: 1}, want: 1},
		{name: "a finished run's members do not", minMember: 2, census: Census{Reserved: 3, Succeeded: 2}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SurplusOf(tt.minMember, tt.census); got != tt.want {
				t.Errorf("SurplusOf(%d, %+v) = %d, want %d", tt.minMember, tt.census, got, tt.want)
			}
		})
	}
}

func TestCounted(t *testing.T) {
	tests := []struct {
		name                    string
		minMember               int32
		census                  Census
		wantPresent, wantPlaced int32
	}{
		{name: "nothing yet", minMember: 4, census: Census{}, wantPresent: 0, wantPlaced: 0},
		{name: "some present, some placed", minMember: 4, census: Census{Waiting: 1, Reserved: 1, Bound: 1}, wantPresent: 3, wantPlaced: 2},
		{name: "a finished run's members do not show", minMember: 4, census: Census{Waiting: 2, Succeeded: 3}, wantPresent: 2, wantPlaced: 0},
		{name: "at most minMember", minMember: 2, census: Census{Waiting: 3, Bound: 4}, wantPresent: 2, wantPlaced: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			present, placed := QuorumOf(tt.minMember, tt.census).Counted(tt.minMember)
			if present != tt.wantPresent || placed != tt.wantPlaced {
				t.Errorf("Counted(%d) of %+v = %d present, %d placed; want %d, %d", tt.minMember, tt.census, present, placed, tt.wantPresent, tt.wantPlaced)
			}
		})
	}
}

func TestHoldsNode(t *testing.T) {
	tests := []struct {
		name   string
		census Census
		want   bool
	}{
		{name: "nothing yet", census: Census{Waiting: 2}, want: false},
		{name: "a bound member", census: Census{Bound: 1, Waiting: 1}, want: true},
		{name: "a member only reserved by the scheduler", census: Census{Reserved: 1, Succeeded: 2}, want: true},
		{name: "a finished run", census: Census{Succeeded: 2, Failed: 1, Deleting: 1, Waiting: 1}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.census.HoldsNode(); got != tt.want {
				t.Errorf("%+v.HoldsNode() = %v, want %v", tt.census, got, tt.want)
			}
		})
	}
	// The run is live, yet a reserved member does not bring back the
	// succeeded members of the run the API shows over.
	c := Census{Reserved: 1, Succeeded: 2}
	if diff := cmp.Diff(Quorum{Gathered: false, Missing: 2, Absent: 2}, QuorumOf(3, c)); !c.HoldsNode() || diff != "" {
		t.Errorf("QuorumOf(3, %+v) counts the old run's members (-want,+got):\n%s", c, diff)
	}
}

func TestReserve(t *testing.T) {
	c := Census{Waiting: 2, Bound: 1}
	c.Reserve(3)
	if diff := cmp.Diff(Census{Reserved: 2, Bound: 1}, c); diff != "" {
		t.Errorf("Reserve takes at most the waiting members (-want,+got):\n%s", diff)
	}
}
