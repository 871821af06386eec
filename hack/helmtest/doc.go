// Package helmtest holds the test that keeps charts/gpu-gang and the
// kustomize install in manifests/ the same install: it renders the chart
// with the Helm SDK, builds the kustomization with kustomize's API, and
// compares the two object by object.
//
// It is a module of its own: the Helm SDK requires newer versions of
// modules the scheduler is built with, and would move them in the main
// go.mod.
package helmtest
