package version

import (
	"encoding/json"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFromBuildInfo(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.0",
		Main:      debug.Module{Path: "github.com/gpu-gang/gpu-gang", Version: "v0.1.1-0.20261130215800-083ea14abc12+dirty"},
		Deps: []*debug.Module{
			{Path: "k8s.io/api", Version: "v0.37.2"},
			{Path: "k8s.io/kubernetes", Version: "v1.37.2"},
		},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "083ea14abc12"},
			{Key: "vcs.time", Value: "2026-11-30T21:58:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	replaced := &debug.BuildInfo{
		GoVersion: "go1.26.0",
		Main:      debug.Module{Path: "github.com/gpu-gang/gpu-gang", Version: "(devel)"},
		Deps:      []*debug.Module{{Path: "k8s.io/kubernetes", Version: "v1.36.0", Replace: &debug.Module{Path: "k8s.io/kubernetes", Version: "v1.37.2"}}},
	}
	tests := []struct {
		name          string
		bi            *debug.BuildInfo
		linkedVersion string
		linkedCommit  string
		want          Info
	}{
		{
			name: "stamped by the toolchain",
			bi:   stamped,
			want: Info{Module: "github.com/gpu-gang/gpu-gang", Version: "v0.1.1-0.20261130215800-083ea14abc12+dirty", Commit: "083ea14abc12-dirty",
				CommitTime: "2026-11-30T21:58:00Z", Go: "go1.26.0", Kubernetes: "v1.37.2", Platform: platform},
		},
		{
			name:          "link-time values win",
			bi:            stamped,
			linkedVersion: "v0.1.0", linkedCommit: "feedface",
			want: Info{Module: "github.com/gpu-gang/gpu-gang", Version: "v0.1.0", Commit: "feedface",
				CommitTime: "2026-11-30T21:58:00Z", Go: "go1.26.0", Kubernetes: "v1.37.2", Platform: platform},
		},
		{
			name: "no VCS stamp; Kubernetes through a replace directive",
			bi:   replaced,
			want: Info{Module: "github.com/gpu-gang/gpu-gang", Version: "(devel)", Commit: Unknown, Go: "go1.26.0", Kubernetes: "v1.37.2", Platform: platform},
		},
		{
			name: "no k8s.io/kubernetes: the release of client-go",
			bi: &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/gpu-gang/gpu-gang", Version: "(devel)"},
				Deps: []*debug.Module{{Path: "k8s.io/client-go", Version: "v0.37.0", Replace: &debug.Module{Path: "k8s.io/client-go", Version: "v0.37.2"}}}},
			want: Info{Module: "github.com/gpu-gang/gpu-gang", Version: "(devel)", Commit: Unknown, Go: "go1.26.0", Kubernetes: "v1.37.2", Platform: platform},
		},
		{
			name: "no build info at all",
			want: Info{Module: Unknown, Version: Unknown, Commit: Unknown, Go: runtime.Version(), Kubernetes: Unknown, Platform: platform},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := fromBuildInfo(tc.bi, tc.linkedVersion, tc.linkedCommit)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Info (-want,+got):\n%s", diff)
			}
		})
	}
}

// A test binary of this module records the module and the toolchain, and
// Get reports them; the line and the JSON carry every field.
func TestGetDescribesThisBinary(t *testing.T) {
	info := Get()
	if info.Go != runtime.Version() {
		t.Errorf("Go = %q, want %q", info.Go, runtime.Version())
	}
	if info.Module != "github.com/gpu-gang/gpu-gang" {
		t.Errorf("Module = %q, want github.com/gpu-gang/gpu-gang", info.Module)
	}
	line := info.String()
	for _, want := range []string{info.Version, "commit " + info.Commit, info.Go, "kubernetes " + info.Kubernetes} {
		if !strings.Contains(line, want) {
			t.Errorf("String() = %q, lacks %q", line, want)
		}
	}
	var back Info
	if err := json.Unmarshal([]byte(info.JSON()), &back); err != nil || back != info {
		t.Errorf("JSON() = %s does not read back as the same Info (%v)", info.JSON(), err)
	}
}
