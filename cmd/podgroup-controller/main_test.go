package main

import (
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpu-gang/gpu-gang/pkg/controller/podgroup"
)

// The flags the Deployment passes parse into the options it means, and bad
// ones are refused.
func TestParseFlags(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "gpu-gang-system")
	s, err := parseFlags("podgroup-controller", []string{
		"--leader-elect=true",
		"--leader-elect-resource-name=gpu-gang-podgroup-controller",
		"--metrics-bind-address=:8443",
		"--health-probe-bind-address=:8081",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := podgroup.Options{
		LeaderElection:          true,
		LeaderElectionNamespace: "gpu-gang-system",
		LeaderElectionID:        "gpu-gang-podgroup-controller",
		MetricsBindAddress:      ":8443",
		HealthProbeBindAddress:  ":8081",
		MissingMembersGrace:     podgroup.DefaultMissingMembersGrace,
		Workers:                 4,
	}
	if diff := cmp.Diff(want, s.opts); diff != "" {
		t.Errorf("options (-want,+got):\n%s", diff)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"--missing-members-grace=0s"}, "must be positive"},
		{[]string{"--no-such-flag"}, "not defined"},
	} {
		if _, err := parseFlags("podgroup-controller", tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseFlags(%q) error = %v, want one containing %q", tc.args, err, tc.want)
		}
	}
	if _, err := parseFlags("podgroup-controller", []string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: error = %v, want flag.ErrHelp", err)
	}
	if s, err := parseFlags("podgroup-controller", []string{"--missing-members-grace=90s"}); err != nil || s.opts.MissingMembersGrace != 90*time.Second {
		t.Errorf("--missing-members-grace=90s: %v, %v", s, err)
	}
	if s, err := parseFlags("podgroup-controller", []string{"--scheduler-names=gpu-gang, gpu-gang-batch"}); err != nil || !cmp.Equal(s.opts.SchedulerNames, []string{"gpu-gang", "gpu-gang-batch"}) {
		t.Errorf("--scheduler-names: %v, %v", s, err)
	}
	if _, err := parseFlags("podgroup-controller", []string{"--scheduler-names=,"}); err == nil || !strings.Contains(err.Error(), "no scheduler name") {
		t.Errorf("--scheduler-names=, : error = %v", err)
	}
	if s.version {
		t.Error("--version is on without the flag")
	}
	if s, err := parseFlags("podgroup-controller", []string{"--version"}); err != nil || !s.version {
		t.Errorf("--version: %v, %v", s, err)
	}
}
