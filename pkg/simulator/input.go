package simulator

import (
	"time"

	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

// Input is what one run simulates: the nodes, what already runs on them,
// and the jobs to submit. A scenario file makes one (ScenarioInput) from a
// made-up fabric; a snapshot of a real cluster makes another (package
// snapshot), from the cluster's own nodes, bound pods and pending gangs.
type Input struct {
	// Name identifies the input in reports; Description says what it is.
	Name, Description string
	// Layout is the fabric: every node with its topology labels and GPUs.
	Layout *fabric.Layout
	// Prefill are pods bound to their nodes before the workload starts,
	// running until the end of the run.
	Prefill []fabric.PrefillPod
	// Jobs are submitted at their arrival times, ordered by arrival.
	Jobs []scenario.Job
	// Timeout bounds the run after the first submission.
	Timeout time.Duration
	// SchedulerProcess runs every profile's scheduler in a process of its
	// own (scenario.Scenario.SchedulerProcess).
	SchedulerProcess bool
	// Preload creates the workload before the scheduler starts
	// (scenario.Scenario.Preload).
	Preload bool
	// Profiles are the profiles to run when the command line names none;
	// nil for all (scenario.Scenario.Profiles).
	Profiles []string
}

// ScenarioInput draws a scenario's fabric, pre-fill and jobs.
func ScenarioInput(sc *scenario.Scenario) (*Input, error) {
	layout, err := fabric.NewLayout(sc.Fabric)
	if err != nil {
		return nil, err
	}
	return &Input{
		Name: sc.Name, Description: sc.Description,
		Layout:  layout,
		Prefill: layout.Prefill(sc.Seed),
		Jobs:    scenario.Expand(sc),
		Timeout: sc.Timeout.Duration,

		SchedulerProcess: sc.SchedulerProcess,
		Preload:          sc.Preload,
		Profiles:         sc.Profiles,
	}, nil
}
