// Package version reports what a gpu-gang binary was built from: the
// module's version and commit, and the Go and Kubernetes versions it was
// built with. Both gpu-gang-scheduler and podgroup-controller print it for
// --version, and the image's labels carry the same version and commit, so
// a running pod can be traced back to its source.
//
// The Go toolchain records most of it (runtime/debug.ReadBuildInfo). Builds
// outside a git checkout, or with -buildvcs=false, record no commit; the
// Makefile and the image builder then set it at link time:
//
//	-ldflags "-X github.com/gpu-gang/gpu-gang/pkg/version.version=v0.1.0
//	          -X github.com/gpu-gang/gpu-gang/pkg/version.commit=<sha>"
package version

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set at link time by the Makefile and the image builder; they win over
// what the toolchain recorded, which for a -buildvcs=false build is nothing.
var (
	version string
	commit  string
)

// kubernetesModule is the module whose version names the kube-scheduler
// gpu-gang is built on. A binary without it (podgroup-controller) reports
// the release of its Kubernetes client libraries: clientModule v0.X.Y is
// part of Kubernetes v1.X.Y.
const (
	kubernetesModule = "k8s.io/kubernetes"
	clientModule     = "k8s.io/client-go"
)

// Unknown stands for a field the build did not record.
const Unknown = "unknown"

// Info describes one build.
type Info struct {
	// Module is the main module's path.
	Module string `json:"module"`
	// Version is the module's version: a release tag, a pseudo-version,
	// or "(devel)" for a build of a working tree with no version set.
	Version string `json:"version"`
	// Commit is the git commit built, with "-dirty" appended when the
	// working tree had changes; Unknown when nothing recorded it.
	Commit string `json:"commit"`
	// CommitTime is the commit's time as the toolchain recorded it.
	CommitTime string `json:"commitTime,omitempty"`
	// Go is the toolchain's version.
	Go string `json:"go"`
	// Kubernetes is the version of k8s.io/kubernetes linked in, after any
	// replace directive, or the Kubernetes release of the k8s.io/client-go
	// linked in.
	Kubernetes string `json:"kubernetes"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
}

// Get describes the running binary.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuildInfo(bi, version, commit)
}

// fromBuildInfo reads bi, letting non-empty link-time values win.
func fromBuildInfo(bi *debug.BuildInfo, linkedVersion, linkedCommit string) Info {
	info := Info{
		Module: Unknown, Version: Unknown, Commit: Unknown, Kubernetes: Unknown,
		Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi != nil {
		info.Go = bi.GoVersion
		if bi.Main.Path != "" {
			info.Module = bi.Main.Path
		}
		if bi.Main.Version != "" {
			info.Version = bi.Main.Version
		}
		var revision string
		var modified bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.time":
				info.CommitTime = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if revision != "" {
			info.Commit = revision
			if modified {
				info.Commit += "-dirty"
			}
		}
		var client string
		for _, dep := range bi.Deps {
			v := dep.Version
			if dep.Replace != nil && dep.Replace.Version != "" {
				v = dep.Replace.Version
			}
			switch dep.Path {
			case kubernetesModule:
				info.Kubernetes = v
			case clientModule:
				client = v
			}
		}
		if rest, ok := strings.CutPrefix(client, "v0."); ok && info.Kubernetes == Unknown {
			info.Kubernetes = "v1." + rest
		}
	}
	if linkedVersion != "" {
		info.Version = linkedVersion
	}
	if linkedCommit != "" {
		info.Commit = linkedCommit
	}
	return info
}

// String renders the info on one line, as --version prints it after the
// program's name.
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, %s, kubernetes %s, %s, module %s)",
		i.Version, i.Commit, i.Go, i.Kubernetes, i.Platform, i.Module)
}

// JSON renders the info as one line of JSON, as --version=raw prints it.
func (i Info) JSON() string {
	data, err := json.Marshal(i)
	if err != nil { // a struct of strings always marshals
		panic(err)
	}
	return string(data)
}
