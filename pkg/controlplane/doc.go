// Package controlplane runs a Kubernetes control plane inside the current
// process: an embedded etcd and a real kube-apiserver, and, on top of them,
// gpu-gang's scheduler started through kube-scheduler's own Setup and Run.
//
// The integration tests and the simulator use it; it has no dependency on
// package testing at its API. kube-apiserver's in-process start-up code is
// written for tests and reports failures through a testing.TB-like value;
// this package adapts it (see tb.go) so that such failures come back as
// errors.
//
// Only one ControlPlane that overrides feature gates, and only one
// Scheduler, may run in a process at a time: both touch process-wide state
// (the default feature gate, configz, legacy metrics registries).
//
// Importing this package registers klog's -v and -vmodule flags on
// flag.CommandLine (kube-apiserver's test starter does so on init). A program
// that also calls klog.InitFlags(nil) panics with "flag redefined"; give
// klog a FlagSet of its own instead.
//
// The code that finds kube-apiserver's certificate fixtures uses
// runtime.Caller, so binaries using this package must not be built with
// -trimpath.
package controlplane
