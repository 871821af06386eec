package gpufleet

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/contract"
	"github.com/gpu-gang/gpu-gang/pkg/fleet"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// grouper runs PreFilter for pod and returns the Grouper it leaves for the
// gang plugin.
func (env *testEnv) grouper(pod *v1.Pod) placement.Grouper {
	env.t.Helper()
	state, status := env.preFilter(pod)
	require.True(env.t, status.IsSuccess(), "PreFilter: %v", status)
	data, err := state.Read(contract.NodeGroupsStateKey)
	require.NoError(env.t, err)
	g, ok := data.(placement.Grouper)
	require.True(env.t, ok, "%T is no placement.Grouper", data)
	return g
}

func placementNodes(nodes []*v1.Node) []placement.Node {
	out := make([]placement.Node, len(nodes))
	for i, n := range nodes {
		out[i] = placement.Node{Name: n.Name, Labels: n.Labels}
	}
	return out
}

func TestNodeGroups(t *testing.T) {
	nodes := []*v1.Node{
		node("h100-a", gfd(h100, "550.54.15", "12.4", "9.0")),
		node("a100-a", gfd(a100, "550.54.15", "12.4", "8.0")),
		node("h100-b", gfd(h100, "550.54.14", "12.4", "9.0")), // a revision apart: same group
		node("h100-old", gfd(h100, "535.104.05", "12.2", "9.0")),
		node("h100-spot", gfd(h100, "550.54.15", "12.4", "9.0"), label(scheduling.LabelKarpenterCapacityType, "spot")),
	}
	tests := []struct {
		name      string
		pg        *v1alpha1.PodGroup
		pod       *v1.Pod
		wantOf    []int
		wantNames []string
		wantRule  string
		wantRelax string
	}{
		{
			name: "by default one product, driver major.minor and capacity type",
			pod:  pod("p", gpus("8")).Obj(),
			// Groups are in key order: product, then driver, then
			// capacity, values as strings.
			wantOf: []int{2, 0, 2, 1, 3},
			wantNames: []string{
				"nvidia.com/gpu.product=" + a100 + ", driver 550.54, on-demand capacity",
				"nvidia.com/gpu.product=" + h100 + ", driver 535.104, on-demand capacity",
				"nvidia.com/gpu.product=" + h100 + ", driver 550.54, on-demand capacity",
				"nvidia.com/gpu.product=" + h100 + ", driver 550.54, spot capacity",
			},
			wantRule:  "one nvidia.com/gpu.product, driver major.minor and capacity type (gpu-gang.x-k8s.io/uniform, gpu-gang.x-k8s.io/capacity-type)",
			wantRelax: "gpu-gang.x-k8s.io/uniform: none and gpu-gang.x-k8s.io/capacity-type: any on the PodGroup let the gang mix them",
		},
		{
			name: "uniform product only, any capacity, from the PodGroup",
			pg: gangtest.MakePodGroup("g", testNS).Annotation(scheduling.AnnotationUniform, scheduling.LabelGPUProduct).
				Annotation(scheduling.AnnotationCapacityType, "any").Obj(),
			pod:       pod("p", gpus("8")).Label(scheduling.PodGroupLabel, "g").Obj(),
			wantOf:    []int{1, 0, 1, 1, 1},
			wantNames: []string{"nvidia.com/gpu.product=" + a100, "nvidia.com/gpu.product=" + h100},
			wantRule:  "one nvidia.com/gpu.product (gpu-gang.x-k8s.io/uniform)",
			wantRelax: "gpu-gang.x-k8s.io/uniform: none on the PodGroup let the gang mix them",
		},
		{
			name: "none and any: one group",
			pod: pod("p", gpus("8")).Annotation(scheduling.AnnotationUniform, scheduling.UniformNone).
				Annotation(scheduling.AnnotationCapacityType, "any").Obj(),
		},
		{
			name: "forced spot capacity is Filter's; no capacity component in the groups",
			pod: pod("p", gpus("8")).Annotation(scheduling.AnnotationUniform, scheduling.UniformKeyDriverMajorMinor).
				Annotation(scheduling.AnnotationCapacityType, "spot").Obj(),
			wantOf:    []int{1, 1, 1, 0, 1},
			wantNames: []string{"driver 535.104", "driver 550.54"},
			wantRule:  "one driver major.minor (gpu-gang.x-k8s.io/uniform)",
			wantRelax: "gpu-gang.x-k8s.io/uniform: none on the PodGroup let the gang mix them",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pgs []*v1alpha1.PodGroup
			if tt.pg != nil {
				pgs = append(pgs, tt.pg)
			}
			env := newTestEnv(t, nodes, nil, pgs, nil)
			got := env.grouper(tt.pod).NodeGroups(placementNodes(nodes), 0)
			if tt.wantOf == nil {
				require.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			if diff := cmp.Diff(&placement.Groups{Of: tt.wantOf, Names: tt.wantNames, Rule: tt.wantRule, Relax: tt.wantRelax}, got); diff != "" {
				t.Errorf("groups (-want,+got):\n%s", diff)
			}
		})
	}
}

// Nodes without GPU feature discovery labels are one group: grouping
// constrains nothing in such a cluster.
func TestNodeGroupsOfAnUnlabelledCluster(t *testing.T) {
	nodes := []*v1.Node{node("a"), node("b"), node("c")}
	env := newTestEnv(t, nodes, nil, nil, nil)
	require.Nil(t, env.grouper(pod("p", gpus("8")).Obj()).NodeGroups(placementNodes(nodes), 0))
}

func TestNodeCache(t *testing.T) {
	var reported []string
	opts := fleet.DefaultOptions()
	c := newNodeCache(&opts, func(node string, f *fleet.NodeFacts) {
		for _, p := range f.Problems {
			reported = append(reported, node+": "+p.Label)
		}
	})
	labels := gfd(h100, "550.54.15", "12.4", "9.0")
	f := c.facts("n", labels, nil)
	require.Equal(t, "12.4", f.CUDA.String())
	require.Same(t, f, c.facts("n", labels, nil), "the same labels map is a hit")
	copied := gfd(h100, "550.54.15", "12.4", "9.0")
	require.Equal(t, "12.4", c.facts("n", copied, nil).CUDA.String(), "equal labels in a new map keep the facts")

	bad := gfd(h100, "550.54.15", "12.x", "9.0")
	require.True(t, c.facts("n", bad, nil).CUDA.IsZero(), "an unreadable label is ignored")
	require.Equal(t, []string{"n: " + scheduling.LabelCUDARuntimeVersionFull}, reported, "a problem is reported when the labels are read")
	c.facts("n", bad, nil)
	c.facts("n", gfd(h100, "550.54.15", "12.x", "9.0"), nil)
	require.Len(t, reported, 1, "and not again while they stay the same")

	c.forget("n")
	c.facts("n", bad, nil)
	require.Len(t, reported, 2, "a node seen anew is read anew")
}

func TestEventsToRegister(t *testing.T) {
	pg := gangtest.MakePodGroup("g", testNS).Annotation(scheduling.AnnotationMinCUDA, "12.4").Obj()
	env := newTestEnv(t, nil, nil, []*v1alpha1.PodGroup{pg}, nil)
	member := pod("m", gpus("8")).Label(scheduling.PodGroupLabel, "g").Obj()
	logger := env.pl.logger

	old122 := node("n", gfd(h100, "535.104.05", "12.2", "9.0"))
	new124 := node("n", gfd(h100, "550.54.15", "12.4", "9.0"))
	upgrading := node("n", gfd(h100, "550.54.15", "12.4", "9.0"), label(scheduling.LabelGPUDriverUpgradeState, "validation-required"))
	relabelled := node("n", gfd(h100, "550.54.15", "12.4", "9.0"), label("team", "b"))
	for _, tc := range []struct {
		name     string
		old, new *v1.Node
		want     fwk.QueueingHint
	}{
		{"a node that now supports the CUDA version", old122, new124, fwk.Queue},
		{"a new node that admits the member", nil, new124, fwk.Queue},
		{"a new node that does not", nil, old122, fwk.QueueSkip},
		{"a driver upgrade that ends", upgrading, new124, fwk.Queue},
		{"a driver upgrade that starts", new124, upgrading, fwk.QueueSkip},
		{"an unrelated label on a node that admitted it before", new124, relabelled, fwk.QueueSkip},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var old interface{}
			if tc.old != nil {
				old = tc.old
			}
			got, err := env.pl.isNodeNowAdmitting(logger, member, old, tc.new)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}

	fixed := member.DeepCopy()
	fixed.Annotations = map[string]string{scheduling.AnnotationMinCUDA: "12.2"}
	hint, err := env.pl.isRequirementChange(logger, member, member, fixed)
	require.NoError(t, err)
	require.Equal(t, fwk.Queue, hint)
	other := member.DeepCopy()
	other.Annotations = map[string]string{"example.com/note": "x"}
	hint, err = env.pl.isRequirementChange(logger, member, member, other)
	require.NoError(t, err)
	require.Equal(t, fwk.QueueSkip, hint, "other annotations do not change the requirements")

}
