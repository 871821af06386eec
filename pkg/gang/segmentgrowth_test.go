package gang

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// indexed builds the members of a 12-rank job with these replica indices,
// in rank order.
func indexed(ranks ...int) []*v1.Pod {
	out := make([]*v1.Pod, len(ranks))
	for i, r := range ranks {
		out[i] = pod(fmt.Sprintf("job-%d", r)).Label(scheduling.KubeflowReplicaIndexLabel, strconv.Itoa(r)).Obj()
	}
	return out
}

func ranks(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// places spells where members are: p pending, h held, r reserved, b bound.
func places(s string) []Where {
	out := make([]Where, len(s))
	for i, c := range s {
		out[i] = map[rune]Where{'p': Pending, 'h': Held, 'r': Reserved, 'b': Bound}[c]
	}
	return out
}

// fourPerClique cuts a job into segments of 4 ranks, each in one clique.
var fourPerClique = Segments{Size: 4, Policy: placement.Policy{Level: scheduling.LabelGPUClique, Required: true}}

func TestSegmentsStart(t *testing.T) {
	tests := []struct {
		name    string
		members []*v1.Pod
		where   string
		missing int32
		want    []int
		wantOK  bool
	}{
		{name: "every member present: the first two segments", members: indexed(ranks(12)...), where: "pppppppppppp", missing: 8,
			want: []int{0, 1, 2, 3, 4, 5, 6, 7}, wantOK: true},
		// Ranks 3, 6 and 7 are not created yet: of segments 0 and 1 only
		// parts exist, and the one whole segment is not quorum.
		{name: "eight members present, one whole segment: waits", members: indexed(0, 1, 2, 4, 5, 8, 9, 10, 11), where: "ppppppppp", missing: 8},
		{name: "whole segments by rank, not by order among those present", members: indexed(0, 1, 2, 3, 5, 8, 9, 10, 11), where: "ppppppppp", missing: 8,
			want: []int{0, 1, 2, 3, 5, 6, 7, 8}, wantOK: true},
		{name: "a held member keeps its segment out", members: indexed(ranks(12)...), where: "pppphppppppp", missing: 8,
			want: []int{0, 1, 2, 3, 8, 9, 10, 11}, wantOK: true},
		{name: "a segment placed already counts; the next whole one is planned", members: indexed(ranks(12)...), where: "rrrrpppppppp", missing: 4,
			want: []int{4, 5, 6, 7}, wantOK: true},
		{name: "quorum placed: nothing to plan", members: indexed(ranks(12)...), where: "bbbbbbbbpppp", missing: 0, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := fourPerClique.Start(tt.members, places(tt.where), tt.missing)
			require.Equal(t, tt.wantOK, ok)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Start (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestSegmentsJoinAndReady(t *testing.T) {
	tests := []struct {
		name        string
		members     []*v1.Pod
		where       string
		i           int
		want        []int
		wantPresent int
		wantOK      bool
	}{
		{name: "a late segment joins whole", members: indexed(ranks(12)...), where: "bbbbbbbbpppp", i: 9,
			want: []int{8, 9, 10, 11}, wantPresent: 4, wantOK: true},
		{name: "a late segment waits for its last member", members: indexed(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11), where: "bbbbbbbbppp", i: 8,
			wantPresent: 3},
		{name: "or for a held one", members: indexed(ranks(12)...), where: "bbbbbbbbpphp", i: 8, wantPresent: 3},
		{name: "beside its reserved members, the rest of the segment", members: indexed(ranks(12)...), where: "bbbbbbbbrrpp", i: 11,
			want: []int{10, 11}, wantPresent: 4, wantOK: true},
		{name: "a replacement in a started segment plans alone", members: indexed(ranks(12)...), where: "bbbbbbpbpppp", i: 6,
			want: []int{6}, wantPresent: 4, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, present, ok := fourPerClique.Join(tt.members, places(tt.where), tt.i)
			require.Equal(t, tt.wantOK, ok)
			require.Equal(t, tt.wantPresent, present)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Join (-want,+got):\n%s", diff)
			}
		})
	}

	for _, tt := range []struct {
		name  string
		where string
		i     int
		want  bool
	}{
		{"a joining segment's member waits for its siblings", "bbbbbbbbrrrp", 8, false},
		{"it binds once every member holds a node", "bbbbbbbbrrrr", 8, true},
		{"a replacement beside bound siblings binds at once", "bbbbbbrbpppp", 6, true},
	} {
		t.Run("ready: "+tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, fourPerClique.Ready(indexed(ranks(12)...), places(tt.where), tt.i))
		})
	}
}

// A launcher outside the segments is planned with the first segments,
// joins and binds alone, and is placed in a subgroup of its own under the
// gang's policy.
func TestSegmentsLauncherApart(t *testing.T) {
	leaf := placement.Policy{Level: scheduling.LabelLeaf, Required: true}
	job := mpiJob(8, nil, sliced("4", leaf.Level))
	seg, err := SegmentsOf(&Spec{MinMember: 9}, job)
	require.NoError(t, err)

	pick, ok := seg.Start(job, places("ppppppppp"), 9)
	require.True(t, ok)
	require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8}, pick, "the launcher and both segments")
	_, ok = seg.Start(job, places("hpppppppp"), 9)
	require.False(t, ok, "a held launcher keeps the gang from quorum")
	pick, ok = seg.Start(job, places("pppppppph"), 5)
	require.True(t, ok)
	require.Equal(t, []int{0, 1, 2, 3, 4}, pick, "elastic: the launcher and the first whole segment")

	pick, present, ok := seg.Join(job, places("pbbbbbbbb"), 0)
	require.True(t, ok)
	require.Equal(t, []int{0}, pick, "a replaced launcher joins alone")
	require.Equal(t, 1, present)
	require.True(t, seg.Ready(job, places("rbbbbbbbb"), 0))
	require.False(t, seg.Ready(job, places("bbbbbrrrp"), 5), "a worker's segment still waits for its members")

	slots := make([]Slot, len(job))
	for i := range slots {
		slots[i] = Slot{Member: i, Anchor: -1}
	}
	spine := placement.Policy{Level: scheduling.LabelSpine, Required: true}
	got := seg.Hierarchy("ns/job", spine, job, slots)
	want := &placement.Subgroup{Name: "ns/job", Policy: spine, Children: []placement.Subgroup{
		{Name: "ns/job segment 0 (ranks 0-3)", Policy: leaf, Members: []int{1, 2, 3, 4}},
		{Name: "ns/job segment 1 (ranks 4-7)", Policy: leaf, Members: []int{5, 6, 7, 8}},
		{Name: "ns/job outside segments", Members: []int{0}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Hierarchy (-want,+got):\n%s", diff)
	}
	req := &placement.Request{Policy: spine, Hierarchy: got}
	for i := range job {
		req.Members = append(req.Members, placement.Member{Name: fmt.Sprint(i)})
	}
	require.NoError(t, req.ValidateHierarchy())
}
