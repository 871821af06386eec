package gang

import "testing"

func TestRunEndOf(t *testing.T) {
	for _, tc := range []struct {
		name                                 string
		minMember, active, succeeded, failed int32
		started                              bool
		want                                 RunEnd
	}{
		{name: "members still active", minMember: 2, active: 1, succeeded: 2, want: RunNotEnded},
		{name: "no member finished", minMember: 2, want: RunNotEnded},
		{name: "minMember succeeded", minMember: 2, succeeded: 2, want: RunFinished},
		{name: "more than minMember succeeded", minMember: 2, succeeded: 3, want: RunFinished},
		{name: "fewer than minMember succeeded, never started", minMember: 3, succeeded: 2, want: RunNotEnded},
		{name: "fewer than minMember succeeded after starting", minMember: 3, succeeded: 2, started: true, want: RunFinished},
		{name: "some failed, minMember finished", minMember: 3, succeeded: 2, failed: 1, want: RunFailed},
		{name: "some failed, fewer than minMember finished, never started", minMember: 3, failed: 1, want: RunNotEnded},
		{name: "some failed after starting", minMember: 3, failed: 1, started: true, want: RunFailed},
		{name: "failed members active ones outlive", minMember: 2, active: 1, failed: 2, started: true, want: RunNotEnded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RunEndOf(tc.minMember, tc.active, tc.succeeded, tc.failed, tc.started); got != tc.want {
				t.Errorf("RunEndOf(minMember %d, active %d, succeeded %d, failed %d, started %v) = %v, want %v",
					tc.minMember, tc.active, tc.succeeded, tc.failed, tc.started, got, tc.want)
			}
		})
	}
}
