//go:build tools

// Package tools pins the Kubeflow training-operator, which the integration
// tests (test/integration/kubeflow_test.go) run as a separate process against
// the in-process API server. It has a module of its own, apart from
// hack/tools and hack/tools/kwok: it is built against k8s.io v0.29 and
// controller-runtime v0.17, and sharing a module would force it, or the
// other tools, onto releases they do not compile against.
//
// To change the version, run in this directory:
//
//	go get github.com/kubeflow/training-operator@<version> && go mod tidy
//
// and update the CRDs the tests install from its module (see
// test/integration/kubeflow_test.go).
package tools

import (
	_ "github.com/kubeflow/training-operator/cmd/training-operator.v1"
)
