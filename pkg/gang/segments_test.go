package gang

import (
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

func TestSegmentsOf(t *testing.T) {
	clique, leaf := scheduling.LabelGPUClique, scheduling.LabelLeaf
	kueue := func(kv ...string) *v1.Pod {
		p := pod("w-0")
		for i := 0; i < len(kv); i += 2 {
			p = p.Annotation(kv[i], kv[i+1])
		}
		return p.Obj()
	}
	tests := []struct {
		name    string
		gang    map[string]string
		members []*v1.Pod
		want    Segments // Size and Policy only
		wantErr string
	}{
		{name: "none"},
		{name: "the PodGroup's, required",
			gang: map[string]string{scheduling.AnnotationSegmentSize: "16", scheduling.AnnotationSegmentTopologyRequired: clique},
			want: Segments{Size: 16, Policy: placement.Policy{Level: clique, Required: true}}},
		{name: "the PodGroup's, preferred",
			gang: map[string]string{scheduling.AnnotationSegmentSize: "4", scheduling.AnnotationSegmentTopologyPreferred: leaf},
			want: Segments{Size: 4, Policy: placement.Policy{Level: leaf}}},
		{name: "required wins over preferred",
			gang: map[string]string{scheduling.AnnotationSegmentSize: "4", scheduling.AnnotationSegmentTopologyPreferred: leaf, scheduling.AnnotationSegmentTopologyRequired: clique},
			want: Segments{Size: 4, Policy: placement.Policy{Level: clique, Required: true}}},
		{name: "Kueue's slices on the members",
			members: []*v1.Pod{kueue(scheduling.KueueSliceSizeAnnotation, "8", scheduling.KueueSliceRequiredTopologyAnnotation, clique)},
			want:    Segments{Size: 8, Policy: placement.Policy{Level: clique, Required: true}}},
		{name: "the PodGroup's win over Kueue's",
			gang:    map[string]string{scheduling.AnnotationSegmentSize: "2", scheduling.AnnotationSegmentTopologyRequired: leaf},
			members: []*v1.Pod{kueue(scheduling.KueueSliceSizeAnnotation, "8", scheduling.KueueSliceRequiredTopologyAnnotation, clique)},
			want:    Segments{Size: 2, Policy: placement.Policy{Level: leaf, Required: true}}},
		{name: "size without level", gang: map[string]string{scheduling.AnnotationSegmentSize: "4"},
			wantErr: "the PodGroup's annotation gpu-gang.x-k8s.io/segment-size is set without a segment level: set gpu-gang.x-k8s.io/segment-topology-required (or gpu-gang.x-k8s.io/segment-topology-preferred)"},
		{name: "level without size", gang: map[string]string{scheduling.AnnotationSegmentTopologyRequired: clique},
			wantErr: "gpu-gang.x-k8s.io/segment-topology-required is set without gpu-gang.x-k8s.io/segment-size: set it"},
		{name: "size zero", gang: map[string]string{scheduling.AnnotationSegmentSize: "0", scheduling.AnnotationSegmentTopologyRequired: clique},
			wantErr: `gpu-gang.x-k8s.io/segment-size is "0": set it to the number of consecutive ranks that share a domain, an integer of at least 1`},
		{name: "size not a number", gang: map[string]string{scheduling.AnnotationSegmentSize: "four", scheduling.AnnotationSegmentTopologyRequired: clique},
			wantErr: `segment-size is "four"`},
		{name: "Kueue's size without level", members: []*v1.Pod{kueue(scheduling.KueueSliceSizeAnnotation, "8")},
			wantErr: "the annotation of pod ns/w-0 (the first of the members it slices) kueue.x-k8s.io/podset-slice-size is set without a segment level: set kueue.x-k8s.io/podset-slice-required-topology"},
		{name: "Kueue's level without size", members: []*v1.Pod{kueue(scheduling.KueueSliceRequiredTopologyAnnotation, clique)},
			wantErr: "kueue.x-k8s.io/podset-slice-required-topology is set without kueue.x-k8s.io/podset-slice-size"},
		{name: "Kueue's negative size", members: []*v1.Pod{kueue(scheduling.KueueSliceSizeAnnotation, "-8", scheduling.KueueSliceRequiredTopologyAnnotation, clique)},
			wantErr: `kueue.x-k8s.io/podset-slice-size is "-8"`},
		// Kueue slices each PodSet on its own: the workers' annotations are
		// read though the launcher, first in rank order, has none.
		{name: "Kueue's slices on the workers, not the launcher", members: mpiJob(8, nil, sliced("4", leaf)),
			want: Segments{Size: 4, Policy: placement.Policy{Level: leaf, Required: true}}},
		{name: "Kueue's slices on the launcher only slice no worker", members: mpiJob(8, sliced("4", leaf), nil)},
		{name: "Kueue's slices on two roles", members: append(mpiJob(4, nil, sliced("2", leaf)),
			pod("ps-0").Label(scheduling.KubeflowReplicaTypeLabel, "ps").Label(scheduling.KubeflowReplicaIndexLabel, "0").
				Annotation(scheduling.KueueSliceSizeAnnotation, "1").Annotation(scheduling.KueueSliceRequiredTopologyAnnotation, clique).Obj()),
			wantErr: `Kueue's slice annotations slice more than one role of the gang (pod ns/ps-0 (replica type ps) has kueue.x-k8s.io/podset-slice-size="1" and ` +
				`kueue.x-k8s.io/podset-slice-required-topology="` + clique + `"; pod ns/worker-0 (replica type worker) has kueue.x-k8s.io/podset-slice-size="2"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SegmentsOf(&Spec{Annotations: tt.gang}, tt.members)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want.Size, got.Size)
			require.Equal(t, tt.want.Policy, got.Policy)
		})
	}
}

func TestSegmentsValidate(t *testing.T) {
	levels, _ := scheduling.Preset(scheduling.DefaultPreset)
	clique, leaf, spine := scheduling.LabelGPUClique, scheduling.LabelLeaf, scheduling.LabelSpine
	segs := func(k int, level string) Segments {
		s, err := SegmentsOf(&Spec{Annotations: map[string]string{
			scheduling.AnnotationSegmentSize: strconv.Itoa(k), scheduling.AnnotationSegmentTopologyRequired: level}}, nil)
		require.NoError(t, err)
		return s
	}
	tests := []struct {
		name               string
		seg                Segments
		gang               placement.Policy
		members, minMember int32
		wantErr            []string
	}{
		{name: "no segments", members: 7, minMember: 3},
		{name: "16 per clique in one spine", seg: segs(16, clique), gang: placement.Policy{Level: spine, Required: true}, members: 64, minMember: 64},
		{name: "the segment level may equal the gang's", seg: segs(4, leaf), gang: placement.Policy{Level: leaf}, members: 8, minMember: 8},
		{name: "one node per segment", seg: segs(2, scheduling.HostnameKey), gang: placement.Policy{Level: leaf}, members: 8, minMember: 8},
		{name: "a gang without a level takes any segment level", seg: segs(4, spine), members: 8, minMember: 8},
		{name: "elastic, whole segments", seg: segs(4, clique), members: 12, minMember: 8},
		{name: "unknown level", seg: segs(4, "example.com/rack"), members: 8, minMember: 8, wantErr: []string{
			`the PodGroup's annotation gpu-gang.x-k8s.io/segment-topology-required: unknown topology level "example.com/rack"; this scheduler knows ` + spine,
			"name a configured level's label key, or kubernetes.io/hostname for one node"}},
		{name: "looser than the gang", seg: segs(4, spine), gang: placement.Policy{Level: leaf, Required: true}, members: 8, minMember: 8, wantErr: []string{
			"segment-topology-required is " + spine + ", looser than the gang's level " + leaf,
			"set the segment level to " + leaf + " or a tighter one, or loosen the gang's"}},
		{name: "does not divide", seg: segs(16, clique), members: 40, minMember: 40, wantErr: []string{
			"segment-size is 16, which does not divide the gang's 40 members: set a size that divides 40, such as 10 or 20, or make the member count a multiple of 16"}},
		{name: "larger than the gang", seg: segs(16, clique), members: 4, minMember: 4, wantErr: []string{
			"does not divide the gang's 4 members: set a size that divides 4, such as 4"}},
		{name: "elastic, quorum not whole segments", seg: segs(4, clique), members: 12, minMember: 6, wantErr: []string{
			"the gang is elastic (quorum 6 of 12 members) and its quorum is not a whole number of segments of 4: set the quorum to a multiple of 4"}},
		{name: "elastic: members that are not whole segments yet wait for the rest", seg: segs(4, clique), members: 10, minMember: 8},
		{name: "every problem at once", seg: segs(5, spine), gang: placement.Policy{Level: clique}, members: 12, minMember: 12, wantErr: []string{
			"looser than the gang's level", "does not divide the gang's 12 members: set a size that divides 12, such as 4 or 6"}},
		{name: "every problem of an elastic gang", seg: segs(5, spine), gang: placement.Policy{Level: clique}, members: 12, minMember: 6, wantErr: []string{
			"looser than the gang's level", "(quorum 6 of 12 members)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.seg.Validate(levels, tt.gang, unindexedPods(int(tt.members)), tt.minMember)
			if len(tt.wantErr) == 0 {
				require.NoError(t, err)
				return
			}
			for _, want := range tt.wantErr {
				require.ErrorContains(t, err, want)
			}
		})
	}
}

// workers builds a PyTorchJob's pods: a master, then workers 0..n-2, in
// rank order, less the workers listed in lost.
func workers(n int, lost ...int) []*v1.Pod {
	out := []*v1.Pod{pod("master").Label(scheduling.KubeflowReplicaTypeLabel, "master").Label(scheduling.KubeflowReplicaIndexLabel, "0").Obj()}
	for i := 0; i < n-1; i++ {
		if slices.Contains(lost, i) {
			continue
		}
		out = append(out, pod(fmt.Sprintf("worker-%d", i)).Label(scheduling.KubeflowReplicaTypeLabel, "worker").
			Label(scheduling.KubeflowReplicaIndexLabel, strconv.Itoa(i)).Obj())
	}
	return out
}

func TestSegmentsAssign(t *testing.T) {
	four := Segments{Size: 4, Policy: placement.Policy{Level: scheduling.LabelGPUClique, Required: true}}
	unindexed := []*v1.Pod{pod("a").Obj(), pod("b").Obj(), pod("c").Obj(), pod("d").Obj(), pod("e").Obj()}
	dup := []*v1.Pod{
		pod("a").Label(scheduling.JobSetJobIndexLabel, "0").Obj(), pod("b").Label(scheduling.JobSetJobIndexLabel, "0").Obj(),
		pod("c").Label(scheduling.JobSetJobIndexLabel, "1").Obj(),
	}
	tests := []struct {
		name    string
		seg     Segments
		members []*v1.Pod
		want    []int
	}{
		{name: "no segments", members: workers(3), want: []int{0, 0, 0}},
		{name: "a master and seven workers: torch ranks 0-7", seg: four, members: workers(8), want: []int{0, 0, 0, 0, 1, 1, 1, 1}},
		// Worker 1 (rank 2) is lost and not yet replaced: the ranks after it
		// keep their segments.
		{name: "a lost member leaves a gap", seg: four, members: workers(8, 1), want: []int{0, 0, 0, 1, 1, 1, 1}},
		{name: "no rank index: position", seg: four, members: unindexed, want: []int{0, 0, 0, 0, 1}},
		{name: "indices shared: position", seg: Segments{Size: 2}, members: dup, want: []int{0, 0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.seg.Assign(tt.members)); diff != "" {
				t.Errorf("Assign (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestSegmentsHierarchy(t *testing.T) {
	clique := placement.Policy{Level: scheduling.LabelGPUClique, Required: true}
	spine := placement.Policy{Level: scheduling.LabelSpine, Required: true}
	four := Segments{Size: 4, Policy: clique}
	planned := func(m int) Slot { return Slot{Member: m, Anchor: -1} }
	anchored := func(a int) Slot { return Slot{Member: -1, Anchor: a} }
	neither := Slot{Member: -1, Anchor: -1}
	seg := func(i, lo int, members, anchors []int) placement.Subgroup {
		return placement.Subgroup{Name: fmt.Sprintf("ns/job segment %d (ranks %d-%d)", i, lo, lo+3), Policy: clique, Members: members, Anchors: anchors}
	}
	tests := []struct {
		name    string
		seg     Segments
		members []*v1.Pod
		slots   []Slot
		want    *placement.Subgroup
	}{
		{name: "a flat gang has none", members: workers(2), slots: []Slot{planned(0), planned(1)}},
		{name: "a whole gang: every segment, in rank order", seg: four, members: workers(8),
			slots: []Slot{planned(0), planned(1), planned(2), planned(3), planned(4), planned(5), planned(6), planned(7)},
			want: &placement.Subgroup{Name: "ns/job", Policy: spine, Children: []placement.Subgroup{
				seg(0, 0, []int{0, 1, 2, 3}, nil), seg(1, 4, []int{4, 5, 6, 7}, nil),
			}}},
		// Rank 5 (worker 4) is replaced while rank 2 (worker 1) is still
		// missing: the replacement joins the anchors of its own segment, and
		// the other segment keeps its anchors.
		{name: "a replacement returns to its segment", seg: four, members: workers(8, 1),
			slots: []Slot{anchored(0), anchored(1), anchored(2), anchored(3), planned(0), anchored(4), anchored(5)},
			want: &placement.Subgroup{Name: "ns/job", Policy: spine, Children: []placement.Subgroup{
				seg(0, 0, nil, []int{0, 1, 2}), seg(1, 4, []int{0}, []int{3, 4, 5}),
			}}},
		{name: "elastic growth: a new segment of late members, a segment with nothing to place left out", seg: four, members: workers(12),
			slots: []Slot{neither, neither, neither, neither, anchored(0), anchored(1), anchored(2), anchored(3), planned(0), planned(1), planned(2), planned(3)},
			want: &placement.Subgroup{Name: "ns/job", Policy: spine, Children: []placement.Subgroup{
				seg(1, 4, nil, []int{0, 1, 2, 3}), seg(2, 8, []int{0, 1, 2, 3}, nil),
			}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.seg.Hierarchy("ns/job", spine, tt.members, tt.slots)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Hierarchy (-want,+got):\n%s", diff)
			}
			if got == nil {
				return
			}
			// The planner accepts it.
			req := &placement.Request{Policy: spine, Hierarchy: got}
			for _, s := range tt.slots {
				if s.Member >= 0 {
					req.Members = append(req.Members, placement.Member{Name: fmt.Sprint(s.Member)})
				}
				if s.Anchor >= 0 {
					req.Anchors = append(req.Anchors, s.Anchor)
				}
			}
			require.NoError(t, req.ValidateHierarchy())
		})
	}
}

// unindexedPods builds n members without roles or rank indices.
func unindexedPods(n int) []*v1.Pod {
	out := make([]*v1.Pod, n)
	for i := range out {
		out[i] = pod(fmt.Sprintf("m-%d", i)).Obj()
	}
	return out
}

// sliced is Kueue's pod-template annotations for slices of size ranks in
// one domain of level.
func sliced(size, level string) map[string]string {
	return map[string]string{scheduling.KueueSliceSizeAnnotation: size, scheduling.KueueSliceRequiredTopologyAnnotation: level}
}

// mpiJob builds an MPIJob's pods, in rank order: its launcher, with
// launcherAnnotations, then n workers, with workerAnnotations.
func mpiJob(n int, launcherAnnotations, workerAnnotations map[string]string) []*v1.Pod {
	launcher := pod("launcher").Label(scheduling.KubeflowReplicaTypeLabel, "launcher").Label(scheduling.KubeflowReplicaIndexLabel, "0").Obj()
	launcher.Annotations = launcherAnnotations
	out := []*v1.Pod{launcher}
	for i := 0; i < n; i++ {
		w := pod(fmt.Sprintf("worker-%d", i)).Label(scheduling.KubeflowReplicaTypeLabel, "worker").Label(scheduling.KubeflowReplicaIndexLabel, strconv.Itoa(i)).Obj()
		w.Annotations = workerAnnotations
		out = append(out, w)
	}
	return out
}

// A launcher, master or chief beside the role the segments slice sits in no
// segment, is not counted in the divisibility check, and moves no worker's
// ordinal; a PyTorchJob's master, torch rank 0, stays in segment 0 when the
// PodGroup's own size divides the members with it.
func TestSegmentsRoles(t *testing.T) {
	levels, _ := scheduling.Preset(scheduling.DefaultPreset)
	leaf := scheduling.LabelLeaf
	onPodGroup := func(size string) map[string]string {
		return map[string]string{scheduling.AnnotationSegmentSize: size, scheduling.AnnotationSegmentTopologyRequired: leaf}
	}
	apart := -1
	tests := []struct {
		name      string
		gang      map[string]string
		minMember int32
		members   []*v1.Pod
		want      []int
		wantErr   string
		// assignOnly skips Validate, for members caught between a loss and
		// its replacement.
		assignOnly bool
	}{
		{name: "Kueue's slices on the workers only: the launcher is outside", minMember: 9,
			members: mpiJob(8, nil, sliced("4", leaf)), want: []int{apart, 0, 0, 0, 0, 1, 1, 1, 1}},
		// Kueue slices each PodSet on its own, and a slice of the launcher's
		// PodSet of one pod never holds a worker.
		{name: "the launcher's own slices of one: outside", minMember: 9,
			members: mpiJob(8, sliced("1", leaf), sliced("4", leaf)), want: []int{apart, 0, 0, 0, 0, 1, 1, 1, 1}},
		// The launcher's template carries the workers' very annotations,
		// which Kueue could not honour for a PodSet of one: they are read as
		// the PodGroup's, and 4 divides the 8 workers, not the 9 members.
		{name: "Kueue's slices copied onto the launcher, dividing the workers: outside", minMember: 9,
			members: mpiJob(8, sliced("4", leaf), sliced("4", leaf)), want: []int{apart, 0, 0, 0, 0, 1, 1, 1, 1}},
		{name: "copied onto a PyTorchJob's master, dividing the workers: outside", minMember: 9,
			members: withAnnotations(workers(9), sliced("4", leaf)), want: []int{apart, 0, 0, 0, 0, 1, 1, 1, 1}},
		{name: "copied onto a PyTorchJob's master, dividing master and workers: the master is rank 0", minMember: 8,
			members: withAnnotations(workers(8), sliced("4", leaf)), want: []int{0, 0, 0, 0, 1, 1, 1, 1}},
		{name: "Kueue's slices, the workers not divisible: named, the launcher not counted", minMember: 7,
			members: mpiJob(6, nil, sliced("4", leaf)),
			wantErr: "kueue.x-k8s.io/podset-slice-size is 4, which does not divide the 6 members its segments cover (pod ns/launcher, outside them, is not counted): " +
				"set a size that divides 6, such as 3 or 6, or make the member count a multiple of 4"},
		{name: "the PodGroup's size divides the workers, not the launcher with them: the launcher is outside", gang: onPodGroup("4"), minMember: 9,
			members: mpiJob(8, nil, nil), want: []int{apart, 0, 0, 0, 0, 1, 1, 1, 1}},
		{name: "the PodGroup's size divides the master with the workers: the master is rank 0", gang: onPodGroup("4"), minMember: 8,
			members: workers(8), want: []int{0, 0, 0, 0, 1, 1, 1, 1}},
		{name: "the PodGroup's size divides neither: every member counts, and the message says so", gang: onPodGroup("4"), minMember: 7,
			members: mpiJob(6, nil, nil), wantErr: "segment-size is 4, which does not divide the gang's 7 members"},
		{name: "the PodGroup's, the quorum decides, not the members present: worker 2 lost", gang: onPodGroup("4"), minMember: 9,
			members: slices.Delete(mpiJob(8, nil, nil), 3, 4), want: []int{apart, 0, 0, 0, 1, 1, 1, 1}, assignOnly: true},
		{name: "the PodGroup's, elastic: the launcher outside the quorum's whole segments", gang: onPodGroup("4"), minMember: 5,
			members: mpiJob(8, nil, nil), want: []int{apart, 0, 0, 0, 0, 1, 1, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			members := slices.Clone(tt.members)
			// Which members the segments cover does not hang on their order.
			slices.Reverse(members)
			spec := &Spec{Key: Key{Namespace: "ns", Name: "job"}, MinMember: tt.minMember, Annotations: tt.gang}
			seg, err := SegmentsOf(spec, members)
			require.NoError(t, err)
			require.Equal(t, int32(4), seg.Size)
			if !tt.assignOnly {
				err = seg.Validate(levels, placement.Policy{}, members, tt.minMember)
				if tt.wantErr != "" {
					require.ErrorContains(t, err, tt.wantErr)
					return
				}
				require.NoError(t, err)
			}
			if diff := cmp.Diff(tt.want, seg.Assign(tt.members)); diff != "" {
				t.Errorf("Assign (-want,+got):\n%s", diff)
			}
			for i, p := range tt.members {
				require.Equal(t, tt.want[i] >= 0, seg.Covers(p), "Covers(%s)", p.Name)
			}
		})
	}
}

// withAnnotations sets annotations on every pod of pods.
func withAnnotations(pods []*v1.Pod, annotations map[string]string) []*v1.Pod {
	for _, p := range pods {
		p.Annotations = annotations
	}
	return pods
}
