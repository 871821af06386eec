package fleet

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

const (
	h100 = "NVIDIA-H100-80GB-HBM3"
	a100 = "NVIDIA-A100-SXM4-80GB"
)

// node builds a placement node with the given labels.
func node(name string, labels map[string]string) placement.Node {
	return placement.Node{Name: name, Labels: labels}
}

// groupOf groups the nodes as the GPUFleet plugin does: each node's
// GroupKey, then NewGrouping.
func groupOf(fl *Fleet, r Requirements) *Grouping {
	keys := make([]GroupKey, len(fl.facts))
	for i := range keys {
		keys[i] = fl.GroupKey(i, r)
	}
	return NewGrouping(keys)
}

// groupsByName renders a grouping as group descriptions to node names, in
// group order, so that tests compare by name rather than index.
func groupsByName(t *testing.T, nodes []placement.Node, g *Grouping) [][]string {
	t.Helper()
	out := make([][]string, len(g.Groups))
	for k, grp := range g.Groups {
		out[k] = []string{grp.Key.String()}
		for _, n := range grp.Nodes {
			require.Equal(t, k, g.Of[n], "Of agrees with Groups")
			out[k] = append(out[k], nodes[n].Name)
		}
	}
	return out
}

func TestGroupDefaultKeys(t *testing.T) {
	nodes := []placement.Node{
		node("h-550-a", gfd("12.4", "550.54.15", "9.0", "nvidia.com/gpu.product", h100)),
		node("h-550-b", gfd("12.4", "550.54.14", "9.0", "nvidia.com/gpu.product", h100)), // revision differs: same group
		node("h-535", kv("nvidia.com/gpu.product", h100, "nvidia.com/cuda.driver.major", "535", "nvidia.com/cuda.driver.minor", "104", "nvidia.com/cuda.driver.rev", "05")),
		node("h-535-new-keys", gfd("12.2", "535.104.05", "9.0", "nvidia.com/gpu.product", h100)), // same driver as h-535, read from the current keys
		node("a-550", gfd("12.4", "550.54.15", "8.0", "nvidia.com/gpu.product", a100)),
		node("h-550-spot", gfd("12.4", "550.54.15", "9.0", "nvidia.com/gpu.product", h100, "karpenter.sh/capacity-type", "spot")),
		node("plain-1", kv()),
		node("plain-2", kv("kubernetes.io/hostname", "plain-2")),
		node("h-no-driver", kv("nvidia.com/gpu.product", h100)),
	}
	fl := New(nodes, DefaultOptions())
	g := groupOf(fl, DefaultRequirements())
	want := [][]string{
		{"nvidia.com/gpu.product unset, driver unset, on-demand capacity", "plain-1", "plain-2"},
		{"nvidia.com/gpu.product=" + a100 + ", driver 550.54, on-demand capacity", "a-550"},
		{"nvidia.com/gpu.product=" + h100 + ", driver unset, on-demand capacity", "h-no-driver"},
		{"nvidia.com/gpu.product=" + h100 + ", driver 535.104, on-demand capacity", "h-535", "h-535-new-keys"},
		{"nvidia.com/gpu.product=" + h100 + ", driver 550.54, on-demand capacity", "h-550-a", "h-550-b"},
		{"nvidia.com/gpu.product=" + h100 + ", driver 550.54, spot capacity", "h-550-spot"},
	}
	if diff := cmp.Diff(want, groupsByName(t, nodes, g)); diff != "" {
		t.Errorf("groups (-want,+got):\n%s", diff)
	}
	require.False(t, g.Trivial())
}

func TestGroupPolicies(t *testing.T) {
	nodes := []placement.Node{
		node("n0", gfd("12.4", "550.54.15", "", "nvidia.com/gpu.product", h100, "example.com/rack", "r1")),
		node("n1", gfd("12.4", "535.104.05", "", "nvidia.com/gpu.product", a100, "example.com/rack", "r1", "karpenter.sh/capacity-type", "spot")),
		node("n2", gfd("12.4", "550.54.15", "", "nvidia.com/gpu.product", h100, "example.com/rack", "r2", "karpenter.sh/capacity-type", "interruptible")),
	}
	fl := New(nodes, DefaultOptions())
	tests := []struct {
		name string
		req  Requirements
		want [][]string
	}{
		{
			name: "none and any: one group",
			req:  Requirements{Capacity: CapacityPolicyAny},
			want: [][]string{{"all nodes", "n0", "n1", "n2"}},
		},
		{
			name: "none, uniform capacity: unknown capacity apart",
			req:  Requirements{Capacity: CapacityPolicyUniform},
			want: [][]string{{"on-demand capacity", "n0"}, {"spot capacity", "n1"}, {"unknown capacity", "n2"}},
		},
		{
			name: "a custom key",
			req:  Requirements{Uniform: NewUniformKeys("example.com/rack"), Capacity: CapacityPolicyAny},
			want: [][]string{{"example.com/rack=r1", "n0", "n1"}, {"example.com/rack=r2", "n2"}},
		},
		{
			name: "forced capacity is judged node by node, not grouped",
			req:  Requirements{Uniform: NewUniformKeys("nvidia.com/gpu.product"), Capacity: CapacityPolicySpot},
			want: [][]string{{"nvidia.com/gpu.product=" + a100, "n1"}, {"nvidia.com/gpu.product=" + h100, "n0", "n2"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := groupOf(fl, tt.req)
			if diff := cmp.Diff(tt.want, groupsByName(t, nodes, g)); diff != "" {
				t.Errorf("groups (-want,+got):\n%s", diff)
			}
			require.Equal(t, len(tt.want) == 1, g.Trivial())
		})
	}
}

// TestGroupKeyIsUnambiguous checks that values holding the characters an
// encoding might use as separators never make two different nodes look
// alike.
func TestGroupKeyIsUnambiguous(t *testing.T) {
	r := Requirements{Uniform: NewUniformKeys("a/x", "a/y")}
	values := []string{"", "p", "p,q", `p"`, `"p`, "=", "-", `=",=`, "p=q", `\`}
	seen := map[GroupKey][2]string{}
	for _, x := range values {
		for _, y := range values {
			labels := kv()
			if x != "" {
				labels["a/x"] = x
			}
			if y != "" {
				labels["a/y"] = y
			}
			f := ReadNode(labels, nil)
			k := r.GroupKey(labels, &f)
			if prev, dup := seen[k]; dup {
				t.Fatalf("values %q and %q share a key with %q: %v", [2]string{x, y}, prev, prev, k)
			}
			seen[k] = [2]string{x, y}
		}
	}
}

// TestGroupDoesNotDependOnNodeOrder shuffles a node set and checks that the
// groups, their order and their members (by name) never change.
func TestGroupDoesNotDependOnNodeOrder(t *testing.T) {
	products := []string{h100, a100, ""}
	drivers := []string{"550.54.15", "535.104.05", "550.90.07", ""}
	capacity := []string{"spot", "on-demand", ""}
	rng := rand.New(rand.NewPCG(1, 2))
	var nodes []placement.Node
	for i := range 60 {
		labels := gfd("", drivers[rng.IntN(len(drivers))], "")
		if p := products[rng.IntN(len(products))]; p != "" {
			labels["nvidia.com/gpu.product"] = p
		}
		if c := capacity[rng.IntN(len(capacity))]; c != "" {
			labels["karpenter.sh/capacity-type"] = c
		}
		nodes = append(nodes, node(fmt.Sprintf("n%02d", i), labels))
	}
	render := func(nodes []placement.Node) [][]string {
		fl := New(nodes, DefaultOptions())
		out := groupsByName(t, nodes, groupOf(fl, DefaultRequirements()))
		for _, g := range out {
			names := g[1:]
			slices.Sort(names)
		}
		return out
	}
	want := render(nodes)
	require.Greater(t, len(want), 10, "the fixture mixes many groups")
	for range 20 {
		shuffled := append([]placement.Node(nil), nodes...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if diff := cmp.Diff(want, render(shuffled)); diff != "" {
			t.Fatalf("groups changed with node order (-want,+got):\n%s", diff)
		}
	}
}
