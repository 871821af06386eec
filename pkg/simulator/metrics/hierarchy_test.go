package metrics

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/workload"
)

// composite is a hierarchical job of segments of two 8-GPU members, each
// required inside one clique, of which min must start together.
func composite(name string, pods, min int) scenario.Job {
	return scenario.Job{Name: name, Gang: true, Pods: pods, GPUsPerPod: 8,
		Segments: &scenario.Segments{Size: 2, Level: scenario.TierClique, MinCount: min}}
}

// segmentMember is member i of a job with segments of size.
func segmentMember(job string, i, size int) *v1.Pod {
	p := member(job, i, 8)
	p.Labels[workload.SegmentLabel] = strconv.Itoa(i / size)
	return p
}

// bind is one member binding on a node of smallLayout at a time.
type bind struct {
	member int
	node   int
	at     float64
}

func TestHierarchySummary(t *testing.T) {
	tests := []struct {
		name  string
		job   scenario.Job
		binds []bind
		end   float64
		want  HierarchySummary
	}{{
		// Segment 0 fills clique c0 (n0, n1) at 1s; segment 1's second
		// member lands in c1 only at 5s: the composite is part-bound for
		// 4s, longer than the 1s grace. Segment 2 is not needed.
		name:  "second segment late: partial until the minimum is complete",
		job:   composite("c", 6, 2),
		binds: []bind{{0, 0, 1}, {1, 1, 1}, {2, 2, 1}, {3, 3, 5}},
		end:   10,
		want: HierarchySummary{Composites: 1, Complete: 1, Segments: 3, CompleteSegments: 2, InDomain: 2,
			PartialCompositeSeconds: 4, PartialComposites: 1, RawPartialCompositeSeconds: 4},
	}, {
		name:  "released together, within the grace",
		job:   composite("c", 4, 0),
		binds: []bind{{0, 0, 1}, {1, 1, 1.2}, {2, 2, 1.3}, {3, 3, 1.5}},
		end:   10,
		want:  HierarchySummary{Composites: 1, Complete: 1, Segments: 2, CompleteSegments: 2, InDomain: 2, RawPartialCompositeSeconds: 0.5},
	}, {
		// n1 and n2 are in cliques c0 and c1: a segment split over two.
		name:  "a segment across two cliques is complete but not in its domain",
		job:   composite("c", 4, 0),
		binds: []bind{{0, 1, 1}, {1, 2, 1}, {2, 4, 1}, {3, 5, 1}},
		end:   10,
		want:  HierarchySummary{Composites: 1, Complete: 1, Segments: 2, CompleteSegments: 2, InDomain: 1},
	}, {
		name:  "never reaches its minimum: the open span closes at the end",
		job:   composite("c", 4, 0),
		binds: []bind{{0, 0, 2}, {1, 1, 2}, {2, 2, 3}},
		end:   10,
		want: HierarchySummary{Composites: 1, Segments: 2, CompleteSegments: 1, InDomain: 1,
			PartialCompositeSeconds: 8, PartialComposites: 1, RawPartialCompositeSeconds: 8},
	}, {
		// Once the minimum is complete, a later segment adds no partial
		// time: the composite has started.
		name:  "segments beyond the minimum bind later",
		job:   composite("c", 4, 1),
		binds: []bind{{0, 0, 1}, {1, 1, 1}, {2, 2, 6}, {3, 3, 8}},
		end:   10,
		want:  HierarchySummary{Composites: 1, Complete: 1, Segments: 2, CompleteSegments: 2, InDomain: 2},
	}, {
		name: "nothing bound is not partial",
		job:  composite("c", 4, 0),
		end:  10,
		want: HierarchySummary{Composites: 1, Segments: 2},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := smallLayout(t)
			h := NewHierarchyTracker(l, []scenario.Job{tc.job, {Name: "plain", Pods: 1}}, Grace{Base: time.Second})
			for i := range tc.job.Pods {
				h.Observe(segmentMember("c", i, 2), at(0))
			}
			for _, b := range tc.binds {
				p := bound(segmentMember("c", b.member, 2), l.Nodes[b.node].Name)
				h.Observe(p, at(b.at))
				// A second event for the same bound pod changes nothing.
				h.Observe(p, at(b.at+0.1))
			}
			got := h.Summary(at(tc.end), nil)
			require.NotNil(t, got)
			if diff := cmp.Diff(tc.want, *got); diff != "" {
				t.Errorf("summary (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestHierarchySummaryNilWithoutSegments(t *testing.T) {
	h := NewHierarchyTracker(smallLayout(t), []scenario.Job{{Name: "g", Gang: true, Pods: 2}}, Grace{})
	require.Nil(t, h.Summary(at(1), nil))
}

// TestHierarchyExtraDomainsCountOnlyHierarchicalJobs: the extra domains
// over the joint bound are those of the segmented jobs; a flat gang's are
// left to the run's own Levels.
func TestHierarchyExtraDomainsCountOnlyHierarchicalJobs(t *testing.T) {
	h := NewHierarchyTracker(smallLayout(t), []scenario.Job{composite("c", 4, 0), {Name: "flat", Gang: true, Pods: 4}}, Grace{})
	worse := []Span{{Level: "leaf", Domains: 2, LowerBound: 1, JointBound: 1}, {Level: "node", Domains: 4, LowerBound: 4, JointBound: 4}}
	atBound := []Span{{Level: "leaf", Domains: 1, LowerBound: 1, JointBound: 1}, {Level: "node", Domains: 4, LowerBound: 4, JointBound: 4}}
	got := h.Summary(at(1), []Gang{{Name: "flat", Spans: worse}, {Name: "c", Spans: atBound}})
	require.Equal(t, []int{0, 0}, []int{got.Levels[0].ExcessOverJoint, got.Levels[1].ExcessOverJoint})
	got = h.Summary(at(1), []Gang{{Name: "flat", Spans: atBound}, {Name: "c", Spans: worse}})
	require.Equal(t, "leaf", got.Levels[0].Level)
	require.Equal(t, []int{1, 0}, []int{got.Levels[0].ExcessOverJoint, got.Levels[1].ExcessOverJoint})
	require.Equal(t, 1, got.Levels[0].Gangs)
}

// TestHierarchySameForEveryFlavor: the metric reads only what every flavor's
// pods carry, so the same binds give the same figures whether the profile
// stated the hierarchy as segment annotations, Kueue's annotations, a
// CompositePodGroup, or not at all.
func TestHierarchySameForEveryFlavor(t *testing.T) {
	l := smallLayout(t)
	job := composite("c", 6, 2)
	job.Topology = &scenario.Topology{Level: scenario.TierLeaf, Required: true}
	kueue := job
	kueue.Segments = &scenario.Segments{Size: 2, Level: scenario.TierClique, MinCount: 2, Kueue: true}
	binds := []bind{{0, 0, 1}, {1, 1, 1}, {2, 2, 1}, {3, 4, 5}, {4, 5, 6}}
	tierKeys := map[string]string{}
	for i, tier := range scenario.Tiers {
		tierKeys[tier] = l.TierKeys[i]
	}
	var first *HierarchySummary
	for _, tc := range []struct {
		name   string
		flavor workload.Flavor
		job    scenario.Job
	}{{"gpu-gang", workload.GangPlugin, job}, {"kueue", workload.GangPlugin, kueue}, {"native", workload.Native, job}, {"plain", workload.Plain, job}} {
		b := &workload.Builder{Namespace: "ns", Flavor: tc.flavor, SchedulerName: "s", TierKeys: tierKeys}
		objs, err := b.Build(&tc.job)
		require.NoError(t, err, tc.name)
		h := NewHierarchyTracker(l, []scenario.Job{tc.job}, Grace{Base: time.Second})
		for _, bd := range binds {
			h.Observe(bound(objs.Pods[bd.member], l.Nodes[bd.node].Name), at(bd.at))
		}
		got := h.Summary(at(10), nil)
		// Segment 1 straddles cliques c1 and c2; segment 2 is half bound.
		require.Equal(t, HierarchySummary{Composites: 1, Complete: 1, Segments: 3, CompleteSegments: 2, InDomain: 1,
			PartialCompositeSeconds: 4, PartialComposites: 1, RawPartialCompositeSeconds: 4}, *got, tc.name)
		if first == nil {
			first = got
			continue
		}
		if diff := cmp.Diff(first, got); diff != "" {
			t.Errorf("%s differs from gpu-gang (-gpu-gang,+%s):\n%s", tc.name, tc.name, diff)
		}
	}
}
