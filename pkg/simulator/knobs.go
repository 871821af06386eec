package simulator

import "time"

// Knobs are the limits every profile's scheduler runs with. Knobs.apply is
// the one place that sets them, over whatever a profile's own
// configuration says, so that a comparison measures scheduling and not a
// limit one profile was given and another was not (an earlier table was
// measured while gpu-gang alone scored every node).
type Knobs struct {
	// QPS and Burst are the scheduler's client limits.
	QPS   float32
	Burst int32
}

// The knobs no flag sets: kube-scheduler's own defaults, written out so
// that a profile's configuration cannot move them for itself alone.
const (
	// knobParallelism is how many nodes a scheduling cycle filters and
	// scores at once.
	knobParallelism = 16
	// knobPercentageOfNodesToScore 0 is kube-scheduler's adaptive share;
	// no profile may set its own.
	knobPercentageOfNodesToScore = 0
	// knobPodInitialBackoffSeconds and knobPodMaxBackoffSeconds bound an
	// unschedulable pod's wait before it is tried again.
	knobPodInitialBackoffSeconds = 1
	knobPodMaxBackoffSeconds     = 10
)

// apply sets the knobs in cfg, a KubeSchedulerConfiguration read as YAML,
// and removes each profile's own percentageOfNodesToScore. Leader election
// goes off: in-process, kube-scheduler ends the process when it stops
// leading.
func (k Knobs) apply(cfg map[string]any) {
	conn, _ := cfg["clientConnection"].(map[string]any)
	if conn == nil {
		conn = map[string]any{}
	}
	conn["qps"] = k.QPS
	conn["burst"] = k.Burst
	cfg["clientConnection"] = conn
	cfg["leaderElection"] = map[string]any{"leaderElect": false}
	cfg["parallelism"] = knobParallelism
	cfg["percentageOfNodesToScore"] = knobPercentageOfNodesToScore
	cfg["podInitialBackoffSeconds"] = knobPodInitialBackoffSeconds
	cfg["podMaxBackoffSeconds"] = knobPodMaxBackoffSeconds
	profiles, _ := cfg["profiles"].([]any)
	for _, p := range profiles {
		if p, ok := p.(map[string]any); ok {
			delete(p, "percentageOfNodesToScore")
		}
	}
}

// Defaults every run takes unless told otherwise: cmd/simulator's flags and
// test/bench both start from them, so that their figures compare.
const (
	// DefaultSchedulerQPS and DefaultSchedulerBurst are every profile's
	// scheduler client limits: high enough that the API server, not the
	// rate limiter, bounds binding.
	DefaultSchedulerQPS   = 5000
	DefaultSchedulerBurst = 10000
	// DefaultClientQPS and DefaultClientBurst are the simulator's own.
	DefaultClientQPS   = 5000
	DefaultClientBurst = 10000
	// DefaultPartialGrace and DefaultPartialGracePerMember make
	// metrics.Grace: once released, a gang's members bind through separate
	// API calls, which land up to about 2s apart on a saturated 2-core
	// machine.
	DefaultPartialGrace          = 2 * time.Second
	DefaultPartialGracePerMember = 20 * time.Millisecond
	// DefaultSampleInterval is how often occupancy is sampled.
	DefaultSampleInterval = 250 * time.Millisecond
)
