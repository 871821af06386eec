//go:build tools

// Package tools pins kwok, which the simulator runs as a separate process to
// move bound pods through Running to Succeeded. kwok has a module of its own,
// apart from hack/tools: it is built against k8s.io v0.36 and controller-gen
// against v0.37, and one module would force both onto the newer release.
//
// To change the version, run in this directory:
//
//	go get sigs.k8s.io/kwok@<version> && go mod tidy
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
