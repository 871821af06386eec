package gpufleet

import (
	"os"
	"testing"

	"k8s.io/kubernetes/pkg/scheduler/metrics"
)

func TestMain(m *testing.M) {
	// The framework records plugin metrics; the scheduler binary registers
	// them at start-up, tests must do it themselves.
	metrics.Register()
	os.Exit(m.Run())
}
