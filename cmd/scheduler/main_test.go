package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpu-gang/gpu-gang/pkg/version"
)

// --version and --version=raw print gpu-gang's build, not kube-scheduler's
// link-time placeholder, and start nothing.
func TestVersionFlag(t *testing.T) {
	want := version.Get()
	for _, tc := range []struct {
		arg   string
		check func(t *testing.T, out string)
	}{
		{"--version", func(t *testing.T, out string) {
			if line := strings.TrimSpace(out); line != "gpu-gang-scheduler "+want.String() {
				t.Errorf("--version printed %q, want %q", line, "gpu-gang-scheduler "+want.String())
			}
			if strings.Contains(out, "v0.0.0-master") {
				t.Errorf("--version printed kube-scheduler's placeholder: %q", out)
			}
		}},
		{"--version=raw", func(t *testing.T, out string) {
			var got version.Info
			if err := json.Unmarshal([]byte(out), &got); err != nil || got != want {
				t.Errorf("--version=raw printed %q (%v), want %s", out, err, want.JSON())
			}
		}},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			cmd := newCommand()
			// kube-scheduler's version flag is process-wide.
			t.Cleanup(func() { _ = cmd.Flags().Set("version", "false") })
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetArgs([]string{tc.arg})
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			tc.check(t, out.String())
		})
	}
}
