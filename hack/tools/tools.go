//go:build tools

// Package tools pins the versions of the command-line tools that the hack/
// scripts build into bin/. It lives in its own module so that tool
// dependencies never enter the main module's go.mod or its build cache keys.
//
// To add a tool, add its main package below, then run in this directory:
//
//	go get <module>@<version> && go mod tidy
//
// and build it with tools::ensure in hack/lib/tools.sh.
package tools

import (
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
