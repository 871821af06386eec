package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/simulator/report"
)

// TestSnapshotRun runs the shipped cluster snapshot through the built
// simulator, as a platform team would run its own: every profile on its own
// control plane, each binding all 16 waiting pods, and gpu-gang placing all
// 4 waiting gangs at the joint bound with no gang part-bound. It needs the
// binary, which `make test-snapshot` (part of `make test`) builds and names
// in GPU_GANG_SIMULATOR.
func TestSnapshotRun(t *testing.T) {
	bin := os.Getenv("GPU_GANG_SIMULATOR")
	if bin == "" {
		t.Skip("set GPU_GANG_SIMULATOR to a built simulator (make test-snapshot does)")
	}
	bin, err := filepath.Abs(bin)
	require.NoError(t, err)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--snapshot", "scenarios/snapshots/h100.yaml",
		"--profiles", "gpu-gang,default,in-tree", "--out", out)
	cmd.Dir = "../.." // the simulator's defaults (config, CRD, kwok) are relative to the repository
	printed, err := cmd.CombinedOutput()
	require.NoError(t, err, "the simulator failed:\n%s", printed)
	require.Contains(t, string(printed), "scenario h100: 32 nodes (2 spines, 8 leaves, 16 cliques), 256 GPUs, 124 pre-filled; 4 gangs and 3 plain pods, 16 pods in all")

	data, err := os.ReadFile(filepath.Join(out, "results.json"))
	require.NoError(t, err)
	var run report.Run
	require.NoError(t, json.Unmarshal(data, &run))
	require.Len(t, run.Results, 3)
	for _, r := range run.Results {
		require.Empty(t, r.Error, "profile %s", r.Profile)
		require.Equal(t, 16, r.Summary.Pods, "profile %s", r.Profile)
		require.Equal(t, 16, r.Summary.BoundPods, "profile %s", r.Profile)
		require.Equal(t, 4, r.Summary.BoundGangs, "profile %s", r.Profile)
		if r.Profile == "gpu-gang" {
			require.Zero(t, r.Summary.PartialGangSeconds)
			require.Equal(t, 4, r.Summary.JointGangs)
			require.Equal(t, 4, r.Summary.AtJointBound, "gpu-gang places every gang of the snapshot as tightly as what is free allows")
		}
	}
	_, err = os.Stat(filepath.Join(out, "report.html"))
	require.NoError(t, err)
}
