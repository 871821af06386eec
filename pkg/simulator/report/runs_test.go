package report

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/simulator/metrics"
)

// Repeated runs report, per profile, the median and the range of each
// figure, whatever order the runs came in, with a failed run counted and
// left out, and say where and when they ran.
func TestWriteRuns(t *testing.T) {
	run := func(gangPPS, defaultPPS float64, defaultErr string) *Run {
		return &Run{Scenario: "s2", Results: []*metrics.Result{
			{Profile: "gpu-gang", Summary: metrics.Summary{PodsPerSecond: gangPPS}},
			{Profile: "default", Summary: metrics.Summary{PodsPerSecond: defaultPPS}, Error: defaultErr},
		}}
	}
	var b bytes.Buffer
	require.NoError(t, WriteRuns(&b, []*Run{run(30, 10, ""), run(10, 0, "boom"), run(20, 14, "")}, Machine{Host: "box", CPUs: 2, CPUModel: "EPYC", Date: "2026-12-01T20:00:00Z"}))
	out := b.String()
	require.Contains(t, out, "scenario s2: 3 runs on box (2 CPUs, EPYC), 2026-12-01T20:00:00Z; median [min–max]")
	require.Regexp(t, `gpu-gang +3 +20\.0 \[10\.0–30\.0\]`, out)
	require.Regexp(t, `default +2 \(\+1 failed\) +12\.0 \[10\.0–14\.0\]`, out, "the median of two is their mean")
}

func TestSpread(t *testing.T) {
	require.Equal(t, "-", spread("%.0f", nil))
	require.Equal(t, "7", spread("%.0f", []float64{7}))
	require.Equal(t, "2 [1–9]", spread("%.0f", []float64{9, 1, 2}))
}
