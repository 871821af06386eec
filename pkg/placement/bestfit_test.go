package placement

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBestFit(t *testing.T) {
	// cpu in millicores and GPUs: each dimension counts against the
	// largest node's allocatable, not in its own unit.
	req := &Request{
		Resources: []string{"cpu", "nvidia.com/gpu"},
		Nodes: []Node{
			{Name: "small", Allocatable: Vector{32000, 4}},
			{Name: "big", Allocatable: Vector{128000, 8, 99}}, // read up to len(Resources)
			{Name: "cpu-only", Allocatable: Vector{64000, 0}},
		},
	}
	fit := NewBestFit(req)
	require.InDelta(t, 0.25+0.5, fit.Size(Vector{32000, 4}), 1e-12)
	require.Zero(t, fit.Size(Vector{0, 0}))

	// Spare counts only the dimensions the request uses: a GPU-only
	// request fits tighter on the node with fewer GPUs left, whatever its
	// CPUs.
	gpus := Vector{0, 2}
	require.InDelta(t, 0.25, fit.SpareAfter(gpus, Vector{128000, 4}), 1e-12)
	require.InDelta(t, 0.75, fit.SpareAfter(gpus, Vector{0, 8}), 1e-12)
	require.Less(t, fit.SpareAfter(gpus, Vector{128000, 4}), fit.SpareAfter(gpus, Vector{0, 8}))

	// A dimension no node offers weighs nothing.
	none := NewBestFit(&Request{Resources: []string{"example.com/x"}, Nodes: []Node{{Allocatable: Vector{0}}}})
	require.Zero(t, none.Size(Vector{3}))
	require.Zero(t, none.SpareAfter(Vector{3}, Vector{5}))
}
